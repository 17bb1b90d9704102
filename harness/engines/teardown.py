"""An engine's teardown as a check of its own: one record per engine, built
from its pool handle once it is retired."""
from __future__ import annotations

from pathlib import Path

from harness.verdicts import Cause, Verdict
from harness.engines.kernels import engine_host
from harness.engines.pool import EngineHandle
from harness.results.record import CheckRecord


def teardown_record(handle: EngineHandle) -> CheckRecord:
    """It was torn down, nothing of it survived, and what it held came back
    (its /dev/shm segments on the host, GPU used memory)."""
    engine = handle.engine
    record = CheckRecord(id=f"engine_teardown::{Path(str(engine.log_path or engine.name)).stem}",
                         family="engine_teardown", model=engine.name,
                         engine=f"{engine.kind}:{engine.identity.get('distribution')}",
                         engine_version=engine.identity.get("version"), host=engine_host(engine.identity),
                         log_path=str(engine.log_path) if engine.log_path else None,
                         params={"served": handle.served, "crashed_in": handle.crashed_in})
    verdict = handle.leak_verdict
    if handle.lease:
        record.evidence.update({"gpus": list(handle.lease.devices), "taken_out_of_run": handle.taken_out})
    if handle.attempts:  # its start was retried
        record.evidence["start_attempts"] = handle.attempts
    quiet = getattr(engine, "longest_quiet_s", None)  # a stand-in engine has none
    if quiet is not None:  # what the stall bound must exceed (harness.engines.progress)
        record.evidence["longest_quiet_s"] = round(quiet, 1)
    if handle.watch and handle.watch.result:
        record.peak_memory = handle.watch.result.peak
    if handle.survivors:
        record.verdict, record.cause = Verdict.FAIL.value, Cause.LEAK.value
        record.message = f"engine processes survived teardown: {handle.survivors}"
        record.evidence.update({"survivors": handle.survivors, "uses": handle.served})
    elif verdict is None:
        record.verdict, record.message = Verdict.SKIP.value, handle.no_leak_check_reason
    else:
        record.evidence.update(verdict.evidence())
        if verdict.ok:
            record.verdict = Verdict.PASS.value
        else:
            record.verdict, record.cause, record.message = Verdict.FAIL.value, Cause.LEAK.value, verdict.message
            if handle.taken_out:
                record.message += f"; taken out of the run: {', '.join(f'gpu{d}' for d in handle.taken_out)}"
    return record
