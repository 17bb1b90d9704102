"""The known-issues registry: what it accepts, what it refuses, what it matches."""
from __future__ import annotations

import pytest

from harness.results.known_issues import KnownIssuesError, apply_known_issues, check_pattern, load_known_issues
from harness.results.record import CheckRecord

REPO_REGISTRY = __import__("pathlib").Path(__file__).resolve().parents[1] / "known_issues.toml"

ENTRY = '''
[[issue]]
check = "scenarios/test_audio.py::test_ragged[*]"
engine = "vllm"
engine_versions = ">=0.9,<0.9.3"
cause = "mismatch"
link = "https://example.invalid/vllm/issues/1"
reason = "ragged audio batches reorder outputs"
'''


def _registry(tmp_path, text):
    path = tmp_path / "known_issues.toml"
    path.write_text(text)
    return path


def _record(**fields):
    base = dict(id="scenarios/test_audio.py::test_ragged[tiny-4]", engine="offline:vllm",
                engine_version="0.9.2", verdict="fail", cause="mismatch")
    return CheckRecord(**{**base, **fields})


def test_shipped_registry_names_real_checks_and_existing_findings():
    """Every shipped entry matches a check the scenarios collect, and links an
    upstream issue or a finding file that is there: nothing speculative."""
    issues = load_known_issues(REPO_REGISTRY)
    ids = (REPO_REGISTRY.parent / "tests" / "data" / "scenario_check_ids_cpu.txt").read_text().splitlines()
    assert issues
    for issue in issues:
        assert any(check_pattern(issue.check).fullmatch(i) for i in ids), issue.check
        assert issue.link.startswith("https://") or (REPO_REGISTRY.parent / issue.link).is_file(), issue.link


def test_matching_failure_becomes_known_issue(tmp_path):
    issues = load_known_issues(_registry(tmp_path, ENTRY))
    record = _record()
    apply_known_issues(record, issues)
    assert record.verdict == "known issue"
    assert record.known_issue["link"] == "https://example.invalid/vllm/issues/1"


@pytest.mark.parametrize("change", [
    {"cause": "oom"},                                            # fails another way: news
    {"engine_version": "0.9.3"},                                 # outside the range
    {"engine_version": None},                                    # unknown version
    {"engine": "offline:sglang"},                                # another engine
    {"id": "scenarios/test_audio.py::test_ragged_long[tiny]"},   # another check
])
def test_failure_that_differs_stays_a_failure(tmp_path, change):
    record = _record(**change)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, ENTRY)))
    assert record.verdict == "fail"
    assert record.known_issue is None


EXCEPTION_ENTRY = ENTRY.replace('cause = "mismatch"', 'cause = "python-exception"\n'
                                'exception = "RuntimeError"\nmessage = "*stride*"')
STATUS_ENTRY = ENTRY.replace('cause = "mismatch"', 'cause = "http-5xx"\nstatus = 500\n'
                             'message = "*No package metadata*"')


def _stride_crash(**fields):
    return _record(verdict="error", cause="python-exception: RuntimeError: Expected a.stride(-1) == 1",
                   **fields)


def _http_500(status=500, message="input clip0: No package metadata was found for vllm"):
    return _record(cause="http-5xx", message=message,
                   evidence={"result": {"rejected": status, "message": message}})


def test_exception_entry_matches_its_type_and_message(tmp_path):
    record = _stride_crash()
    apply_known_issues(record, load_known_issues(_registry(tmp_path, EXCEPTION_ENTRY)))
    assert record.verdict == "known issue"
    assert record.known_issue["exception"] == "RuntimeError"


@pytest.mark.parametrize("cause", [
    "python-exception: ValueError: Expected a.stride(-1) == 1",   # another exception type
    "python-exception: RuntimeError: shape mismatch",             # another message
    "python-exception",                                           # no detail at all
])
def test_exception_entry_leaves_another_exception_a_failure(tmp_path, cause):
    record = _record(verdict="error", cause=cause)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, EXCEPTION_ENTRY)))
    assert record.verdict == "error"


def test_status_entry_matches_status_and_message(tmp_path):
    issues = load_known_issues(_registry(tmp_path, STATUS_ENTRY))
    hit, other_status, other_text = _http_500(), _http_500(status=503), _http_500(message="boom")
    for record in (hit, other_status, other_text):
        apply_known_issues(record, issues)
    assert [r.verdict for r in (hit, other_status, other_text)] == ["known issue", "fail", "fail"]


@pytest.mark.parametrize("cause", ["startup-failed", "harness", "harness: TypeError: bad fixture"])
def test_startup_failures_and_harness_errors_are_never_absorbed(tmp_path, cause):
    # Even a catch-all entry for the check cannot take them: its cause differs,
    # and matching refuses these classes before the cause is compared.
    issues = load_known_issues(_registry(tmp_path, ENTRY))
    record = _record(verdict="error", cause=cause)
    apply_known_issues(record, issues)
    assert record.verdict == "error" and record.known_issue is None
    object.__setattr__(issues[0], "cause", cause)  # as if an entry had slipped past the loader
    apply_known_issues(record, issues)
    assert record.verdict == "error"


def test_finding_file_beside_the_registry_is_a_link(tmp_path):
    (tmp_path / "docs" / "findings").mkdir(parents=True)
    (tmp_path / "docs" / "findings" / "002-stride.md").write_text("# finding\n")
    text = EXCEPTION_ENTRY.replace("https://example.invalid/vllm/issues/1", "docs/findings/002-stride.md")
    assert load_known_issues(_registry(tmp_path, text))[0].link == "docs/findings/002-stride.md"


def test_repo_finding_files_exist():
    findings = REPO_REGISTRY.parent / "docs" / "findings"
    for name in ("001-non-16khz-audio-500-without-torchaudio.md", "002-gemma4-audio-conformer-cpu-stride.md"):
        text = (findings / name).read_text()
        for needed in ("0.32.0", "## Reproducer", "## What happens", "## What should happen"):
            assert needed in text, f"{name} lacks {needed!r}"


def test_matching_pass_is_flagged_as_appearing_fixed(tmp_path):
    record = _record(verdict="pass", cause=None)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, ENTRY)))
    assert record.verdict == "pass"
    assert record.known_issue_fixed["reason"] == "ragged audio batches reorder outputs"


def test_brackets_in_check_ids_are_literal(tmp_path):
    text = ENTRY.replace("test_ragged[*]", "test_ragged[tiny-?]")
    issues = load_known_issues(_registry(tmp_path, text))
    hit, miss = _record(), _record(id="scenarios/test_audio.py::test_raggedt")
    apply_known_issues(hit, issues)
    apply_known_issues(miss, issues)
    assert (hit.verdict, miss.verdict) == ("known issue", "fail")


@pytest.mark.parametrize("text, message", [
    ("[[issue]\ncheck = 1", "not valid TOML"),
    (ENTRY.replace('link = "https://example.invalid/vllm/issues/1"\n', ""), "#1 is missing link"),
    (ENTRY.replace('reason = "ragged audio batches reorder outputs"', 'reason = ""'), "missing reason"),
    (ENTRY.replace(">=0.9,<0.9.3", "0.9 or so"), "is not a version range"),
    (ENTRY.replace('cause = "mismatch"', 'cause = "harness"'), "harness bug"),
    (ENTRY.replace('cause = "mismatch"', 'cause = "mismatched"'), "unknown cause 'mismatched'"),
    (ENTRY + 'owner = "me"\n', "unknown keys ['owner']"),
    ('[issue]\ncheck = "x"\n', "array of tables"),
    ('[[issues]]\ncheck = "x"\n', "unknown top-level keys ['issues']"),
    (ENTRY.replace('cause = "mismatch"', 'cause = "python-exception"'), "needs exception and message"),
    (EXCEPTION_ENTRY.replace('message = "*stride*"\n', ""), "'python-exception' needs message"),
    (ENTRY.replace('cause = "mismatch"', 'cause = "http-5xx"'), "'http-5xx' needs status and message"),
    (STATUS_ENTRY.replace("status = 500", "status = 404"), "status must be an HTTP 5xx"),
    (ENTRY.replace('cause = "mismatch"', 'cause = "startup-failed"'), "'startup-failed' would hide"),
    (ENTRY.replace("https://example.invalid/vllm/issues/1", "docs/findings/009-none.md"),
     "no such finding file"),
    (ENTRY.replace("https://example.invalid/vllm/issues/1", "see the wiki"), "neither a URL nor"),
])
def test_bad_registry_names_file_and_problem(tmp_path, text, message):
    path = _registry(tmp_path, text)
    with pytest.raises(KnownIssuesError, match="known_issues.toml") as caught:
        load_known_issues(path)
    assert message in str(caught.value)
