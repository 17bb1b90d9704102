"""The CPU venv really works, and set-up refuses what it cannot run."""
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from harness.setup import venv as venv_setup
from harness.setup.cpu_features import MissingCpuFeature, require_avx2

ROOT = Path(__file__).resolve().parent.parent
NO_AVX2 = "processor\t: 0\nflags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx\n"


def test_fresh_interpreter_imports_processors_and_engine():
    # A clean environment, as a worker spawned by the engine gets it: the shim
    # must come from the venv itself, not from anything this process set up.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([sys.executable, "-c", venv_setup.SMOKE + "; import torchvision; "
                          "print(torchvision.transforms.v2.functional.resize.__module__)"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "torchvision" in out.stdout


def test_vllm_resamples_8k_and_44k_with_its_default_method():
    # vLLM's own path: its media loader decodes the WAV, its parser resamples
    # with torchaudio (the default), as the engine does for a chat request.
    from harness.engines.interpreter import EngineInterpreter

    interpreter = EngineInterpreter()
    out = subprocess.run([str(interpreter.python), str(ROOT / "tests" / "_resample_check.py")],
                         env=interpreter.env(), capture_output=True, text=True, timeout=300)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESAMPLED ")), None)
    assert line, out.stderr[-3000:]
    got = json.loads(line.split(" ", 1)[1])
    assert got == {"method": "torchaudio", "default": "torchaudio",
                   "8000": [8000, 8000, 16000], "44100": [44100, 44100, 16000]}


def _venv_with_torchaudio(tmp_path, version):
    """A throwaway venv holding only torchaudio's metadata and a compiled library."""
    root = tmp_path / "venv"
    venv.create(root, with_pip=False)
    site = next((root / "lib").glob("python3*/site-packages"))
    dist = site / f"torchaudio-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchaudio\nVersion: {version}\n")
    (site / "torchaudio" / "lib").mkdir(parents=True)
    (site / "torchaudio" / "__init__.py").write_text("")
    (site / "torchaudio" / "lib" / "libtorchaudio.so").write_bytes(b"\x7fELF")
    return root, site


def test_setup_deletes_torchaudios_compiled_libraries_and_keeps_the_rest(tmp_path, monkeypatch):
    root, site = _venv_with_torchaudio(tmp_path, venv_setup.TORCHAUDIO_VERSION)
    monkeypatch.setattr(venv_setup, "VENV", root)
    assert "torchaudio's compiled libraries are present and cannot load here" in venv_setup.health_problems()
    freeze = f"torchaudio=={venv_setup.TORCHAUDIO_VERSION}\n"
    venv_setup.repair_engine_packages(venv_setup.vpy(), freeze, torchaudio_pin=venv_setup.TORCHAUDIO_VERSION)
    assert not any("torchaudio" in p for p in venv_setup.health_problems())
    assert (site / "torchaudio" / "__init__.py").is_file()
    assert not list(site.glob("torchaudio/lib/*.so"))
    venv_setup.repair_engine_packages(venv_setup.vpy(), freeze)  # idempotent; an engine venv's own version


@pytest.mark.parametrize("version, problem", [
    ("2.9.0", "torchaudio 2.9.0 is installed, not 2.11.1"),
    (None, "torchaudio is missing"),
])
def test_health_check_wants_the_pinned_torchaudio(tmp_path, monkeypatch, version, problem):
    if version:
        root, _ = _venv_with_torchaudio(tmp_path, version)
    else:
        root = tmp_path / "venv"
        venv.create(root, with_pip=False)
    monkeypatch.setattr(venv_setup, "VENV", root)
    assert any(p.startswith(problem) for p in venv_setup.health_problems())


def test_shim_is_lazy_and_leaves_startup_cheap():
    out = subprocess.run([sys.executable, "-c", "import sys; print('torch' in sys.modules, "
                          "'torchvision' in sys.modules)"], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"]


def test_venv_health_check_is_clean():
    assert venv_setup.health_problems() == []


def test_require_avx2_refuses_a_cpu_without_it(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(NO_AVX2)
    try:
        require_avx2(info)
    except MissingCpuFeature as e:
        assert "AVX2" in str(e)
    else:
        raise AssertionError("a CPU without avx2 was accepted")
    info.write_text(NO_AVX2.replace(" avx\n", " avx avx2\n"))
    require_avx2(info)


def test_make_run_stops_at_once_without_avx2(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(NO_AVX2)
    env = dict(os.environ, MMHARNESS_CPUINFO=str(info))
    out = subprocess.run(["make", "-s", "run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "lacks AVX2" in out.stderr
    assert "SIGILL" in out.stderr  # says why, instead of letting one surface


def test_setup_repairs_what_a_later_install_undid():
    # A re-resolve (or a hand edit) that drops the start-up shim is found by
    # the health check and put back by `make setup` without a reinstall.
    import site

    pth = Path(site.getsitepackages()[0]) / venv_setup.PTH_NAME
    text = pth.read_text()
    pth.unlink()
    try:
        assert "torchvision shim .pth is missing" in venv_setup.health_problems()
        out = subprocess.run(["make", "-s", "setup"], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "repairing" in out.stdout
        assert venv_setup.health_problems() == []
    finally:
        if not pth.exists():
            pth.write_text(text)
