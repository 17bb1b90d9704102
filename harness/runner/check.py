"""A check's hand on its own record: each method holds the run to one
property, raises CheckFailure when it does not hold, and writes what it
compared into the record, so a scenario never touches the record itself."""
from __future__ import annotations

import pytest

from harness.checks.requests import check_agreement, check_alive, check_completed, check_edge_outcome, check_invariant
from harness.checks.verdicts import Cause, CheckFailure
from harness.engines.outcomes import Completion
from harness.lora.effects import shows_adapter
from harness.memory.card.chunks import summary as chunk_summary
from harness.results.record import CheckRecord, json_safe
from harness.runner.run import Run
from harness.workloads.chat import media_items


class Check:
    def __init__(self, record: CheckRecord):
        self.record = record

    def note(self, evidence: dict) -> None:
        self.record.evidence.update(json_safe(evidence))

    def completed(self, run: Run) -> list[Completion]:
        """Every request of the run got an answer."""
        return check_completed(run.outcomes, run.labels)

    def one_pass(self, run: Run, *, modality: str, ragged: bool) -> None:
        """The premise, as the engine recorded it: every prompt of the run was
        scheduled in one step, and one `modality` encoder call held items of
        different lengths (ragged) or all of them at one length (equal)."""
        self.completed(run)
        observed = self._observed(run)
        steps = [e for e in observed if e.get("event") == "step"]
        calls = [e for e in observed if e.get("event") == "encoder" and e.get("modality") == modality]
        self.note({"observed_steps": [e.get("tokens") for e in steps],
                   "observed_encoder_calls": [e.get("shapes") for e in calls]})
        n = len(run.labels)
        # A prompt in prefill gets many tokens in a step, a decoding one gets one.
        prefills = [sum(1 for t in e.get("tokens", {}).values() if t > 1) for e in steps]
        if max(prefills, default=0) < n:
            raise CheckFailure(Cause.PREMISE, f"the {n} prompts were not scheduled in one step: "
                               f"prompts in prefill per step {prefills}")
        if ragged and not any(len({tuple(s) for s in e.get("shapes", [])}) > 1 for e in calls):
            raise CheckFailure(Cause.PREMISE, f"no {modality} encoder call held items of different "
                               f"lengths: {[e.get('shapes') for e in calls]}")
        if not ragged and not any(e.get("items") == n and len({tuple(s) for s in e.get("shapes", [])}) == 1
                                  for e in calls):
            raise CheckFailure(Cause.PREMISE, f"no {modality} encoder call held all {n} items at one "
                               f"length: {[e.get('shapes') for e in calls]}")

    def chunks(self, run: Run) -> None:
        """Write what the encoder made of its memory into the record: one
        line per chunk decision, "free X, total Y -> chunks of k for n items"."""
        self.record.evidence.setdefault("encoder_chunks", []).extend(chunk_summary(self._observed(run)))

    @staticmethod
    def _observed(run: Run) -> list[dict]:
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
        check_completed([reference[label]], [f"{label} (solo)"])
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

    def invariant(self, run: Run, reference: Run, label: str) -> None:
        """The request's output in `run` equals its output in `reference`."""
        self.record.params["input"] = label
        self.isolated(reference, label)
        got, ref = run[label], reference[label]
        self.record.outputs = {run.how: got.to_dict(), reference.how: ref.to_dict()}
        self.note(check_invariant(got, ref, label, context=run.how))

    def all_invariant(self, run: Run, reference: Run) -> None:
        """Every request's output in `run` equals its output in `reference`."""
        self.note({"reference": f"{reference.engine.kind} engine, {reference.how}"})
        for label in run.labels:
            self.isolated(reference, label)
            check_invariant(run[label], reference[label], label, context=run.how)

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

    def rows_as_solo(self, run: Run, reference: Run, crossed: Run | None = None) -> None:
        """Every request's output in a mixed run equals its solo output. A
        row that does not is told with the adapter whose solo output it
        equals, when it equals one (a base row that ran under an adapter):
        `crossed` holds each row's input alone under every adapter, labelled
        "<row>~<adapter>", and is read only when a row fails."""
        self.note({"reference": f"{reference.engine.kind} engine, {reference.how}"})
        for label in run.labels:
            self.isolated(reference, label)
            try:
                check_invariant(run[label], reference[label], label, context=run.how)
            except CheckFailure as failure:
                solos = {} if crossed is None else {
                    c.split("~", 1)[1]: crossed[c] for c in crossed.labels if c.startswith(f"{label}~")}
                wearing = shows_adapter(run[label], solos)
                if wearing:
                    failure.message += f"; it equals the solo output under {wearing}"
                    failure.evidence["ran_as"] = wearing
                    failure.args = (f"[{failure.cause.value}] {failure.message}",)
                raise

    def agrees(self, run: Run, reference: Run) -> None:
        """Every request's greedy output in `run` agrees with `reference`,
        another stack's (see harness.checks.check_agreement)."""
        labels = (reference.how, run.how)
        # Both sides' answers, kept before they are judged, so that two runs can compare them.
        self.record.outputs = {f"{side.how}[{label}]": side[label].to_dict()
                               for label in run.labels for side in (run, reference)}
        self.note({"agreement": [check_agreement(run[label], reference[label], label, labels=labels)
                                 for label in run.labels]})

    def edge_outcome(self, run: Run, expect: str, reference: Run | None = None) -> None:
        """The single input of `run` got the outcome it must get (see
        harness.checks.check_edge_outcome); `reference` gives the prompt
        tokens it is held to."""
        label = run.labels[0]
        self.record.params.setdefault("input", label)
        self.note(check_edge_outcome(run[0], label, expect, reference[0] if reference else None))

    def alive(self, run: Run, *, after: str) -> None:
        check_alive(run.engine, after=after)
