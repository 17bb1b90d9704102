"""A stand-in for mmharness_offline_worker.py whose first starts fail: it writes the
log a failed start leaves (MMHARNESS_STUB_FAILURE, a traceback) and exits,
the first MMHARNESS_STUB_FAILURES times (counted in MMHARNESS_STUB_COUNT);
after that it is the plain stub worker."""
import os
import runpy
import sys
from pathlib import Path

count = Path(os.environ["MMHARNESS_STUB_COUNT"])
started = int(count.read_text()) if count.exists() else 0
count.write_text(str(started + 1))
if started < int(os.environ["MMHARNESS_STUB_FAILURES"]):
    print(os.environ["MMHARNESS_STUB_FAILURE"], file=sys.stderr, flush=True)
    sys.exit(1)
runpy.run_path(str(Path(__file__).with_name("_stub_offline_worker.py")), run_name="__main__")
