"""One run's fuzzing: its budget, seed and example database, and where
reproducers go. `search` runs one property on one model's runner and
writes the reproducers of what it found."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.files import slug
from harness.fuzz import reproducers
from harness.fuzz.search import Search, search
from harness.fuzz.space import Limits, limits_for
from harness.runner.check import Check
from harness.runner.runner import Runner
from harness.workloads.audio import processor

# The defaults of --fuzz-budget (a short pass in `make run`) and --fuzz-shrink.
BUDGET_S = 30.0
# make run's shrink is a minute per new failure: a finding the database does
# not hold (a new seed finds new signatures of registered ones too) took up
# to 335 s to shrink at 180 s; make nightly shrinks longer (FUZZ_SHRINK).
SHRINK_S = 60.0


@dataclass
class FuzzSession:
    budget_s: float
    shrink_s: float
    seed: int
    database_root: Path
    out_root: Path  # the run's folder for reproducers
    written: dict = field(default_factory=dict)

    def limits(self, runner: Runner) -> Limits:
        """What the runner's model accepts. Ask before its engines start:
        where the engine's version serves no LoRA for the model, requests
        draw no adapter and the engines start without LoRA."""
        runner.lora_in_load()
        return limits_for(runner.entry, processor(runner.model), engine_args=runner.args_for(None))

    def search(self, check: Check, runner: Runner, strategy, judge, *, share: float = 1.0) -> Search:
        """Search `judge`'s property over `strategy` on the runner's model,
        for `share` of the budget; each failure's reproducers are written
        and noted in `check`'s record beside the search's figures."""
        check_id = check.record.id
        database = self.database_root / slug(check_id, 100)
        judge.start_engines()
        result = search(strategy, judge, budget_s=self.budget_s * share, shrink_s=self.shrink_s,
                        seed=self.seed, database=database)
        check.note({"fuzz": result.to_dict() | {"restarts": judge.restarts, "database": str(database),
                                                 "limits": judge.limits.to_dict()}}
                   | ({"lora_left_out": runner.lora_left_out} if runner.lora_left_out else {}))
        run = judge.last_run
        if result.found and run is not None and run.use.failure is None:
            profile = check.profile(run)
            ident = run.engine.identity
            engine = f"{ident.get('distribution')} {ident.get('version')}, torch {ident.get('torch')}"
            env = reproducers.vllm_env(runner.pool.interpreter.env(runner.env))
            check.note({"reproducers": [
                reproducers.write(f, reproducers.folder_for(self.out_root, check_id, i), entry=runner.entry,
                                  reproduction=judge.reproduction(f.spec), engine_env=env,
                                  logprob_steps=profile.logprob_steps, step=profile.step, engine=engine,
                                  python=str(runner.pool.interpreter.python))
                for i, f in enumerate(result.found)]})
        return result
