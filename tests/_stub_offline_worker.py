"""A stand-in for mmharness_offline_worker.py: no engine, the same protocol. Says it is
ready, then answers each chat with one fixed completion; a chat whose only
message is "hang" is never answered (a hung engine)."""
import sys
import time
from multiprocessing.connection import Client

conn = Client(sys.argv[1], authkey=bytes.fromhex(sys.argv[2]))
conn.send({"ready": True, "max_num_seqs": 4, "max_num_batched_tokens": 64})
while True:
    msg = conn.recv()
    if msg.get("op") == "stop":
        break
    if [m.get("content") for c in msg["conversations"] for m in c] == ["hang"]:
        time.sleep(3600)
    conn.send({"ok": [{"text": "hi", "token_ids": [5], "logprobs": [], "prompt_token_count": 1,
                       "finish_reason": "length", "batch_call": 1, "batch_size": 1}
                      for _ in msg["conversations"]]})
