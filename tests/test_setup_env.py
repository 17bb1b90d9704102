"""The CPU venv really works, and set-up refuses what it cannot run."""
import os
import subprocess
import sys
from pathlib import Path

from harness import venv_setup
from harness.cpu_features import MissingCpuFeature, require_avx2

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
