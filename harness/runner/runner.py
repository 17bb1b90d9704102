"""The runner a scenario holds for one model, in the manner of vLLM's
`vllm_runner`: the scenario says what to send and how, the runner owns the
engines, names the scenario and attaches what happened to the checks.

    batch(workload)       every request in one generate call (offline engine);
                          each request under its own LoRA adapter, if it has one
    each_alone(workload)  each request alone: the references
    dequantized_reference(workload)  a quantized build's reference: HF
                          transformers on the model dequantized
    hf_reference(workload)  HF transformers (+ peft for a request's adapter)
    concurrent(workload)  every request at once over HTTP (server engine)
    one(workload)         a single request over HTTP (server engine)
    rounds(workload)      the workload several times to one server, later rounds
                          repeating what the caches hold (server engine)
    soak(mix, seconds)    waves of streamed requests over HTTP for a time
                          budget (server engine; harness.soak.drive)

Which engine computes a reference is decided here, in `each_alone` and
`dequantized_reference`, and nowhere else.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
import uuid
from typing import Callable

import pytest

from harness.verdicts import Cause, CheckFailure
from harness.engines import architecture
from harness.engines.base import Sampling
from harness.engines.outcomes import Completion, EngineStartupFailed, Result
from harness.engines.devices import Lease, NoDeviceLeft
from harness.engines.hosts import host_kind
from harness.engines.parallel import NotHostable, heads_divide, placement, reference_layout, tensor_parallel
from harness.engines.pool import EnginePool, EngineSpec
from harness.engines.startup import STARTED_KEY
from harness.models import ModelEntry
from harness.runner.run import EngineUse, Run, Sent
from harness.soak.drive import Soak, drive, gpu_reader
from harness.soak.load import SoakMix
from harness.workloads.chat import with_content_uuids, with_uuids
from harness.workloads.request import Workload

# A reference engine keeps nothing from one request for the next.
REFERENCE_ARGS = {"enable_prefix_caching": False, "mm_processor_cache_gb": 0}
# How long a server may take to abort the requests whose clients went away.
IDLE_WAIT_S = 30.0
# The engine arguments that turn LoRA on and size it.
LORA_ARGS = ("enable_lora", "max_lora_rank", "max_loras", "enable_tower_connector_lora", "lora_modules")


def reference_args(engine_args: dict | None) -> dict:
    """A reference engine's call arguments: the call's, its caches off."""
    return {**(engine_args or {}), **REFERENCE_ARGS}


class Runner:
    def __init__(self, entry: ModelEntry, model: str, family: str, pool: EnginePool, *,
                 remote_url: str | None = None, env: dict | None = None, on_engine: Callable,
                 on_open: Callable[[EngineSpec, dict | None], None] = lambda spec, call_args: None):
        self.entry, self.model, self.family, self.pool = entry, model, family, pool
        # The family's settings from the matrix: the entry's engine args, the
        # family's (models.toml [per_family.<family>]) over them.
        self.family_args = entry.family_args(family)
        self.engine_args = entry.engine_args_for(family)
        # Why this family's load runs without LoRA adapters (lora_in_load).
        self.lora_left_out: str | None = None
        # A server the harness did not start: every engine of this runner is
        # that server (decided here, nowhere else).
        self.remote_url = remote_url
        self.env = {**entry.env, **(env or {})}
        self._on_engine = on_engine
        # Told of each engine about to be opened, and the call's arguments
        # over the family's: the scheduler starts the next one ahead.
        self._on_open = on_open
        self._uses: dict[str, EngineUse] = {}
        # (the card's engine arguments, its GPU): engines opened with them run there.
        self._card: tuple[dict, Lease] | None = None

    def on_card(self, card_args: dict, lease: Lease) -> None:
        """Engines opened with the card's arguments run on the card's GPU
        (where its ballast is), not on GPUs of their own."""
        self._card = (card_args, lease)

    def lora_in_load(self) -> bool:
        """Whether this family's load (the soak's, the fuzzer's) may run
        requests under LoRA adapters: its engine arguments enable LoRA, and
        the engine's version is not outside the matrix's `lora.supported`
        for the model. Outside it (an older release in a bisect or an A/B)
        the engine would refuse to start at all with LoRA on, so the
        family's engines start without it from here on, and `lora_left_out`
        says why. Where the matrix names no versions, LoRA stays on: a
        refusal is then the start-up failure it is."""
        if not self.engine_args.get("enable_lora"):
            return False
        supported = (self.entry.lora or {}).get("supported")
        version = None if self.remote_url else self.pool.interpreter.identity.get("version")
        if supported is None or version is None or self.entry.serves_lora(version):
            return True
        self.engine_args = {k: v for k, v in self.engine_args.items() if k not in LORA_ARGS}
        self.lora_left_out = (f"engine {version} is outside the versions that serve LoRA for this model "
                              f"(lora.supported = {supported!r}): requests run under the base model only")
        return False

    def mm_limit(self, modality: str) -> int:
        """Items of a modality one prompt may carry on this model's engine."""
        return self.engine_args.get("limit_mm_per_prompt", {}).get(modality, 1)

    def args_for(self, engine_args: dict | None) -> dict:
        """What an engine of this family gets: the matrix's settings, then
        what the call asks for itself."""
        return {**self.engine_args, **(engine_args or {})}

    # --- the ways to run ---------------------------------------------------
    def batch(self, workload: Workload, sampling: Sampling, *, engine_args: dict | None = None,
              steer: dict | None = None, media_names: str | None = None) -> Run:
        """Every request in one generate call. Media are renamed afresh for
        the call, so no cache left by an earlier run on the engine serves it.
        `steer`: the engine's memory answer and chunk size for this run
        (harness.engines.control). `media_names`: name media by this tag and
        their content instead, the same in every batch given the same tag,
        so that a later batch is served from the caches an earlier one left
        (what a cache check needs)."""
        use = self._use("offline", workload, engine_args)
        tag = f"mmh-batch-{uuid.uuid4().hex[:12]}"
        convs = ([with_content_uuids(c, media_names) for c in _conversations(workload)] if media_names
                 else [with_uuids(c, f"{tag}-{i}") for i, c in enumerate(_conversations(workload))])

        def send(engine):
            with engine.control.steering(**(steer or {})):
                return engine.chat(convs, sampling, adapters=workload.adapters)
        return Run.sent("batch", workload, _sent(use, workload, send, sampling))

    def each_alone(self, workload: Workload, sampling: Sampling, *,
                   engine_args: dict | None = None, memo: dict | None = None) -> Run:
        """The references, isolated from the runs they judge: a reference
        engine of their own (prefix caching and the processor cache off),
        and media renamed afresh for every request, so no cache of any
        engine can serve them. Against a remote server, the server itself,
        with the fresh names alone. Lazy: computed when a check first reads
        them. `memo`: a request's reference computed once for every run
        that sends the same conversation, adapter and sampling (the
        fuzzer's, whose shrinking sends one request in many batches); each
        keeps what the engine observed while it alone was sent."""
        kind = "server" if self.remote_url else "offline"
        args = None if self.remote_url else reference_args(engine_args)
        tag = f"mmh-ref-{uuid.uuid4().hex[:12]}"

        def alone(work: Workload) -> Callable:
            return lambda engine: [engine.chat([with_uuids(q.conversation, f"{tag}-{uuid.uuid4().hex[:8]}")],
                                               sampling, adapters=[q.adapter] if q.adapter else None)[0]
                                   for q in work.requests]

        def send() -> Sent:
            use = self._use(kind, workload, args, role="reference", call_args=engine_args)
            if memo is None:
                return _sent(use, workload, alone(workload), sampling)
            return _remembered(use, workload, sampling, memo, lambda one: _sent(use, one, alone(one), sampling))
        return Run.deferred("each_alone", workload, send)

    def dequantized_reference(self, workload: Workload, sampling: Sampling) -> Run:
        """The reference of a quantized build: HF transformers in this
        process, on the model the harness dequantized from the packed
        checkpoint (harness.references.dequantize), so it shares no code with the
        engine's loader. Lazy, like each_alone."""
        def send() -> Sent:
            from harness.references.dequantize import dequantize_model
            from harness.references.hf import HfReference

            use = EngineUse("hf-transformers", self.use_label(workload, "hf-dequantized"), self.entry)
            with tempfile.TemporaryDirectory(prefix="mmh-dequantized-") as tmp:
                use.engine = HfReference(dequantize_model(self.model, tmp))  # loaded: tmp may go
            return Sent(use, use.engine.chat(_conversations(workload), sampling),
                        follow=_follower(workload, sampling, lambda q, conv, s, f: use.engine.chat([conv], s, [f])[0]))

        return Run.deferred("hf-dequantized", workload, send)

    def hf_reference(self, workload: Workload, sampling: Sampling) -> Run:
        """HF transformers in this process on the same checkpoint, with peft
        loading each request's adapter: the reference another stack gives.
        Media are fed as the harness built them, so no engine cache is
        involved. Lazy, like each_alone."""
        def send() -> Sent:
            from harness.references.hf import HfReference

            use = EngineUse("hf-transformers", self.use_label(workload, "hf-peft"), self.entry)
            outcomes, models = {}, {}
            # bfloat16, the engines' dtype: 11 of 14 answers token-equal with
            # vLLM against 3 of 14 in float32 (at output_norm_gain 16).
            for adapter in dict.fromkeys(q.adapter for q in workload.requests):
                use.engine = models[adapter] = HfReference(self.model, dtype="bfloat16",
                                                           adapter=adapter.path if adapter else None)
                for i, q in enumerate(workload.requests):
                    if q.adapter == adapter:
                        outcomes[i] = use.engine.chat([q.conversation], sampling)[0]
            return Sent(use, [outcomes[i] for i in range(len(workload.requests))],
                        follow=_follower(workload, sampling,
                                         lambda q, conv, s, f: models[q.adapter].chat([conv], s, [f])[0]))

        return Run.deferred("hf-peft", workload, send)

    def concurrent(self, workload: Workload, sampling: Sampling, *, engine_args: dict | None = None,
                   env: dict | None = None) -> Run:
        """Every request at once over HTTP; a request's adapter is the model it
        names. `env`: the server's own additions (RUNTIME_LORA_ENV, say)."""
        use = self._use("server", workload, engine_args, env=env)
        return Run.sent("concurrent", workload, _sent(
            use, workload, lambda e: e.chat(_conversations(workload), sampling, adapters=workload.adapters), sampling))

    def one(self, workload: Workload, sampling: Sampling, *, engine_args: dict | None = None,
            env: dict | None = None) -> Run:
        if len(workload.requests) != 1:
            raise ValueError(f"one() takes a single request, got {len(workload.requests)}")
        use = self._use("server", workload, engine_args, env=env)
        return Run.sent("one", workload, _sent(
            use, workload, lambda e: e.chat(_conversations(workload), sampling, adapters=workload.adapters), sampling))

    def abandoning(self, workload: Workload, sampling: Sampling, leave_after_steps: list[int | None], *,
                   leaving: Sampling | None = None, engine_args: dict | None = None) -> Run:
        """Every request at once over HTTP, request i's client going away
        mid-stream once the engine has run its request for
        `leave_after_steps[i]` steps, having asked for `leaving` (None: it
        stays to the end of an answer to `sampling`). Its observations run
        until the scheduler is idle again (up to IDLE_WAIT_S), so that they
        hold the aborts the server made after its clients left, and what
        the requests still held then."""
        use = self._use("server", workload, engine_args)

        def send(engine):
            offset = engine.observations.mark()
            outcomes = engine.chat_abandoning(_conversations(workload), sampling, leave_after_steps, leaving)
            engine.observations.wait_idle(offset, IDLE_WAIT_S)
            return outcomes
        return Run.sent("abandoning", workload, _sent(use, workload, send, sampling))

    def rounds(self, workload: Workload, sampling: Sampling, *, at_once: bool, rounds: int = 2,
               engine_args: dict | None = None) -> list[Run]:
        """The workload sent `rounds` times over HTTP to one server, its media
        named by their content only, so each round after the first repeats
        what the caches of the first hold: one request after another
        (`at_once` False), or every round's requests at once. One run per
        round, its observations those of its round (all rounds' at once)."""
        use = self._use("server", workload, engine_args)
        how = "concurrent" if at_once else "sequential"
        runs = [lambda sent, r=r: Run.sent(f"{how} round {r + 1}", workload, sent) for r in range(rounds)]
        if use.engine is None:
            return [run(Sent(use)) for run in runs]
        engine, convs, n = use.engine, _conversations(workload), len(workload.requests)
        observations = getattr(engine, "observations", None)

        def observed_since(offset: int) -> list[dict] | None:
            return observations.since(offset) if observations else None
        if at_once:
            offset = observations.mark() if observations else 0
            outcomes = engine.chat(convs * rounds, sampling)
            seen = observed_since(offset)
            return [run(Sent(use, outcomes[r * n:(r + 1) * n], seen)) for r, run in enumerate(runs)]
        sent = []
        for run in runs:
            offset = observations.mark() if observations else 0
            outcomes = [engine.chat([conv], sampling)[0] for conv in convs]
            sent.append(run(Sent(use, outcomes, observed_since(offset))))
        return sent

    def soak(self, mix: SoakMix, sampling: Sampling, seconds: float, *,
             engine_args: dict | None = None) -> Soak:
        """The mix's waves, each streamed at once, one after another for
        `seconds` (harness.soak.drive). The soak's `run` holds every request
        (its engine's facts, its memory); `wave_run(i)` one wave, to judge
        against each_alone. An engine that never started leaves a soak of no
        waves whose `run` raises the start-up failure."""
        use = self._use("server", Workload("soak", ()), engine_args)
        self.pool.wait_ahead()  # no start may share the machine with the soak it times
        if use.engine is None:
            soak = Soak(seconds)
        elif use.watch is not None and use.watch.gpu:  # each process's device memory too
            with gpu_reader(use.engine, use.watch.devices) as gpu:
                soak = drive(use.engine, mix, sampling, seconds, gpu=gpu)
        else:
            soak = drive(use.engine, mix, sampling, seconds)
        soak.use = use
        return soak

    @staticmethod
    def soak_run(soak: Soak) -> Run:
        """Every request of the soak as one run (its engine's facts and memory
        go in a record from it; a start-up failure is raised from it)."""
        requests = tuple(r for w in soak.waves for r in w.workload.requests)
        return Run.sent("soak", Workload("soak", requests),
                        Sent(soak.use, [o for w in soak.waves for o in w.outcomes]))

    @staticmethod
    def wave_run(soak: Soak, index: int) -> Run:
        """One wave of the soak as a run, to judge against each_alone."""
        wave = soak.waves[index]
        return Run.sent("soak", wave.workload, Sent(soak.use, list(wave.outcomes)))

    # --- engines -------------------------------------------------------------
    def restart_crashed(self) -> int:
        """Forget the uses whose engine crashed, so that the next call starts
        a fresh one (the fuzzer's next example); the crash stays recorded in
        the pool against the use that saw it. Returns how many. A scenario
        whose later checks must see the crash never calls this."""
        dead = [key for key, use in self._uses.items() if use.engine is not None and use.engine.crashed]
        for key in dead:
            del self._uses[key]
        return len(dead)

    def spec_of(self, kind: str, engine_args: dict | None) -> EngineSpec | None:
        """The spec a later call opens for `kind` ("offline", "server", or
        "reference": each_alone's) and these call arguments: what the
        scheduler starts ahead. None where nothing may start ahead: a remote
        server, a card's engine, a TP size the run cannot host."""
        if self.remote_url:
            return None
        reference = kind == "reference"
        if reference:
            kind, engine_args = "offline", reference_args(engine_args)
        args = self.args_for(engine_args)
        if self._card_lease(args):
            return None
        try:
            return self._spec(kind, args, {}, reference=reference)
        except NotHostable:
            return None

    def use_label(self, workload: Workload, role: str = "") -> str:
        suffix = "".join(f"-{part}" for part in (workload.name, role) if part)
        return f"{self.family}[{self.entry.name}{suffix}]"

    def _use(self, kind: str, workload: Workload, engine_args: dict | None, role: str = "",
             env: dict | None = None, call_args: dict | None = None) -> EngineUse:
        """`call_args`: the arguments the scenario's call gave, where
        `engine_args` are made of them (a reference's: its caches off); the
        scheduler resolves the module's other engines from the call's."""
        if self.remote_url and kind != "server":
            pytest.skip(f"{kind} engine: --engine-url targets a remote server, "
                        "so only server-kind scenarios run")
        args = self.args_for(engine_args)
        label = self.use_label(workload, role)
        try:  # a TP size this machine (or this run's GPUs) cannot host is skipped, saying why
            spec = self._spec(kind, args, env or {}, reference=role == "reference")
        except NotHostable as e:
            pytest.skip(str(e))
        key = f"{label} {spec.key}"
        use = self._uses.get(key)
        if use is None or (use.handle is not None and use.handle.evicted):
            self._on_open(spec, engine_args if call_args is None else call_args)
            self._uses[key] = self._open(spec, label)  # again, if its GPUs went to another
        return self._uses[key]

    def _spec(self, kind: str, args: dict, extra_env: dict, *, reference: bool = False) -> EngineSpec:
        """The engine of this runner's model for `kind` and `args`: the
        remote server where there is one (decided here only), else one the
        pool starts, with the TP size's placement in its environment, and a
        reference's process layout (harness.engines.parallel)."""
        if self.remote_url:
            return EngineSpec("remote", self.remote_url, "", name=self.entry.name)
        tp = tensor_parallel(args)
        if self._card_lease(args) and tp > 1:
            raise NotHostable(f"TP {tp} needs {tp} GPUs; an emulated card is one")
        layout = reference_layout(self.entry.tier, tp) if reference else {}
        env = {**self.env, **placement(tp, self.entry.tier), **layout, **extra_env}
        return self.pool.spec(kind, self.model, args, env, name=self.entry.name)

    def _open(self, spec: EngineSpec, label: str) -> EngineUse:
        args = spec.args
        tp = tensor_parallel(args)
        card = self._card_lease(args)
        use = EngineUse(spec.kind, label, self.entry, args=args,
                        version=self.pool.interpreter.identity.get("version"))
        try:
            heads_divide(self.model, tp)
            use.handle = self.pool.get(spec, label=label, gpus=tp, lease=card)
        except NotHostable as e:
            pytest.skip(str(e))
        except NoDeviceLeft as e:  # leaks took every GPU: nothing can run, and that must show
            use.failure = CheckFailure(Cause.LEAK, f"{spec.kind} engine for {self.entry.name}: {e}")
            return use
        except EngineStartupFailed as e:
            use.failure = CheckFailure(e.crash.cause, f"{spec.kind} engine for {self.entry.name} did not "
                                       f"start: {e.crash.detail}", evidence={"crash": e.crash.to_dict(),
                                                                            "start_attempts": e.attempts,
                                                                            STARTED_KEY: False})
            return use
        resolved = use.handle.engine.identity.get("architecture")
        fallback = architecture.fallback_cause(resolved, self.entry.name)
        if fallback:  # nothing is sent to it: what it answered would be the fallback's
            use.failure = CheckFailure(Cause.NOT_SUPPORTED, fallback, evidence={"architecture": resolved})
            return use
        use.engine, use.watch = use.handle.engine, use.handle.watch
        use.host_kind, use.host_assumed = self._host_kind(use.engine)
        use.engine.identity.setdefault("host_kind", use.host_kind)  # the run's metadata names it
        use.reopen = lambda: self.pool.get(spec, label=f"{label} (follower)", gpus=tp, lease=card).engine
        use.window = use.engine.mark()
        use.t0 = use.watch.now() if use.watch else 0.0
        self._on_engine(use.engine)
        return use

    def _host_kind(self, engine) -> tuple[str, str | None]:
        """The engine's host kind, and why it is assumed where it is not
        observed: a remote server's is taken as this machine's."""
        tier = self.entry.tier
        if engine.kind != "remote":
            return host_kind(tier, engine.identity), None
        local = self.pool.interpreter
        return (host_kind(tier, dict(local.identity) | local.host),
                "a remote server's host is not observed: taken as this machine's")

    def _card_lease(self, args: dict) -> Lease | None:
        """The card's GPU, for an engine opened with the card's arguments."""
        if self._card and self._card[0] and all(args.get(k) == v for k, v in self._card[0].items()):
            return self._card[1]
        return None


def _sent(use: EngineUse, workload: Workload, send: Callable, sampling: Sampling) -> Sent:
    """Send through `use`'s engine (`send(engine)` -> outcomes), keeping what
    the engine observed meanwhile, and the follower on its stack. An engine
    that never started sends nothing."""
    if use.engine is None:
        return Sent(use)
    engine = use.engine
    observations = getattr(engine, "observations", None)
    offset = observations.mark() if observations else 0
    outcomes = send(engine)
    return Sent(use, outcomes, observations.since(offset) if observations else None,
                _follower(workload, sampling, lambda q, conv, s, f: _forced(use, q, conv, s, f)))


def _forced(use: EngineUse, request, conversation, sampling: Sampling, forced: list[int]) -> Result:
    """The request's answer continuing `forced` tokens on `use`'s own stack:
    the offline worker appends them to the prompt, a server continues them
    as its open final message (harness.engines.openai_engine.chat_forced).
    Where the use's engine was retired, one of the same spec is started
    again (a start that fails is this answer's verdict)."""
    try:
        engine = use.live()
    except EngineStartupFailed as e:
        return e.crash
    if engine.kind == "offline":
        return engine.chat([conversation], sampling, adapters=[request.adapter] if request.adapter else None,
                           forced=[forced])[0]
    return engine.chat_forced(conversation, sampling, request.adapter, forced)


def _remembered(use: EngineUse, workload: Workload, sampling: Sampling, memo: dict,
                send_one: Callable[[Workload], Sent]) -> Sent:
    """Each request's reference from `memo`, sent alone (`send_one`) where
    it is not there yet: outcomes in the workload's order, what the engine
    observed for each, and a follower that continues each on its own."""
    if use.engine is None:
        return Sent(use)
    keys = [_memo_key(q, sampling) for q in workload.requests]
    fresh = {}
    for q, key in zip(workload.requests, keys):
        if key not in memo:
            sent = send_one(workload.only(q.label))
            fresh[key] = (sent, q.label)
            if all(isinstance(o, Completion) for o in sent.outcomes):  # a crash is this run's alone
                memo[key] = fresh[key]
    answers = {**memo, **fresh}
    sents = [answers[k][0] for k in keys]
    observed = None if any(s.observed is None for s in sents) else [e for s in sents for e in s.observed]
    by_label = dict(zip(workload.labels, keys))

    def follow(label: str, forced: list[int]) -> Result:
        sent, own_label = answers[by_label[label]]
        return sent.follow(own_label, forced)
    return Sent(use, [s.outcomes[0] for s in sents], observed,
                follow if all(s.follow for s in sents) else None)


def _memo_key(request, sampling: Sampling) -> str:
    adapter = request.adapter.to_dict() if request.adapter else None
    text = json.dumps([request.conversation, adapter, dataclasses.asdict(sampling)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _conversations(workload: Workload) -> list[list[dict]]:
    return [r.conversation for r in workload.requests]


def _follower(workload: Workload, sampling: Sampling, send: Callable) -> Callable[[str, list[int]], Result]:
    """(label, forced tokens) -> the request's answer after them: sent alone,
    its media renamed afresh (no cache serves it), for the tokens left of
    the sampling's length. `send(request, conversation, sampling, forced)`."""
    def follow(label: str, forced: list[int]) -> Result:
        request = workload.requests[workload.labels.index(label)]
        left = sampling.max_tokens - len(forced)
        if left <= 0:  # the split was at the last position: nothing after it
            return Completion(text="", token_ids=[], logprobs=[], finish_reason="length")
        conversation = with_uuids(request.conversation, f"mmh-follow-{uuid.uuid4().hex[:12]}")
        return send(request, conversation, dataclasses.replace(sampling, max_tokens=left), forced)
    return follow
