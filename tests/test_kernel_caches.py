"""An engine forced to a lesser level compiles into caches of that level's
own: torch inductor reuses a CPU kernel compiled for another
ATEN_CPU_CAPABILITY and computes garbage with it (finding 013: a TP 2
tiny-gemma4 engine forced to avx2 died of an IndexError after a native
engine had compiled into the same cache)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.kernels import level_env
from harness.setup.cpu_features import LEVELS, NATIVE, isa_features

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT / "docs" / "findings" / "013-inductor-cache-across-cpu-capability-repro.py"
FORCED = [level for level in LEVELS if level != NATIVE]


def test_each_forced_level_has_compile_caches_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path))
    caches = {level: (level_env(level)["TORCHINDUCTOR_CACHE_DIR"], level_env(level)["VLLM_CACHE_ROOT"])
              for level in FORCED}
    assert len({d for pair in caches.values() for d in pair}) == 2 * len(FORCED)
    assert all(Path(d).is_relative_to(tmp_path) for pair in caches.values() for d in pair)
    assert level_env(NATIVE) == {}


def _masked_ids(env: dict[str, str]) -> int:
    """The finding's function compiled and run in a fresh interpreter: 0
    where it equals eager, 1 where it differs."""
    return subprocess.run([sys.executable, str(REPRO), "--child"], env=env, capture_output=True,
                          timeout=300).returncode


@pytest.mark.skipif("avx512f" not in isa_features(), reason="needs AVX-512: a native compile picks avx2 elsewhere")
def test_an_avx2_engine_never_reuses_the_kernels_a_native_engine_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path / "harness"))
    shared = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    shared.pop("ATEN_CPU_CAPABILITY", None)
    assert _masked_ids(shared) == 0, "the native compile itself differs from eager"
    # The premise, observed: from the shared cache, avx2 dispatch gives wrong ids.
    assert _masked_ids({**shared, "ATEN_CPU_CAPABILITY": "avx2"}) == 1
    assert _masked_ids({**shared, **level_env("avx2")}) == 0
