"""The offline engine's worker: vllm.LLM in a process the harness owns.

Runs under the engine's interpreter as a script (stdlib + vllm only; it does
not import the harness). Protocol over a multiprocessing connection:
  harness → {"op": "chat", "conversations": [...], "sampling": {...},
             "adapters": [{"name", "path", "id"} | None, ...],   # one per conversation
             "forced": [[token id, ...] | None, ...]}           # optional, one per conversation
  worker  → {"enqueued": [request id, ...]}   # once every request is enqueued
  worker  → {"ok": [output, ...]} or {"error": Type, "message": str, "dead": bool}
One "chat" op is one batch: every request is enqueued while the engine core's
scheduler is paused (vLLM's level-0 sleep), and only then does it step. An
LLM.chat call would let the core start stepping on the first request while
the next ones are still being processed (measured: of 4 ragged clips, the 1 s
clip reached the audio encoder alone), so the batch would not be one step.
usage: mmharness_offline_worker.py ADDRESS AUTHKEY_HEX MODEL ENGINE_ARGS_JSON
"""
import json
import os
import sys
import traceback
from multiprocessing.connection import Client

# The engine core steps in this process (a reference engine in one process):
# an exception from its step is what kills the core's own process in the
# default layout, so it is reported as the engine's death, not a refusal.
ONE_PROCESS = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"


def _outputs(results, call_no):
    outs = []
    for r in results:
        o = r.outputs[0]
        lps = [{int(t): float(lp.logprob) for t, lp in pos.items()} for pos in (o.logprobs or [])]
        outs.append({"text": o.text, "token_ids": list(o.token_ids), "logprobs": lps,
                     "prompt_token_count": len(r.prompt_token_ids or []),
                     "prompt_token_ids": list(r.prompt_token_ids or []),
                     "cached_tokens": r.num_cached_tokens,
                     "finish_reason": o.finish_reason, "batch_call": call_no,
                     "batch_size": len(results)})
    return outs


def chat_as_one_batch(llm, conversations, sampling, lora_requests, forced, on_enqueued):
    """Like LLM.chat, but the scheduler sees every request before its first
    step, and the outputs come back in the order of the conversations,
    matched by request id (not by the position vLLM sorted them into).
    `forced`: per conversation, token ids appended to its rendered prompt (a
    comparator following this stack past a split), or None. `on_enqueued`
    is told the request ids (the harness watches them progress)."""
    llm.sleep(level=0, mode="keep")  # pause scheduling; adds are queued
    try:
        if any(forced):
            ids = enqueue_forced(llm, conversations, sampling, lora_requests, forced)
        else:
            ids = llm.enqueue_chat(conversations, sampling, use_tqdm=False, lora_request=lora_requests)
    finally:
        llm.wake_up(tags=["scheduling"])  # also after a rejected input (already aborted)
    on_enqueued([str(i) for i in ids])
    try:
        results = llm.wait_for_completion(use_tqdm=False)
    except Exception as e:
        e.mmharness_in_step = True
        raise
    return in_request_order(ids, results)


def enqueue_forced(llm, conversations, sampling, lora_requests, forced):
    """Render each conversation as LLM.chat does, append its forced tokens to
    the prompt (media placeholders stay where they were), and enqueue it."""
    prompts = []
    for conversation, tokens in zip(conversations, forced):
        engine_input = llm._preprocess_chat_one(conversation)
        engine_input["prompt_token_ids"] = list(engine_input["prompt_token_ids"]) + list(tokens or [])
        engine_input.pop("prompt", None)  # the text no longer spells these ids
        prompts.append(engine_input)
    n = len(prompts)
    return llm._render_and_add_requests(prompts=prompts, params=[sampling] * n,
                                        lora_requests=lora_requests if lora_requests else None)


def in_request_order(ids, results):
    """The results in the order their requests were enqueued. The engine
    keeps the id it was given as the output's, and may suffix the id it
    returns at enqueue ("3" and "3-1a2b")."""
    by_id = {r.request_id: r for r in results}
    ordered = []
    for rid in ids:
        found = by_id.get(rid) or next((r for key, r in by_id.items() if rid.startswith(key + "-")), None)
        if found is None:
            raise RuntimeError(f"no output for request {rid!r} among {sorted(by_id)}")
        ordered.append(found)
    return ordered


def main():
    address, authkey, model, engine_args = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
    conn = Client(address, authkey=authkey)
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    llm = LLM(model=model, **engine_args)
    sched = llm.llm_engine.vllm_config.scheduler_config
    conn.send({"ready": True, "max_num_seqs": sched.max_num_seqs,
               "max_num_batched_tokens": sched.max_num_batched_tokens})
    calls = 0
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg.get("op") == "stop":
            return
        try:
            adapters = msg.get("adapters") or [None] * len(msg["conversations"])
            # One per prompt; None runs that prompt on the base model.
            lora_requests = [LoRARequest(a["name"], a["id"], a["path"]) if a else None for a in adapters]
            forced = msg.get("forced") or [None] * len(msg["conversations"])
            results = chat_as_one_batch(llm, msg["conversations"], SamplingParams(**msg["sampling"]),
                                        lora_requests if any(lora_requests) else None, forced,
                                        lambda ids: conn.send({"enqueued": ids}))
            calls += 1
            conn.send({"ok": _outputs(results, calls)})
        except Exception as e:  # reported to the harness, which decides what it means
            traceback.print_exc()
            dead = (type(e).__name__ in ("EngineDeadError", "EngineGenerateError")
                    or ONE_PROCESS and getattr(e, "mmharness_in_step", False))
            conn.send({"error": type(e).__name__, "message": str(e)[:2000], "dead": dead})


if __name__ == "__main__":
    main()
