"""A check's hand on its own record: the one vocabulary of checks a
scenario calls. Each method takes runs, holds them to one property, raises
CheckFailure when it does not hold, and writes what it compared (and the
wrong answers its comparison rejected) into the record, so a scenario never
touches the record itself. The runs a check reads are kept (`runs`): their
engines' facts go into the record."""
from __future__ import annotations

import contextlib

import pytest

from harness.checks import soak as soak_checks
from harness.checks.aborts import check_aborted, check_freed, check_preempted
from harness.checks.budget_probe import check_encoder_chunk
from harness.checks.caches import check_cell_caches
from harness.checks.comparators import compare_greedy
from harness.checks.noise import NoiseProfile, NoProfile, exact_by_promise, four_bit_path, profile_for
from harness.checks.requests import check_alive, check_completed, check_edge_outcome, check_invariant, check_power
from harness.verdicts import Cause, CheckFailure, DetailedCause, Unsupported
from harness.engines.outcomes import Completion
from harness.lora import effects
from harness.memory.card import chunks
from harness.results.record import CheckRecord, json_safe
from harness.runner.run import Run
from harness.workloads import audio, images
from harness.workloads.chat import media_items


class Check:
    def __init__(self, record: CheckRecord, *, paths: tuple[str, ...] = ()):
        self.record = record
        self.runs: list[Run] = []  # every run this check read, in order
        # The numeric paths the check declares (its `numeric_paths` mark):
        # the only profiles its comparisons may use.
        self.paths = paths

    def read(self, *runs: Run) -> None:
        """Note runs as read by this check: their engines go in the record."""
        self.runs += [r for r in runs if not any(r is seen for seen in self.runs)]

    def note(self, evidence: dict) -> None:
        self.record.evidence.update(json_safe(evidence))

    def completed(self, run: Run) -> list[Completion]:
        """Every request of the run got an answer."""
        self.read(run)
        return check_completed(run.outcomes, run.labels)

    def one_pass(self, run: Run, *, modality: str, ragged: bool) -> None:
        """The premise, as the engine recorded it: every prompt of the run was
        scheduled in one step, and one `modality` encoder call held items of
        different lengths (ragged) or all of them at one length (equal)."""
        observed = self.one_step(run)
        calls = [e for e in observed if e.get("event") == "encoder" and e.get("modality") == modality]
        n = len(run.labels)
        if ragged and not any(len({tuple(s) for s in e.get("shapes", [])}) > 1 for e in calls):
            raise CheckFailure(Cause.PREMISE, f"no {modality} encoder call held items of different "
                               f"lengths: {[e.get('shapes') for e in calls]}")
        if not ragged and not any(e.get("items") == n and len({tuple(s) for s in e.get("shapes", [])}) == 1
                                  for e in calls):
            raise CheckFailure(Cause.PREMISE, f"no {modality} encoder call held all {n} items at one "
                               f"length: {[e.get('shapes') for e in calls]}")

    def placeholders_as_processor(self, run: Run, processor) -> None:
        """Each clip's audio placeholders in the engine's prompt are as many
        as the model's own processor puts there for a clip of its length: a
        count one short drops the clip's last frame without a word (vLLM
        #47652). Offline runs only (the engine hands back its prompt)."""
        self._placeholders(run, "audio", audio.audio_token_id(processor),
                           lambda request: audio.audio_tokens(processor, request.facts["samples"]), "clip")

    def image_placeholders_as_processor(self, run: Run, processor) -> None:
        """Each request's image placeholders in the engine's prompt are as
        many as the model's own processor puts there for its images' sizes."""
        self._placeholders(run, "image", images.image_token_id(processor),
                           lambda request: images.image_tokens(processor, request.source), "request")

    def _placeholders(self, run: Run, modality: str, token: int, want_of, item: str) -> None:
        completions = self.completed(run)
        counts = {}
        for label, request, completion in zip(run.labels, run.workload.requests, completions):
            if completion.prompt_token_ids is None:
                raise Unsupported("the engine did not hand back its prompt's tokens (a server): "
                                  "its placeholders cannot be counted")
            counts[label] = {"engine": completion.prompt_token_ids.count(token), "processor": want_of(request)}
        self.note({f"{modality}_placeholders": counts})
        wrong = {label: c for label, c in counts.items() if c["engine"] != c["processor"]}
        if wrong:
            label, c = next(iter(wrong.items()))
            raise CheckFailure(Cause.MISMATCH, f"input {label}: the engine placed {c['engine']} {modality} placeholder "
                               f"tokens, the model's processor {c['processor']}"
                               + (f" (and {len(wrong) - 1} more {item}s)" if len(wrong) > 1 else ""))

    def one_step(self, run: Run) -> list[dict]:
        """Every request of the run answered, and every prompt of it
        scheduled in one step, as the engine recorded it (a prompt in
        prefill gets many tokens in a step, a decoding one gets one).
        Returns what the engine observed; the record keeps each step's
        tokens and each encoder call's shapes."""
        self.completed(run)
        observed = self._observed(run)
        steps = [e for e in observed if e.get("event") == "step"]
        self.note({"observed_steps": [e.get("tokens") for e in steps],
                   "observed_encoder_calls": [e.get("shapes") for e in observed if e.get("event") == "encoder"]})
        n = len(run.labels)
        prefills = [sum(1 for t in e.get("tokens", {}).values() if t > 1) for e in steps]
        if max(prefills, default=0) < n:
            raise CheckFailure(Cause.PREMISE, f"the {n} prompts were not scheduled in one step: "
                               f"prompts in prefill per step {prefills}")
        return observed

    def served_together(self, run: Run, *, modality: str) -> None:
        """The premise of a concurrent load, observed in the server: one step
        held at least two of the requests in prefill, and one `modality`
        encoder call held at least two of their items. A server that serves
        the load one request at a time would make its invariance prove
        nothing. Against a remote server nothing can be observed: noted."""
        self.completed(run)
        if run.observed is None:
            self.note({"served_together": "not observed (no in-engine observer on this engine)"})
            return
        prefills = [sum(1 for t in e.get("tokens", {}).values() if t > 1)
                    for e in run.observed if e.get("event") == "step"]
        items = [e.get("items", 0) for e in run.observed
                 if e.get("event") == "encoder" and e.get("modality") == modality]
        self.note({"observed_prefills_per_step": prefills, f"observed_{modality}_items_per_call": items})
        if max(prefills, default=0) < 2 or max(items, default=0) < 2:
            raise CheckFailure(Cause.PREMISE, f"the {len(run.labels)} concurrent requests were not served "
                               f"together: prompts in prefill per step {prefills}, {modality} items per "
                               f"encoder call {items} (each needs 2 or more somewhere)")

    def served_from_cache(self, run: Run) -> None:
        """The premise of a cache check, observed: the multimodal processor
        cache was hit for every media item of the run (a record of cached
        tokens is not a hit)."""
        lookups = [e for e in self._observed(run) if e.get("event") == "mm_cache"]
        hits = sum(1 for e in lookups if e.get("hit"))
        sent = sum(media_items(r.conversation) for r in run.workload.requests)
        self.note({"mm_cache": {"lookups": len(lookups), "hits": hits, "media_items": sent}})
        if hits < sent:
            raise CheckFailure(Cause.PREMISE, f"the processor cache served {hits} of the run's {sent} media "
                               f"items ({len(lookups)} lookups observed): the cache this check judges was "
                               f"not used")

    def caches_as_set(self, rounds: list[Run], cell) -> None:
        """The premise of a cache-matrix cell, observed in its sequential
        rounds (the last repeating the first): the engine ran the cell's
        cache settings (harness/checks/caches.py)."""
        for run in rounds:
            self.completed(run)
        media = sum(media_items(r.conversation) for r in rounds[0].workload.requests)
        self.note(check_cell_caches(cell, rounds[0].labels, [(r.outcomes, r.observed) for r in rounds], media))

    def every_rank_stepped(self, run: Run, tp: int) -> None:
        """The premise of a TP check, observed: `tp` distinct worker processes
        each ran the run's steps (a rank left idle is no TP at all)."""
        pids = sorted({e.get("pid") for e in self._observed(run) if e.get("event") == "step"})
        self.note({"ranks_stepping": pids})
        if len(pids) < tp:
            raise CheckFailure(Cause.PREMISE, f"TP {tp}: the steps were seen in {len(pids)} worker "
                               f"process(es) {pids}, not {tp}")

    # --- the encoder's memory: harness/memory/card/chunks.py over what the engine observed ---

    def _note_chunks(self, run: Run) -> None:
        """Write what the encoder made of its memory into the record: one
        line per chunk decision, "free X, total Y -> chunks of k for n items"."""
        self.record.evidence.setdefault("encoder_chunks", []).extend(chunks.summary(self._observed(run)))

    def chunked(self, run: Run, what: str) -> None:
        """The premise of the low-memory runs: every request answered, and
        the encoder went through some batch of items in more than one pass."""
        self.completed(run)
        self._note_chunks(run)
        chunks.check_chunked(self._observed(run), what)

    def forced_chunk(self, run: Run, size: int) -> None:
        """The forced chunk size reached the encoder: every pass held `size`
        items, but a batch's last, which holds the rest."""
        self.completed(run)
        self._note_chunks(run)
        chunks.check_forced_chunk(self._observed(run), size, f"the batch forced to chunks of {size}")

    def chunk_from_free(self, usual: Run, low_free: Run) -> None:
        """The encoder hands its chunk function the free memory its query
        answered, not the total, in both runs; and with free memory far
        below the total (`low_free`) its chunks are smaller than `usual`'s."""
        self.completed(low_free)
        self._note_chunks(low_free)
        for run, what in ((usual, "the batch on the card"), (low_free, "the low-free batch")):
            chunks.check_chunk_from_free(self._observed(run), what)
        self.note({"chunks": chunks.check_shrinks(self._observed(usual), self._observed(low_free),
                                                  "the low-free batch")})

    def transients_within_budget(self, run: Run, what: str) -> None:
        """Each vision-tower pass's transient, measured in the engine, stays
        within the budget the engine stated for its chunk (where the device
        allocator measured it)."""
        self.completed(run)
        rows = chunks.transients(self._observed(run))
        self.note({"transients": rows})
        chunks.check_transient_within_budget(rows, what)

    def passes_within_stated_chunk(self, run: Run, *, free: int, total: int, stated, what: str) -> None:
        """Every vision pass holds no more items than the engine's own chunk
        function (`stated`) allows for this free memory."""
        self.completed(run)
        self._note_chunks(run)
        self.note(chunks.check_passes_within_stated_chunk(self._observed(run), free, total, stated, what))

    def peak_within_card(self, run: Run, card) -> None:
        """The engine's peak memory in the run's scenario stays within the
        budget it was given on the emulated card (skipped where the card
        lives in the memory query only)."""
        self.read(run)
        self.note(card.check_peak(run.memory()))

    def chunk_contract(self, fn, source: str) -> None:
        """The engine's own chunk-size function keeps its stated promise
        over every card profile and a grid of free memory."""
        self.note({"source": source})
        check_encoder_chunk(fn, source=source)

    def _observed(self, run: Run) -> list[dict]:
        self.read(run)
        run.engine  # a run whose engine never started fails with its cause first
        if run.observed is None:
            pytest.skip(f"{run.use.kind} engine: its steps and encoder calls cannot be observed "
                        "(the premise needs the in-engine observer)")
        return run.observed

    def isolated(self, reference: Run, label: str) -> None:
        """A reference took nothing from a cache: no cached prompt tokens, and,
        where the engine is observed, an encoder call for every media item it
        was sent (an encoder cache serves a repeat without one). A reference
        that went unanswered fails with its own cause first: a dead
        reference engine encodes nothing more, and that is not a cache."""
        self.read(reference)
        check_completed([reference[label]], [f"{label} (solo)"])
        if reference.engine.kind == "remote":
            self.note({"isolation": "not observed: the reference ran on the remote server itself (media "
                                    "renamed afresh), whose caches and steps the harness cannot see"})
        cached = getattr(reference[label], "cached_tokens", None)
        self.record.evidence.setdefault("reference_cached_tokens", {})[label] = cached
        if cached:
            raise CheckFailure(Cause.PREMISE, f"reference for {label} took {cached} of its prompt tokens "
                               f"from a cache: it is not isolated from the run it judges")
        if reference.observed is None:
            return
        # Only answered requests must have been encoded (another reference
        # request may have died with its engine before its encoder call).
        sent = sum(media_items(r.conversation) for r, result in zip(reference.workload.requests,
                                                                     reference.outcomes, strict=True)
                   if isinstance(result, Completion))
        encoded = sum(e.get("items", 0) for e in reference.observed if e.get("event") == "encoder")
        self.record.evidence["reference_media_items"] = {"sent": sent, "encoded": encoded}
        if encoded < sent:
            raise CheckFailure(Cause.PREMISE, f"the reference engine encoded {encoded} of the {sent} media "
                               f"items it was sent: the rest came from a cache, so it is not isolated "
                               f"from the run it judges")

    # --- comparisons: each with the profile of its numeric path, and power ---

    def profile(self, run: Run, path: str = "same-stack") -> NoiseProfile:
        """The noise profile that judges `run`'s comparisons on this numeric
        path: its host kind's, model's and dtype's, calibrated on the tier's
        pinned release (harness.calibration). The record names it, the host
        kind it judged on, and whether the engine judged is the one that
        calibrated it. A path the check did not declare is a harness error;
        a host kind with no profile fails, saying how to calibrate it."""
        if path not in self.paths:
            raise CheckFailure(DetailedCause(Cause.HARNESS, "undeclared numeric path"),
                               f"the check compares on numeric path {path!r} but declares "
                               f"{list(self.paths) or 'none'} (its numeric_paths mark): calibration "
                               f"measures only declared paths")
        use, ident = run.use, run.engine.identity
        if path in ("w4a16", "w4a8"):
            path = four_bit_path(ident.get("isa"))
        tier, model = use.entry.tier, use.entry.name
        dtype = (use.args or use.entry.engine_args).get("dtype")
        if path == "same-stack" and ident.get("batch_invariant"):
            profile = exact_by_promise(tier, use.host_kind, model, dtype, path,
                                       "vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1): one stack's "
                                       "answers do not depend on the batch")
        else:
            try:
                profile = profile_for(tier, use.host_kind, model, dtype, path)
            except NoProfile as e:
                raise CheckFailure(DetailedCause(Cause.HARNESS, "no noise profile for this host kind"),
                                   str(e), evidence={"host_kind": use.host_kind}) from None
        engine = f"{ident.get('distribution')} {ident.get('version')}"
        self.record.evidence.setdefault("noise_profiles", {})[path] = profile.to_dict() | {
            "judged_on": use.host_kind, "judged_engine": engine,
            "self_calibrated": engine == profile.calibrated_with,
            **({"host_assumed": use.host_assumed} if use.host_assumed else {})}
        return profile

    def invariant(self, run: Run, reference: Run, label: str, *, wrong: dict | None = None) -> None:
        """The request's output in `run` equals its output in `reference`,
        alone on the reference engine; the comparator rejects the other
        requests' references (`wrong`: other wrong answers besides)."""
        self.record.params["input"] = label
        self.isolated(reference, label)
        got, ref = run[label], reference[label]
        self.record.outputs = {run.how: got.to_dict(), reference.how: ref.to_dict()}
        self._held(run, reference, label, wrong=wrong)

    def all_invariant(self, run: Run, reference: Run, *, wrong: dict[str, dict] | None = None,
                      labels: list[str] | None = None, path: str = "same-stack") -> None:
        """Every request's output in `run` equals its output in `reference`
        (`wrong`: per label, wrong answers besides the other references;
        `labels`: only these requests; `path`: the numeric path between them)."""
        self.note({"reference": f"{reference.engine.kind} engine, {reference.how}"})
        for label in labels if labels is not None else run.labels:
            self.isolated(reference, label)
            self._held(run, reference, label, wrong=(wrong or {}).get(label), path=path)

    def told_apart(self, other: Run, reference: Run, name: str, *, path: str = "same-stack") -> dict[str, dict]:
        """`other`'s answers to the same inputs (another setting's), as the
        wrong answers named `name` for `all_invariant`, where the comparator
        on `path` tells them from `reference`'s. An answer within the path's
        noise (on an exact host: the same tokens and logprobs) is a right
        answer, not one a bug would give: the record lists it, and power is
        not asked over it."""
        wrong, within = {}, {}
        profile = self.profile(reference, path)
        for label in reference.labels:
            answer = other[label]
            if not isinstance(answer, Completion):
                continue
            cmp = compare_greedy(answer, reference[label], profile, labels=(name, f"{label} ({reference.how})"),
                                 follow=reference.follower(label))
            if cmp.ok:
                within[label] = cmp.message
            else:
                wrong[label] = {name: answer}
        if within:
            self.record.evidence.setdefault("within_noise", {})[name] = within
        return wrong

    def across_tp(self, run: Run, reference: Run, tp: int) -> None:
        """Every request's output at TP `tp` equals its output at TP 1, within
        the TP profile, followed past any split it tolerates."""
        for label in run.labels:
            self._held(run, reference, label, path="tp", context=f"TP {tp}", reference_name="TP 1")

    def agrees(self, run: Run, reference: Run, *, wrong: dict[str, dict] | None = None,
               path: str = "hf-vs-vllm") -> None:
        """Every request's greedy output in `run` agrees with `reference`,
        another stack's (HF transformers), within that path's profile,
        followed past any split on the reference's stack."""
        # Both sides' answers, kept before they are judged, so that two runs can compare them.
        self.record.outputs = {f"{side.how}[{label}]": side[label].to_dict()
                               for label in run.labels for side in (run, reference)}
        for label in run.labels:
            self._held(run, reference, label, path=path, context=run.how, reference_name=reference.how,
                       wrong=(wrong or {}).get(label))

    def _held(self, run: Run, reference: Run, label: str, *, path: str = "same-stack",
              context: str | None = None, reference_name: str = "solo", wrong: dict | None = None) -> None:
        """One request's comparison, then its power: the same comparator
        rejects each other request's reference in `reference` and each of
        `wrong` in place of this request's. Both go in the record; an answer
        that fails is told with the wrong answer it equals, where it equals
        one (another request's, its input under another adapter)."""
        self.read(run, reference)
        # An answer that never came (a crash, a known issue) is the verdict,
        # whether or not this host kind has a profile to compare by.
        check_completed([run[label], reference[label]], [f"{label} ({context or run.how})",
                                                         f"{label} ({reference_name})"])
        profile = self.profile(run, path)
        follow = reference.follower(label)
        # The wrong answers given first: a failing answer is named after them first.
        alternatives = dict(wrong or {}) | {f"{other}'s {reference_name} answer": reference[other]
                                            for other in reference.labels if other != label}
        try:
            evidence = check_invariant(run[label], reference[label], label, profile, context=context or run.how,
                                       reference=reference_name, follow=follow)
        except CheckFailure as failure:
            if failure.cause == Cause.MISMATCH:
                _name_what_it_equals(failure, run[label], alternatives, profile)
            raise
        evidence["rejected"] = check_power(reference[label], label, alternatives, profile,
                                           reference=reference_name, follow=follow)
        self.record.evidence.setdefault("comparisons", {})[label] = evidence

    def lora(self, **context) -> None:
        """The record's LoRA context: adapters, their targets, TP size, the
        engine's LoRA settings; shown with the check's parameters."""
        self.record.params.update(json_safe(context))

    def adapters_in_one_step(self, run: Run) -> None:
        """The premise of a mixed batch, as the engine recorded it: one step
        held every prompt of the run in prefill, each under the adapter it
        asked for (base requests under none)."""
        self.completed(run)
        steps = [e for e in self._observed(run) if e.get("event") == "step"]
        want = sorted(r.adapter.name if r.adapter else "base" for r in run.workload.requests)
        seen = []
        for step in steps:
            prefill = {rid for rid, t in step.get("tokens", {}).items() if t > 1}
            names = sorted((step.get("loras") or {}).get(rid) or "base" for rid in prefill)
            seen.append(names)
            if names == want:
                self.note({"one_step_adapters": names})
                return
        raise CheckFailure(Cause.PREMISE, f"no step held the {len(want)} prompts under their adapters "
                           f"{want}: adapters of the prompts in prefill per step {seen}")

    def rows_as_solo(self, run: Run, reference: Run, crossed: Run) -> None:
        """Every request's output in a mixed run equals its solo output, and
        the comparator rejects, besides the other rows' answers, the row's
        own input alone under every other adapter and the base model
        (`crossed`: each row's input under each, labelled "<row>~<adapter>").
        A row that fails is told with the adapter whose solo output it
        equals, when it equals one (a base row that ran under an adapter)."""
        self.note({"reference": f"{reference.engine.kind} engine, {reference.how}"})
        for request, label in zip(run.workload.requests, run.labels):
            self.isolated(reference, label)
            own = request.adapter.name if request.adapter else "base"
            solos = {c.split("~", 1)[1]: crossed[c] for c in crossed.labels if c.startswith(f"{label}~")}
            self._held(run, reference, label, wrong={f"its input under {name}": answer
                                                     for name, answer in solos.items() if name != own})

    @contextlib.contextmanager
    def _lora_expected(self, run: Run):
        """An engine refusal (`unsupported`) inside, where the model matrix
        says this engine version serves LoRA (`lora.supported`), fails as a
        regression instead."""
        try:
            yield
        except Unsupported as refusal:
            version = run.use.version
            if run.use.entry.serves_lora(version):
                raise effects.as_regression(refusal, version, run.use.entry.lora["supported"]) from None
            raise

    def lora_served(self, served: Run) -> None:
        """The engine started with LoRA on and answered; an engine that says
        it serves no LoRA for the model is `unsupported`, with its words (a
        regression where the matrix says it does)."""
        self.read(served)
        with self._lora_expected(served):
            effects.raise_if_refused(served.use.failure)
        self.completed(served)

    def takes_effect(self, alone: Run, *, adapter: str, group: str | None = None, hf: Run | None = None) -> None:
        """An effect workload (its input under the base model, then under the
        adapter, each alone): the adapter's answer is not the base answer,
        beyond the engine's noise. `hf`: the same on HF + peft, which must
        show the change itself (the premise), where it runs."""
        self.read(alone, *([hf] if hf is not None else []))
        base, adapted = alone.labels
        modality = alone.workload.requests[1].facts.get("modality", adapted)
        profile = self.profile(alone)
        if hf is not None:
            self.note(effects.check_premise(hf[adapted], hf[base], adapted, profile))
        with self._lora_expected(alone):
            self.note(effects.check_takes_effect(alone[adapted], alone[base], profile, adapter=adapter,
                                                 group=group, input_label=modality))

    def untouched(self, alone: Run, *, adapter: str) -> None:
        """An effect workload whose input the adapter cannot reach: its answer
        under the adapter is the base answer, within the engine's noise."""
        self.read(alone)
        base, adapted = alone.labels
        modality = alone.workload.requests[1].facts.get("modality", adapted)
        self.note(effects.untouched(alone[adapted], alone[base], self.profile(alone), adapter=adapter,
                                    input_label=modality))

    def edge_outcome(self, run: Run, expect: str, reference: Run | None = None) -> None:
        """The single input of `run` got the outcome it must get (see
        harness.checks.requests.check_edge_outcome); `reference` gives the prompt
        tokens it is held to."""
        self.read(run, *([reference] if reference is not None else []))
        label = run.labels[0]
        self.record.params.setdefault("input", label)
        self.note(check_edge_outcome(run[0], label, expect, reference[0] if reference else None))

    def nothing_found(self, result) -> None:
        """A fuzz search (harness.fuzz.search.Search: the fuzzer is a layer
        above the runner) judged examples and found no failure. One that
        found any fails with the cause of the first, as shrunk; the others
        are listed (`other_failures`: the run is green only if every one of
        them is a known issue). The record holds every failure's shrunk
        spec (its workload, replay command and reproducer are noted by the
        search)."""
        if result.examples == 0:
            raise CheckFailure(Cause.PREMISE, f"the fuzzer judged no example within its budget of "
                               f"{result.budget_s:g} s (its engines' starts took it)")
        if not result.found:
            return
        first, *others = result.found
        raise CheckFailure(first.failure.cause, f"shrunk to {first.shape}: {first.message}",
                           divergence=first.divergence,
                           evidence={**_outcome(first), "shrunk": [f.to_dict() for f in result.found],
                                     "other_failures": [{"cause": f.cause, "evidence": _outcome(f),
                                                         "message": f"shrunk to {f.shape}: {f.message}"}
                                                        for f in others]})

    # --- aborts and preemption: harness/checks/aborts.py over what the scheduler observed ---

    def preempted_and_resumed(self, run: Run) -> None:
        """Premise of a preemption check, observed: every request answered,
        and the scheduler preempted some of them and resumed and finished
        each one."""
        self.completed(run)
        self.note({"preemption": check_preempted(self._observed(run))})

    def aborted(self, run: Run, abandoned: int) -> None:
        """Premise of an abort check, observed: the scheduler aborted the
        requests of clients that went away mid-stream (no more), one at
        least while it held KV blocks."""
        self.completed(run)
        self.note({"aborts": check_aborted(self._observed(run), abandoned)})

    def freed(self, run: Run) -> None:
        """Once the scheduler is idle after the run, its requests hold no KV
        block and no encoder-cache slot (`leak` otherwise)."""
        self.note({"memory_freed": check_freed(self._observed(run))})

    def alive(self, run: Run, *, after: str) -> None:
        """The run's engine still answers a trivial request."""
        self.read(run)
        check_alive(run.engine, after=after)

    # --- a soak: harness/checks/soak.py over what harness/soak/drive.py left ---

    def soak_answered(self, soak, run: Run) -> None:
        """The soak ran its time, every request answered (a crash or a hang
        that ended it fails with its cause). `run`: the soak as one run."""
        self.read(run)
        run.require()
        self.note(soak_checks.check_answered(soak))

    def soak_sample(self, soak, run: Run, settings) -> list[int]:
        """The waves to judge against references: one per timeslice after the
        warm-up (premise: there are some); noted in the record."""
        self.read(run)
        run.require()
        waves = soak_checks.sampled_waves(soak, settings)
        self.note({"sampled_waves": waves})
        return waves

    def no_leak(self, soak, run: Run, settings) -> None:
        """No engine process's memory grew past the leak bound per 1,000
        requests after the warm-up: the fit and its interval per process."""
        self.read(run)
        run.require()
        self.note(soak_checks.check_no_leak(soak, settings))

    def no_drift(self, soak, run: Run, settings) -> None:
        """The last timeslice's median TTFT and TPOT within the drift bounds
        of the first's."""
        self.read(run)
        run.require()
        self.note(soak_checks.check_no_drift(soak, settings))

    def goodput(self, soak, run: Run, settings) -> None:
        """The share of requests within the tier's SLO is at least its goodput."""
        self.read(run)
        run.require()
        self.note(soak_checks.check_goodput(soak, settings))

    def reloaded(self, run: Run, adapter) -> None:
        """The server that served `run` unloads the adapter's name and loads
        this draw under it; a refusal fails with the server's status and
        message."""
        self.read(run)
        self.note(effects.reload_adapter(run.engine, adapter))


def _outcome(found) -> dict:
    """A found failure's request outcome (an HTTP status a known issue may name)."""
    result = found.failure.evidence.get("result")
    return {"result": result} if result is not None else {}


def _name_what_it_equals(failure: CheckFailure, answer, alternatives: dict, profile: NoiseProfile) -> None:
    """Say which wrong answer a failing answer is, where it is one."""
    if not isinstance(answer, Completion):
        return
    same = next((name for name, alt in alternatives.items()
                 if isinstance(alt, Completion) and compare_greedy(answer, alt, profile).ok), None)
    if same:
        failure.message += f"; it equals {same}"
        failure.evidence["equals"] = same
        failure.args = (f"[{failure.cause.value}] {failure.message}",)
