"""How far apart the chosen tokens' logprobs are when nothing is wrong: the
same requests run twice alone, and twice in one batch, on the CPU tier's
tiny Gemma4. The comparator's logprob tolerance is set from these figures
(harness/checks/comparators.py LOGPROB_TOLERANCE). Prints figures, asserts nothing.

usage: .venv/bin/python benchmarks/measure_logprob_noise.py
"""
from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from _tiny import GREEDY_16, tiny_gemma4

from harness.checks.comparators import chosen_logprob_deltas
from harness.engines.offline import OfflineEngine
from harness.workloads import audio
from harness.workloads.chat import with_uuids


def main() -> None:
    interpreter, entry, model = tiny_gemma4()
    convs = [r.conversation for r in audio.clip_workload("noise", [1.0, 3.5, 7.0, 12.0]).requests]
    args = {**entry.engine_args, "enable_prefix_caching": False, "mm_processor_cache_gb": 0}
    with tempfile.TemporaryDirectory() as tmp, \
            OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log") as engine:
        engine.start()
        runs = {}
        for n in (1, 2):
            runs[f"alone{n}"] = [engine.chat([with_uuids(c, f"a{n}-{i}")], GREEDY_16)[0]
                                 for i, c in enumerate(convs)]
            runs[f"batch{n}"] = engine.chat([with_uuids(c, f"b{n}-{i}") for i, c in enumerate(convs)],
                                            GREEDY_16)
    for x, y in itertools.combinations(runs, 2):
        d = [v for a, b in zip(runs[x], runs[y]) for v in chosen_logprob_deltas(a, b)]
        same = sum(a.token_ids == b.token_ids for a, b in zip(runs[x], runs[y]))
        print(f"{x:>6} vs {y:<6}: {same}/4 token-equal, max |Δlogprob| {max(d):.4f} nats, "
              f"mean {sum(d) / len(d):.4f} over {len(d)} positions")


if __name__ == "__main__":
    main()
