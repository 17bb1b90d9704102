"""Kill an engine's process group when the harness dies (even by SIGKILL).

Started by the harness in its own session with a pipe on stdin whose only
writer is the harness. EOF on stdin means the harness is gone (or has torn
the engine down itself): kill the group. Standalone, stdlib only.
usage: reaper.py PGID
"""
import os
import signal
import sys


def main() -> None:
    pgid = int(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C aimed at pytest is not ours
    while sys.stdin.buffer.read(4096):
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main()
