"""OfflineEngine: vllm.LLM in a worker process the harness owns."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Iterator

from harness.engines import architecture, hosts
from harness.engines.base import CRASH_GRACE_S, Adapters, Engine, Sampling, per_conversation
from harness.engines.control import EngineControl, control_file
from harness.engines.interpreter import EngineInterpreter, engine_cwd
from harness.engines.kernels import observed_kernels
from harness.engines.observations import Observations, side_file
from harness.engines.outcomes import Completion, EngineStartupFailed, Rejected, RequestTimedOut, Result
from harness.engines.procs import EngineProcess, launch, started_at
from harness.engines.progress import ProgressWatch, Stall
from harness.engines.stacks import StackDumps, stacks_folder

# Alone in its folder, which Python puts first on the worker's sys.path: a
# module beside it would hide an engine package of the same name.
WORKER = Path(__file__).parent / "worker_script" / "mmharness_offline_worker.py"
# Engine arguments of the server only: an offline request carries its adapter.
SERVER_ONLY_ARGS = ("lora_modules",)
# The start-up socket's folder, named after the harness process that made it.
SOCKET_DIR_PREFIX = "mmh-offline-"
# What the watch waits on between a batch's send and the worker's word that
# every request of it is enqueued (the front end's processing of its media).
ENQUEUEING = "(the batch, being enqueued)"


@contextmanager
def _start_up_socket() -> Iterator[str]:
    """The worker's start-up socket, in a folder named after this harness
    process; only the start-up needs it, so the folder goes with it."""
    folder = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-")
    try:
        yield str(Path(folder) / "conn.sock")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale_socket_dirs(tmp: Path | None = None) -> list[Path]:
    """Start-up socket folders left by harness processes killed while an
    engine started; a folder that names no process (an older harness) goes
    once it is empty. Returns what was removed."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{SOCKET_DIR_PREFIX}*"):
        owner = folder.name[len(SOCKET_DIR_PREFIX):].split("-")[0]
        if owner.isdigit():
            started = started_at(int(owner))
            if started is not None and started <= folder.stat().st_mtime:
                continue  # its harness is alive
        elif any(folder.iterdir()):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


class _Died(Exception):
    def __init__(self, returncode, what):
        self.returncode, self.what = returncode, what


class _TimedOut(Exception):
    pass


class _Hung(Exception):
    def __init__(self, stall: Stall):
        self.stall = stall


class OfflineEngine(Engine):
    kind = "offline"

    def __init__(self, model: str | Path, engine_args: dict, interpreter: EngineInterpreter,
                 log_path: Path, *, name: str = "offline", env: dict | None = None,
                 start_timeout: float = 600, request_timeout: float = 600):
        super().__init__(name, Path(log_path), request_timeout)
        self.model, self.engine_args, self.interpreter = str(model), dict(engine_args), interpreter
        self.extra_env, self.start_timeout = env or {}, start_timeout
        self.observations = Observations(side_file(self.log_path))
        self.control = EngineControl(control_file(self.log_path))
        self.stacks = StackDumps(stacks_folder(self.log_path))
        self.proc: EngineProcess | None = None
        self.limits: dict = {}
        self._conn = None

    def start(self) -> "OfflineEngine":
        self.identity = dict(self.interpreter.identity) | self.interpreter.host
        key = secrets.token_bytes(16)
        try:
            # The listener closes before its folder goes: its own finalizer
            # would fail at exit to unlink the socket.
            with _start_up_socket() as address, \
                    Listener(address=address, family="AF_UNIX", authkey=key) as listener:
                self.proc = launch([str(self.interpreter.python), str(WORKER), address, key.hex(),
                                    self.model, json.dumps({k: v for k, v in self.engine_args.items()
                                                            if k not in SERVER_ONLY_ARGS})],
                                   self.interpreter.env(self.observations.env() | self.control.env()
                                                        | self.stacks.env() | self.extra_env), self.log_path,
                                   cwd=engine_cwd())
                accepted: list = []
                t = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
                t.start()
                deadline = time.monotonic() + self.start_timeout
                while t.is_alive():
                    self._check(deadline)
                    t.join(0.05)
                self._conn = accepted[0]
                ready = self._await(deadline)
        except (_Died, _TimedOut) as e:
            crash = self._crash(getattr(e, "returncode", None),
                                getattr(e, "what", f"start-up timed out after {self.start_timeout:.0f} s;"
                                                   " engine"),
                                timed_out=isinstance(e, _TimedOut))
            self.close(grace=CRASH_GRACE_S)
            raise EngineStartupFailed(crash) from None
        self.limits = {k: ready[k] for k in ("max_num_seqs", "max_num_batched_tokens")}
        self.proc.mark_vital()
        self.ready = True
        # The processes mark_vital just listed (EngineProcess keeps the tree).
        self.identity["kernels"] = observed_kernels(list(self.proc.vital))
        log_text = self.log_path.read_text(errors="replace")
        self.identity |= hosts.observed(self.interpreter.tier, log_text, self.extra_env)
        self.identity["architecture"] = architecture.resolved(log_text)
        return self

    def _check(self, deadline: float) -> None:
        death = self.proc.death()
        if death:
            raise _Died(*death)
        if time.monotonic() > deadline:
            raise _TimedOut()

    def _await(self, deadline: float, watch: ProgressWatch | None = None) -> dict:
        """The worker's next reply; with a watch, its word that a batch is
        enqueued turns the watch from the batch to its requests."""
        last_refresh = 0.0
        while True:
            try:
                if self._conn.poll(0.05):
                    message = self._conn.recv()
                    if "enqueued" not in message:
                        return message
                    if watch is not None:
                        watch.done(ENQUEUEING)
                        watch.expect(message["enqueued"])
                    continue
            except (EOFError, OSError):
                raise _Died(self._wait_exit(), "offline worker")
            self._check(deadline)
            if watch is not None and (stall := watch.poll()) is not None:
                raise _Hung(stall)
            if time.monotonic() - last_refresh > 1.0:
                self.proc.refresh_children()
                last_refresh = time.monotonic()

    def chat(self, conversations, sampling: Sampling = Sampling(), adapters: Adapters = None,
             forced: list[list[int]] | None = None) -> list[Result]:
        """`forced`: per conversation, token ids appended to its rendered
        prompt, so the answer continues them (a comparator following this
        stack past a split); the answer holds only the tokens after them."""
        n = len(conversations)
        adapters = per_conversation(adapters, n)
        if forced is not None and len(forced) != n:
            raise ValueError(f"{len(forced)} forced prefixes for {n} conversations")
        if self.crashed:
            return [self.crashed] * n
        self._begin_request()
        watch = self._watch()
        if watch is not None:
            watch.expect([ENQUEUEING])
        try:
            self._send({"op": "chat", "conversations": conversations,
                        "sampling": sampling.to_dict(),
                        "adapters": [a.to_dict() if a else None for a in adapters],
                        **({"forced": forced} if forced else {})})
            reply = self._await(time.monotonic() + self.request_timeout, watch)
            self._watched(watch)
        except _Hung as e:
            self._watched(watch)
            return [self._hang(e.stall)] * n
        except _Died as e:
            crash = self._crash(e.returncode, e.what)
            self._give_up()
            return [crash] * n
        except _TimedOut:
            self._crash(None, "no answer in time; engine", timed_out=True)
            self._give_up()
            return [RequestTimedOut(self.request_timeout)] * n
        if "ok" in reply:
            return [Completion(**o) for o in reply["ok"]]
        if reply.get("dead"):
            crash = self._crash(self.proc.popen.poll(), f"engine core ({reply['error']})")
            self._give_up()
            return [crash] * n
        return [Rejected(status=None, message=f"{reply['error']}: {reply['message']}")] * n

    def _send(self, message: dict) -> None:
        """A worker that died since the last request is a crash, not a broken pipe."""
        try:
            self._conn.send(message)
        except (OSError, EOFError):  # BrokenPipeError, ConnectionResetError
            raise _Died(self._wait_exit(), "offline worker") from None

    def _wait_exit(self, timeout: float = 2.0) -> int | None:
        """The worker's exit status, once it is reaped (its pipe breaks first)."""
        try:
            return self.proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def _teardown(self, grace: float) -> list[int]:
        survivors: list[int] = []
        if self.proc is not None:
            if self._conn is not None and self.proc.popen.poll() is None and not self.crashed:
                try:
                    self._conn.send({"op": "stop"})
                except OSError:
                    pass
            survivors = self.proc.terminate(grace=grace)
            self.proc = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self.ready = False
        return survivors
