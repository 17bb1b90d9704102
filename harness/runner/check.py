"""A check's hand on its own record: each method holds the run to one
property, raises CheckFailure when it does not hold, and writes what it
compared into the record, so a scenario never touches the record itself."""
from __future__ import annotations

from harness.checks import (check_accepted_or_4xx, check_alive, check_completed, check_invariant,
                            check_non_empty)
from harness.engines.results import Completion
from harness.results.record import CheckRecord, json_safe
from harness.runner.run import Run
from harness.verdicts import Cause, CheckFailure
from harness.workloads.audio import guard_one_step


class Check:
    def __init__(self, record: CheckRecord):
        self.record = record

    def note(self, evidence: dict) -> None:
        self.record.evidence.update(json_safe(evidence))

    def completed(self, run: Run) -> list[Completion]:
        """Every request of the run got an answer."""
        return check_completed(run.outcomes, run.labels)

    def non_empty(self, run: Run) -> None:
        check_non_empty(run.outcomes, run.labels)

    def one_pass(self, run: Run) -> None:
        """All prompts went in one generate call, and the engine can hold them in one step."""
        outcomes = self.completed(run)
        calls = {(r.batch_call, r.batch_size) for r in outcomes}
        if len(calls) != 1 or next(iter(calls))[1] != len(outcomes):
            raise CheckFailure(Cause.PREMISE, f"prompts did not go in one generate call: {calls}")
        self.note(guard_one_step([r.prompt_token_count for r in outcomes], run.engine.limits))

    def invariant(self, run: Run, reference: Run, label: str) -> None:
        """The request's output in `run` equals its output in `reference`."""
        self.record.params["input"] = label
        got, ref = run[label], reference[label]
        self.record.outputs = {run.how: got.to_dict(), reference.how: ref.to_dict()}
        self.note(check_invariant(got, ref, label, context=run.how))

    def all_invariant(self, run: Run, reference: Run) -> None:
        """Every request's output in `run` equals its output in `reference`."""
        self.note({"reference": f"{reference.engine.kind} engine, {reference.how}"})
        for label in run.labels:
            check_invariant(run[label], reference[label], label, context=run.how)

    def accepted_or_4xx(self, run: Run) -> None:
        """Each input answered, or refused with a 4xx and a message."""
        for label, result in zip(run.labels, run.outcomes):
            self.record.params.setdefault("input", label)
            self.note(check_accepted_or_4xx(result, label))

    def alive(self, run: Run, *, after: str) -> None:
        check_alive(run.engine, after=after)
