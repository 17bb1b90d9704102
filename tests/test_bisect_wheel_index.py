"""The GPU tier's per-commit bisect, planned by simulation: a wheel index
in vLLM's per-commit layout (tests/data/wheel_index) served on 127.0.0.1,
its commits walked between two releases, and pip finding a commit's wheel
with the arguments a step gives it."""
import shutil
import subprocess
import sys
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.bisect import run_bisect
from harness.bisect.search import FAIL, PASS, Outcome
from harness.bisect.steps import StepRunner
from harness.bisect.versions import commit_wheels, listed_versions

DATA = Path(__file__).parent / "data" / "wheel_index"
CHECK = "scenarios/test_ragged_audio.py::test_one_pass[gemma-4-e2b]"


def _fake_wheel(path: Path) -> None:
    """A wheel pip accepts: metadata only."""
    name, version = path.name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                      "Tag: cp38-abi3-manylinux_2_28_x86_64\n")
        whl.writestr(f"{info}/RECORD", "")


@pytest.fixture(scope="module")
def wheel_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheels") / "index"
    shutil.copytree(DATA, root)
    for page in root.glob("*/vllm/index.html"):
        name = page.read_text().split('">', 1)[1].split("<", 1)[0]
        _fake_wheel(page.parent / name)
    (root / "empty").mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_commits_between_two_releases_are_walked_in_dev_version_order(wheel_index):
    commits = commit_wheels("vllm", wheel_index)
    assert commits["0.31.1.dev2+g5e6f7a8b"] == f"{wheel_index}/5e6f7a8b"
    assert listed_versions("vllm", "0.32.0", "0.31.0", commits=commits) == [
        "0.31.0", "0.31.1.dev1+g1a2b3c4d", "0.31.1.dev2+g5e6f7a8b", "0.31.1.dev3+g9c0d1e2f",
        "0.32.0rc1.dev4+g3a4b5c6d", "0.32.0"]  # 0.32.1.dev1 lies after the newer end


def test_pip_finds_a_commits_wheel_with_the_arguments_its_step_gives(wheel_index, tmp_path):
    commits = commit_wheels("vllm", wheel_index)
    version = "0.31.1.dev3+g9c0d1e2f"
    runner = StepRunner(CHECK, "vllm", tmp_path, tier="gpu",
                        pip_args={v: ("--extra-index-url", url) for v, url in commits.items()})
    out = subprocess.run([sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--no-deps",
                          "--ignore-installed", "--index-url", f"{wheel_index}/empty/",
                          *runner.pip_args[version], f"vllm=={version}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"Would install vllm-{version}" in out.stdout


def test_a_gpu_bisect_over_commits_answers_with_a_commit(wheel_index, tmp_path):
    broken = {"0.31.1.dev3+g9c0d1e2f", "0.32.0rc1.dev4+g3a4b5c6d", "0.32.0"}
    probe = lambda v: Outcome(FAIL, "engine-dead") if v in broken else Outcome(PASS)  # noqa: E731
    answer, _ = run_bisect(CHECK, "vllm==0.31.0", "vllm==0.32.0", tier="gpu", wheel_index=wheel_index,
                           folder=tmp_path, probe=probe, log=lambda line: None)
    assert answer.sentence == "first bad in 0.31.1.dev3+g9c0d1e2f (last good 0.31.1.dev2+g5e6f7a8b); bad: engine-dead"
