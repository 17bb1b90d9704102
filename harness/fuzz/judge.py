"""The property a batch spec is held to, on a runner's engines:

  1. every request of the batch answered, all of them in one step (observed);
  2. each request's answer equal to its answer alone on the isolated
     reference engine, within the noise profile, with power: the
     comparator rejects every other request's reference (the answer a
     request that got another's media, or another's padding, would give).

An example whose references the comparator cannot tell apart is
inconclusive, not failed. A crashed engine is restarted for the next
example (the start is spent from the search's budget)."""
from __future__ import annotations

from harness.checks.verdicts import Cause, CheckFailure
from harness.engines.base import Sampling
from harness.fuzz.search import Inconclusive
from harness.fuzz.space import SPEC_VERSION, workload
from harness.results.record import CheckRecord
from harness.runner.check import Check
from harness.runner.runner import Runner

TOP_LOGPROBS = 5


def sampling_for(spec: dict) -> Sampling:
    """Fixed length with EOS ignored, so answers compare position by position."""
    return Sampling(max_tokens=spec["max_tokens"], ignore_eos=True, logprobs=TOP_LOGPROBS)


class BatchJudge:
    def __init__(self, runner: Runner):
        self.runner = runner
        self.restarts = 0
        self.last_run = None  # the last batch sent: its engine names the noise profile and version
        # Each request's reference, computed once for every batch it is in.
        self.references: dict = {}

    def start_engines(self) -> None:
        """Start the engine and the reference engine on one text request
        (checked like any example), so that the search's budget is spent
        on examples, not on the first starts."""
        self({"version": SPEC_VERSION, "model": self.runner.entry.name, "max_tokens": 2,
              "requests": [{"prompt": "Hello.", "items": []}]})

    def __call__(self, spec: dict) -> None:
        work = workload(spec)
        sampling = sampling_for(spec)
        check = Check(CheckRecord(id="fuzz-example"))
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
