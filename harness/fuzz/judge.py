"""The properties a spec is held to, on a runner's engines.

BatchJudge (a batch spec, harness.fuzz.space), on the offline engine:
  1. every request answered, all of them in one step (observed);
  2. each answer equal to the request's answer alone on the isolated
     reference engine, within the noise profile, with power: the
     comparator rejects every other request's reference (the answer a
     request that got another's media, or another's padding, would give).
  An example whose references the comparator cannot tell apart is
  inconclusive, not failed.

HostileJudge (a hostile payload, harness.fuzz.hostile), on the server: the
payload gets the outcome it is owed (a 4xx with a message; beyond the
longest clip, a 4xx or an answer capped at the longest clip's prompt
tokens), and the server still answers afterwards.

Both restart a crashed engine for the next example (its start is spent
from the search's budget), and say what a reproducer of a spec needs.
"""
from __future__ import annotations

from pathlib import Path

from harness.checks.requests import REFUSE_OR_CAP
from harness.verdicts import Cause, CheckFailure
from harness.engines.base import LoraAdapter, Sampling
from harness.engines.server import cli_flags
from harness.fuzz import hostile
from harness.fuzz.search import Inconclusive
from harness.fuzz.space import SPEC_VERSION, Limits, workload
from harness.results.record import CheckRecord
from harness.runner.check import Check
from harness.runner.runner import REFERENCE_ARGS, Runner
from harness.workloads.lora import Adapters

TOP_LOGPROBS = 5
# An example's batch is held to each request alone on one stack: the numeric
# path of the fuzz scenario's own mark, so calibration measures it.
EXAMPLE_PATHS = ("same-stack",)
HOSTILE_SAMPLING = Sampling(max_tokens=2, ignore_eos=True, logprobs=0)


def sampling_for(spec: dict) -> Sampling:
    """Fixed length with EOS ignored, so answers compare position by position."""
    return Sampling(max_tokens=spec["max_tokens"], ignore_eos=True, logprobs=TOP_LOGPROBS)


class BatchJudge:
    def __init__(self, runner: Runner, limits: Limits):
        self.runner, self.limits = runner, limits
        # The crafted adapters of the model, where requests may run under one.
        self.lora = Adapters(Path(runner.model)) if limits.adapters else None
        self.restarts = 0
        self.last_run = None  # the last batch sent: its engine names the noise profile and version
        # Each request's reference, computed once for every batch it is in.
        self.references: dict = {}

    def start_engines(self) -> None:
        """Start the engine and the reference engine on one text request
        (checked like any example), so that the search's budget is spent
        on examples, not on the first starts."""
        self({"version": SPEC_VERSION, "model": self.limits.model, "max_tokens": 2,
              "requests": [{"prompt": "Hello.", "items": []}]})

    def adapter(self, name: str) -> LoraAdapter:
        return getattr(self.lora, name)

    def __call__(self, spec: dict) -> None:
        work = workload(spec, adapters=self.adapter if self.lora else None)
        sampling = sampling_for(spec)
        check = Check(CheckRecord(id="fuzz-example"), paths=EXAMPLE_PATHS)
        try:
            run = self.last_run = self.runner.batch(work, sampling)
            check.one_step(run)
            check.all_invariant(run, self.runner.each_alone(work, sampling, memo=self.references))
        except CheckFailure as failure:
            if failure.cause == Cause.PREMISE and "indistinguishable" in failure.evidence:
                raise Inconclusive("two requests' references indistinguishable") from None
            # What the engine made of the failing batch: its steps and encoder calls.
            failure.evidence.setdefault("observed", {k: check.record.evidence[k] for k in
                                                     ("observed_steps", "observed_encoder_calls")
                                                     if k in check.record.evidence})
            raise
        finally:
            self.restarts += self.runner.restart_crashed()

    def reproduction(self, spec: dict) -> dict:
        """What repro.py needs: the batch and each request's adapter, its
        engine's arguments and the reference's."""
        work = workload(spec, adapters=self.adapter if self.lora else None)
        return {"template": "repro.py.txt", "labels": work.labels,
                "conversations": [r.conversation for r in work.requests],
                "config": {"max_tokens": spec["max_tokens"], "engine_args": self.runner.args_for(None),
                           "reference_args": REFERENCE_ARGS,
                           "adapters": [r.adapter.to_dict() if r.adapter else None for r in work.requests]}}


class HostileJudge:
    def __init__(self, runner: Runner, limits: Limits):
        self.runner, self.limits = runner, limits
        self.restarts = 0
        self.last_run = None
        self.longest = None  # the longest clip's answer: what a capped answer is held to

    def start_engines(self) -> None:
        """Start the server on the longest clip the model takes whole."""
        self.longest = self.last_run = self.runner.one(hostile.longest_workload(self.limits), HOSTILE_SAMPLING)
        Check(CheckRecord(id="fuzz-longest")).completed(self.longest)

    def __call__(self, spec: dict) -> None:
        run = self.last_run = self.runner.one(hostile.workload(spec), HOSTILE_SAMPLING)
        check = Check(CheckRecord(id="fuzz-hostile-example"))
        expect = hostile.expected(spec)
        try:
            check.edge_outcome(run, expect, self.longest if expect == REFUSE_OR_CAP else None)
            check.alive(run, after=f"hostile input {hostile.label(spec)}")
        finally:
            if self.runner.restart_crashed():
                self.restarts += 1
                self.start_engines()

    def reproduction(self, spec: dict) -> dict:
        """What the server reproducer needs: the payload, the longest clip, the server's flags."""
        return {"template": "repro_server.py.txt", "labels": [hostile.label(spec), hostile.LONGEST],
                "conversations": [hostile.workload(spec).requests[0].conversation,
                                  hostile.longest_workload(self.limits).requests[0].conversation],
                "config": {"max_tokens": HOSTILE_SAMPLING.max_tokens, "expect": hostile.expected(spec),
                           "server_flags": cli_flags(self.runner.args_for(None))}}
