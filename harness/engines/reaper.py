"""Kill an engine's process group when the harness dies (even by SIGKILL).

Started by the harness in its own session with a pipe on stdin whose only
writer is the harness. EOF on stdin means the harness is gone (or has torn
the engine down itself): kill the group, and once it is gone remove the
engine's temporary folder. Standalone, stdlib only.
usage: reaper.py PGID [TMP]
"""
import os
import shutil
import signal
import sys
import time

# How long the killed group gets to leave before its folder is removed anyway.
GONE_WAIT_S = 10.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def main() -> None:
    pgid = int(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C aimed at pytest is not ours
    while sys.stdin.buffer.read(4096):
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if len(sys.argv) > 2:
        deadline = time.monotonic() + GONE_WAIT_S
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        shutil.rmtree(sys.argv[2], ignore_errors=True)


if __name__ == "__main__":
    main()
