"""Requests to an OpenAI-compatible server, fired together, each bounded.

Shared by ServerEngine (a server the harness started) and RemoteEngine (one
it did not). Subclasses say how to tell that the engine died.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, wait

import openai

from harness.verdicts import Cause
from harness.engines.base import Adapters, Engine, LoraAdapter, Sampling, per_conversation
from harness.engines.leaving import leave_in_own_process
from harness.engines.outcomes import (ABANDONED, Completion, EngineCrashed, NotForced, Rejected, RequestTimedOut,
                                      Result)

# How long a 5xx waits, at most, to see whether the engine behind it is
# dying: until its death shows, or its /health answers 200 (alive: the 5xx
# was its verdict on the input). A dying EngineCore's exit took over 1 s to
# show on a 2-core machine busy with another worker's engine (an Intel Xeon
# with AMX: a conformer death read as http-5xx once in a make run).
DEATH_AFTER_5XX_S = 30.0
# A load reads the adapter from disk and hands it to the engine core.
ADAPTER_LOAD_TIMEOUT_S = 120.0
# A detokenize call does no model work.
DETOKENIZE_TIMEOUT_S = 30.0


class AdapterLoadFailed(RuntimeError):
    """The server refused to load (or unload) a LoRA adapter; says its reason."""

    def __init__(self, op: str, name: str, status: int | None, message: str):
        self.op, self.name, self.status, self.message = op, name, status, message
        super().__init__(f"{op} of LoRA adapter {name!r} refused"
                         f"{f' (HTTP {status})' if status else ''}: {message}")


def _error_message(status: int, body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:2000]
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:2000]
    if status == 404 and isinstance(data, dict) and data.get("detail") == "Not Found":
        return ("no such route: the server was not started with VLLM_ALLOW_RUNTIME_LORA_UPDATING"
                " (ServerEngine(runtime_lora=True))")
    return json.dumps(data)[:2000]


def _token_id(token: str) -> int | None:
    # With return_tokens_as_token_ids, vLLM renders tokens as "token_id:123".
    if token.startswith("token_id:"):
        return int(token.split(":", 1)[1])
    return None


def _cached_tokens(usage) -> int | None:
    """Reported by vLLM only when started with --enable-prompt-tokens-details."""
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    return getattr(details, "cached_tokens", None) if details else None


# How a forced request whose tokens did not survive the round trip is told apart.
NOT_FORCED = "not forced"


def _request_ids(n: int) -> list[str]:
    """Ids for the engine (X-Request-Id), which its own request ids hold:
    how the watch and the observer's events name a request."""
    return [f"mmh-{uuid.uuid4().hex[:12]}" for _ in range(n)]


class OpenAIEngine(Engine):
    base_url: str = ""
    api_key: str = "EMPTY"
    served_model: str = ""

    def _client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.base_url}/v1", api_key=self.api_key,
                             timeout=self.request_timeout, max_retries=0)

    def healthy(self, timeout: float = 2.0) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=timeout) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _death(self) -> EngineCrashed | None:
        """A crash verdict once the engine is known dead, else None."""
        raise NotImplementedError

    # --- LoRA adapters at run time (vLLM's /v1/{load,unload}_lora_adapter) --
    def _post(self, route: str, body: dict, timeout: float) -> tuple[int | None, str]:
        req = urllib.request.Request(f"{self.base_url}{route}", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json",
                                                             "Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, _error_message(e.code, e.read())
        except (urllib.error.URLError, OSError) as e:  # refused, reset, timed out
            reason = getattr(e, "reason", e)
            return None, f"no answer from {self.base_url}{route} within {timeout:.0f} s: {reason}"

    def unload_adapter(self, name: str, *, missing_ok: bool = False,
                       timeout: float = ADAPTER_LOAD_TIMEOUT_S) -> bool:
        """Forget adapter `name` (the server drops its name; the engine's LRU
        cache evicts the weights later). False if it was not loaded and
        `missing_ok`; AdapterLoadFailed on any other refusal."""
        status, text = self._post("/v1/unload_lora_adapter", {"lora_name": name}, timeout)
        if status == 200:
            return True
        if status == 404 and missing_ok and "cannot be found" in text:
            return False
        raise AdapterLoadFailed("unload", name, status, text)

    def load_adapter(self, adapter: LoraAdapter, *, replace: bool = True,
                     timeout: float = ADAPTER_LOAD_TIMEOUT_S) -> str:
        """Load `adapter` under its name, so requests with model=<name> run it.
        replace=True unloads a loaded adapter of that name first: the server
        then gives the new load a fresh lora_int_id, so the engine reads the
        new weights (no cached ones, no prefix-cache blocks of the old ones).
        The server numbers adapters itself: `adapter.id` is not sent.
        AdapterLoadFailed, with the server's message, when it refuses."""
        if replace:
            self.unload_adapter(adapter.name, missing_ok=True, timeout=timeout)
        status, text = self._post("/v1/load_lora_adapter",
                                  {"lora_name": adapter.name, "lora_path": str(adapter.path)}, timeout)
        if status != 200:
            raise AdapterLoadFailed("load", adapter.name, status, text)
        return text

    @staticmethod
    def _request(conv, sampling: Sampling, model: str, request_id: str) -> dict:
        return dict(model=model, messages=conv, max_tokens=sampling.max_tokens,
                    temperature=sampling.temperature, seed=sampling.seed,
                    logprobs=sampling.logprobs > 0, top_logprobs=sampling.logprobs or None,
                    extra_headers={"X-Request-Id": request_id},  # the engine's id holds it: the watch's name
                    extra_body={"ignore_eos": sampling.ignore_eos, "return_token_ids": True,
                                "return_tokens_as_token_ids": True})

    def _failed(self, e: openai.APIError) -> Result:
        """What a request the client library raised `e` for gets: refused
        (the server's status, or an error event inside a stream), timed out,
        or the engine's death when the connection failed."""
        if isinstance(e, openai.APIStatusError):
            return Rejected(status=e.status_code, message=str(e.message)[:2000])
        if isinstance(e, openai.APITimeoutError):
            return RequestTimedOut(self.request_timeout)
        if isinstance(e, openai.APIConnectionError):
            return self._death() or EngineCrashed(cause=Cause.ENGINE_DEAD, detail=f"connection failed: {e}")
        return Rejected(status=None, message=str(e.message)[:2000])

    def _one(self, client, conv, sampling: Sampling, model: str, go: threading.Event, request_id: str,
             forced: list[int] | None = None) -> Result:
        """One request; `forced`: its conversation ends in an open assistant
        message that must render as exactly these tokens (chat_forced)."""
        go.wait()
        request = self._request(conv, sampling, model, request_id)
        if forced is not None:
            request["extra_body"] |= {"continue_final_message": True, "add_generation_prompt": False}
        try:
            resp = client.chat.completions.create(**request)
        except (openai.APIStatusError, openai.APIConnectionError) as e:
            return self._failed(e)
        prompt = list(getattr(resp, "prompt_token_ids", None) or [])
        if forced is not None and prompt[len(prompt) - len(forced):] != list(forced):
            return Rejected(status=None, message=f"{NOT_FORCED}: the prompt the server rendered ends with "
                                                 f"{prompt[-len(forced) - 2:]}, not with the forced {forced}")
        return self._completion(resp)

    @staticmethod
    def _completion(resp) -> Completion:
        choice = resp.choices[0]
        content = (choice.logprobs.content or []) if choice.logprobs else []
        logprobs = [{_token_id(t.token): t.logprob for t in c.top_logprobs if _token_id(t.token) is not None}
                    for c in content]
        token_ids = list(getattr(choice, "token_ids", None) or
                         [i for c in content if (i := _token_id(c.token)) is not None])
        return Completion(text=choice.message.content or "", token_ids=token_ids, logprobs=logprobs,
                          prompt_token_count=resp.usage.prompt_tokens if resp.usage else None,
                          cached_tokens=_cached_tokens(resp.usage),
                          finish_reason=choice.finish_reason)

    def chat_forced(self, conversation, sampling: Sampling, adapter: LoraAdapter | None,
                    forced: list[int]) -> Result:
        """The answer that continues `forced` tokens after the conversation's
        generation prompt, from the server itself (a comparator following
        this stack past a split). First as text: the server detokenizes the
        tokens, they go back as the open final assistant message
        (`continue_final_message`), and the prompt it rendered must end with
        exactly them. Tokens that do not survive that round trip (a byte
        token cut out of a character, a template that trims) go as tokens:
        the server renders the prompt (`/v1/chat/completions/render`), the
        tokens are appended, and its token-in route answers
        (`/inference/v1/generate`, on a vLLM server with scale-out routes).
        NotForced, saying why, where neither can."""
        status, text = self._post("/detokenize", {"model": self.served_model, "tokens": list(forced)},
                                  DETOKENIZE_TIMEOUT_S)
        if status != 200:
            raise NotForced(f"the server did not detokenize the forced tokens (HTTP {status}): {text[:300]}")
        conv = [*conversation, {"role": "assistant", "content": json.loads(text)["prompt"]}]
        [result] = self._fire([conv], sampling, [adapter], self._one, per_request=[{"forced": list(forced)}])
        if not (isinstance(result, Rejected) and result.message.startswith(NOT_FORCED)):
            return result
        return self._forced_as_tokens(conversation, sampling, adapter, forced, as_text=result.message)

    def _forced_as_tokens(self, conversation, sampling: Sampling, adapter: LoraAdapter | None,
                          forced: list[int], as_text: str) -> Result:
        request = self._request(conversation, sampling, adapter.name if adapter else self.served_model, "render")
        body = {k: v for k, v in request.items() if k not in ("extra_headers", "extra_body") and v is not None}
        status, text = self._post("/v1/chat/completions/render", body | {"ignore_eos": sampling.ignore_eos},
                                  DETOKENIZE_TIMEOUT_S)
        if status != 200:
            raise NotForced(f"{as_text}; and the server renders no prompt to tokens (HTTP {status}: {text[:200]})")
        rendered = json.loads(text)
        rendered["token_ids"] = [*rendered["token_ids"], *forced]
        rendered["token_offsets"] = None  # they covered the prompt alone
        status, text = self._post("/inference/v1/generate", rendered, self.request_timeout)
        if status != 200:
            raise NotForced(f"{as_text}; and its token-in route refused them (HTTP {status}: {text[:200]})")
        choice = json.loads(text)["choices"][0]
        content = (choice.get("logprobs") or {}).get("content") or []
        return Completion(text="", token_ids=list(choice["token_ids"]),
                          logprobs=[{t["token_id"]: t["logprob"] for t in c["top_logprobs"]} for c in content],
                          prompt_token_count=len(rendered["token_ids"]), finish_reason=choice.get("finish_reason"))

    def _one_streamed(self, client, conv, sampling: Sampling, model: str, go: threading.Event,
                      request_id: str) -> Result:
        """As `_one`, streamed: the answer as its chunks add up, with the
        seconds to the first token and to the last as this client saw them."""
        go.wait()
        sent = time.monotonic()
        text, token_ids, logprobs = [], [], []
        first = finish = usage = None
        try:
            stream = client.chat.completions.create(**self._request(conv, sampling, model, request_id),
                                                    stream=True, stream_options={"include_usage": True})
            for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    content = (choice.logprobs.content or []) if choice.logprobs else []
                    ids = list(getattr(choice, "token_ids", None) or
                               [i for c in content if (i := _token_id(c.token)) is not None])
                    if ids and first is None:
                        first = time.monotonic() - sent
                    token_ids += ids
                    logprobs += [{_token_id(t.token): t.logprob for t in c.top_logprobs
                                  if _token_id(t.token) is not None} for c in content]
                    text.append(choice.delta.content or "")
                    finish = choice.finish_reason or finish
        except openai.APIError as e:  # also an error event inside the stream
            return self._failed(e)
        except Exception as e:  # noqa: BLE001 (the client's transport error: the stream broke off)
            return self._death() or EngineCrashed(cause=Cause.ENGINE_DEAD,
                                                  detail=f"the stream broke off: {type(e).__name__}: {e}")
        return Completion(text="".join(text), token_ids=token_ids, logprobs=logprobs,
                          prompt_token_count=usage.prompt_tokens if usage else None,
                          cached_tokens=_cached_tokens(usage), finish_reason=finish,
                          ttft_s=first, e2e_s=time.monotonic() - sent)

    def chat(self, conversations, sampling: Sampling = Sampling(), adapters: Adapters = None) -> list[Result]:
        """An adapter is asked for by its name as the request's `model` (the
        server must know it: --lora-modules, or a runtime load)."""
        return self._fire(conversations, sampling, adapters, self._one)

    def chat_streamed(self, conversations, sampling: Sampling = Sampling(),
                      adapters: Adapters = None) -> list[Result]:
        """As `chat`, each request streamed: its Completion also holds the
        seconds to its first token and to its last (`ttft_s`, `e2e_s`)."""
        return self._fire(conversations, sampling, adapters, self._one_streamed)

    def chat_abandoning(self, conversations, sampling: Sampling, leave_after_steps: list[int | None],
                        leaving: Sampling | None = None) -> list[Result]:
        """Request i's client goes away mid-stream once the engine has run
        its request for `leave_after_steps[i]` steps, having asked for
        `leaving` (default: `sampling`); None: the client stays to the end
        of its answer. An abandoned request's Completion has finish reason
        ABANDONED and no tokens.

        The staying requests are sent at once; the leaving ones one after
        another, each once the engine runs every staying request and has
        ended the leaving one before it. While a server prepares a prompt's
        media it answers nothing else: a client that left meanwhile was
        seen to be noticed only after its request had finished, aborting
        nothing. So each leaves while the server has no media to prepare."""
        ids = _request_ids(len(conversations))
        staying = [rid for rid, n in zip(ids, leave_after_steps) if n is None]
        leavers = [rid for rid, n in zip(ids, leave_after_steps) if n is not None]
        offset = self.observations.mark()
        return self._fire(conversations, sampling, None, self._one_or_leaving, ids=ids, per_request=[
            {} if n is None else {"leave_after_steps": n, "sampling": leaving or sampling, "offset": offset,
                                  "running": staying, "ended": leavers[:leavers.index(rid)]}
            for rid, n in zip(ids, leave_after_steps)])

    def _one_or_leaving(self, client, conv, sampling: Sampling, model: str, go: threading.Event,
                        request_id: str, leave_after_steps: int | None = None, offset: int = 0,
                        running: list[str] = (), ended: list[str] = ()) -> Result:
        """A staying request (`_one`), or a leaving one, sent once the engine
        runs `running` and has ended `ended` (events after `offset`), its
        client gone once the engine has run it `leave_after_steps` steps, as
        the in-engine observer shows them. Watched in the engine, not read
        from the stream, and from a process of its own (harness.engines.
        leaving): a client in a harness thread read its request's steps, and
        its stream, only after the engine had finished it."""
        if leave_after_steps is None:
            return self._one(client, conv, sampling, model, go, request_id)
        go.wait()
        request = self._request(conv, sampling, model, request_id)
        body = {k: v for k, v in request.items() if k not in ("extra_headers", "extra_body") and v is not None}
        observed = self.observations.path
        gone = leave_in_own_process({
            "url": self.base_url, "api_key": self.api_key, "headers": request["extra_headers"],
            "body": body | request["extra_body"] | {"stream": True}, "request_id": request_id,
            "steps": leave_after_steps, "observations": observed and str(observed), "offset": offset,
            "running": list(running), "ended": list(ended), "timeout_s": self.request_timeout})
        if gone["outcome"] == "rejected":
            return Rejected(status=gone["status"], message=_error_message(gone["status"], gone["body"].encode()))
        if gone["outcome"] == "unreachable":
            return self._death() or EngineCrashed(cause=Cause.ENGINE_DEAD,
                                                  detail=f"connection failed: {gone['error']}")
        return Completion(text="", token_ids=[], logprobs=[], finish_reason=ABANDONED, e2e_s=gone["e2e_s"])

    def _fire(self, conversations, sampling: Sampling, adapters: Adapters, one,
              per_request: list[dict] | None = None, ids: list[str] | None = None) -> list[Result]:
        """Every conversation at once, through `one` (given request i's
        `per_request[i]` besides), each bounded and watched."""
        n = len(conversations)
        adapters = per_conversation(adapters, n)
        if self.crashed:
            return [self.crashed] * n
        self._begin_request()
        models = [a.name if a else self.served_model for a in adapters]
        client = self._client()
        go = threading.Event()
        results: list[Result | None] = [None] * n
        ids = ids or _request_ids(n)
        watch = self._watch()
        pool = ThreadPoolExecutor(max_workers=n)
        extra = per_request or [{}] * n
        futures = {}
        for i, (c, m, rid) in enumerate(zip(conversations, models, ids)):
            kwargs = dict(extra[i])
            futures[pool.submit(one, client, c, kwargs.pop("sampling", sampling), m, go, rid, **kwargs)] = i
        if watch is not None:
            watch.expect(ids)
        go.set()  # all threads are waiting: release them together so the server batches
        deadline = time.monotonic() + self.request_timeout + 5
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.05)
            for f in done:
                results[futures[f]] = f.result()
                if watch is not None:
                    watch.done(ids[futures[f]])
            if pending and (crash := self._death()):
                for f in pending:
                    results[futures[f]] = crash
                pending = set()
            elif pending and watch is not None and (stall := watch.poll()) is not None:
                health = "; /health answered 200" if self.healthy() else "; /health did not answer"
                # Its connections go first: a server shuts down only once they have closed.
                client.close()
                hung = self._hang(stall, health)
                for f in pending:
                    results[futures[f]] = hung
                pending = set()
            elif pending and time.monotonic() > deadline:
                for f in pending:
                    results[futures[f]] = RequestTimedOut(self.request_timeout)
                pending = set()
        pool.shutdown(wait=False, cancel_futures=True)
        self._watched(watch)
        return self._crash_behind_5xx(results)

    def _crash_behind_5xx(self, results: list[Result]) -> list[Result]:
        """A server whose engine core just died answers its in-flight requests
        with a 500 before it exits: that is the crash, not a verdict on the
        input. Wait for the death to show, and report it as such; a server
        whose /health answers 200 meanwhile is alive, and its 5xx stays."""
        if not any(isinstance(r, Rejected) and (r.status or 0) >= 500 for r in results):
            return results
        deadline = time.monotonic() + DEATH_AFTER_5XX_S
        while (crash := self._death()) is None and time.monotonic() < deadline:
            if self.healthy(timeout=1.0):
                return results
            time.sleep(0.05)
        if crash is None:
            return results
        return [crash if isinstance(r, Rejected) and (r.status or 0) >= 500 else r for r in results]
