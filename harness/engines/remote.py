"""RemoteEngine: an OpenAI-compatible server the harness did not start
(any engine: vLLM, SGLang, TGI). Only server-kind scenarios run against it."""
from __future__ import annotations

import json
import os
import time
import urllib.request

from harness.verdicts import Cause
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.outcomes import EngineCrashed, EngineStartupFailed


class RemoteEngine(OpenAIEngine):
    kind = "remote"

    def __init__(self, url: str, *, api_key: str | None = None, model: str | None = None,
                 name: str = "remote", start_timeout: float = 60, request_timeout: float = 600):
        super().__init__(name, None, request_timeout)
        self.base_url = url.rstrip("/").removesuffix("/v1")
        self.api_key = api_key or os.environ.get("MMHARNESS_ENGINE_API_KEY", "EMPTY")
        self.served_model = model or ""
        self.start_timeout = start_timeout

    def start(self) -> "RemoteEngine":
        deadline = time.monotonic() + self.start_timeout
        while not self.healthy():
            if time.monotonic() > deadline:
                raise EngineStartupFailed(EngineCrashed(
                    cause=Cause.STARTUP_FAILED,
                    detail=f"{self.base_url}/health did not answer 200 within {self.start_timeout:.0f} s"))
            time.sleep(0.5)
        if not self.served_model:
            req = urllib.request.Request(f"{self.base_url}/v1/models",
                                         headers={"Authorization": f"Bearer {self.api_key}"})
            with urllib.request.urlopen(req, timeout=10) as r:
                self.served_model = json.load(r)["data"][0]["id"]
        self.identity = {"distribution": "openai-compatible", "version": None,
                         "url": self.base_url, "model": self.served_model}
        try:  # vLLM servers say their version; other engines may not
            with urllib.request.urlopen(f"{self.base_url}/version", timeout=5) as r:
                self.identity.update(distribution="vllm", version=json.load(r).get("version"))
        except (OSError, ValueError):
            pass
        self.ready = True
        return self

    def _death(self) -> EngineCrashed | None:
        if self.crashed:
            return self.crashed
        return None  # no process to watch: _one asks /health after a connection error

    def _one(self, *a, **kw):
        result = super()._one(*a, **kw)
        if isinstance(result, EngineCrashed) and not self.healthy():
            result = EngineCrashed(cause=Cause.ENGINE_DEAD,
                                   detail=f"remote server at {self.base_url} stopped answering")
            self.crashed = result
        return result

    def _teardown(self, grace: float) -> list[int]:
        self.ready = False
        return []  # not ours to stop
