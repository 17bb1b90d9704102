"""The known-issues registry: what it accepts, what it refuses, what it matches."""
from __future__ import annotations

import pytest

from harness.results.known_issues import KnownIssuesError, apply_known_issues, load_known_issues
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


def test_shipped_registry_loads_and_holds_no_speculative_entry():
    assert load_known_issues(REPO_REGISTRY) == []


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


def test_detailed_cause_matches_its_class(tmp_path):
    text = ENTRY.replace('cause = "mismatch"', 'cause = "python-exception"')
    record = _record(verdict="error", cause="python-exception: KeyError: 'pixel_values'")
    apply_known_issues(record, load_known_issues(_registry(tmp_path, text)))
    assert record.verdict == "known issue"


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
])
def test_bad_registry_names_file_and_problem(tmp_path, text, message):
    path = _registry(tmp_path, text)
    with pytest.raises(KnownIssuesError, match="known_issues.toml") as caught:
        load_known_issues(path)
    assert message in str(caught.value)
