"""The harness's one log tail, JSON-lines reader, TOML loader and file-name slug."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.files import load_toml, log_tail, read_json_lines, slug

ROOT = Path(__file__).resolve().parents[1]


def test_log_tail_reads_from_the_mark_and_drops_the_line_the_byte_limit_cuts(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    mark = len("".join(f"line {i}\n" for i in range(90)))
    assert log_tail(log, 5, start=mark) == [f"line {i}" for i in range(95, 100)]
    assert log_tail(log, 50, start=mark) == [f"line {i}" for i in range(90, 100)]
    # 20 bytes end inside "line 97": the cut line is not shown as "ne 97".
    assert log_tail(log, 50, max_bytes=20) == ["line 98", "line 99"]


def test_log_tail_of_no_log_is_empty_and_an_unreadable_one_says_why(tmp_path):
    assert log_tail(tmp_path / "absent.log") == []
    (tail,) = log_tail(tmp_path)  # a directory
    assert tail.startswith("[log unreadable:")


def test_json_lines_keep_every_good_line_and_name_the_bad_and_the_unfinished():
    lines = read_json_lines(b'{"a": 1}\n\n{"b": \n[2]\n{"c": 3')
    assert lines.values == [(1, {"a": 1}), (4, [2])]
    assert [number for number, _ in lines.bad] == [3]
    assert (lines.unfinished, lines.unfinished_line) == (b'{"c": 3', 5)
    assert read_json_lines(b'{"a": 1}\n').unfinished == b""


def test_slug_keeps_the_end_of_a_scenario_name():
    name = "test_ragged_audio[tiny-gemma4-ragged/1.0 s]"
    assert slug(name) == "test_ragged_audio_tiny-gemma4-ragged_1.0_s_"
    assert slug("x" * 200 + "[clip3]", 10) == "xxx_clip3_"


class BadFile(Exception):
    pass


@pytest.mark.parametrize("text, says", [
    (None, "cannot read the registry: file not found"),
    ("[[issue]\n", "not valid TOML"),
    ('[[issues]]\ncheck = "x"\n', "unknown top-level keys ['issues']; entries go in [[issue]] tables"),
    ('[issue]\ncheck = "x"\n', "'issue' must be an array of tables ([[issue]])"),
])
def test_a_toml_file_people_edit_is_refused_naming_the_file_and_why(tmp_path, text, says):
    path = tmp_path / "registry.toml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(BadFile, match=re.escape(says)) as refused:
        load_toml(path, BadFile, "the registry", arrays=("issue",))
    assert str(refused.value).startswith(str(path))


def test_every_toml_file_is_read_by_the_one_loader():
    """The model matrix, the known issues, the noise profiles and the pinned
    release all go through load_toml: one set of messages for a bad file."""
    readers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "harness").rglob("*.py")
                     if "tomllib" in p.read_text(encoding="utf-8"))
    assert readers == ["harness/files.py"]
    assert load_toml(ROOT / "pyproject.toml", BadFile, "x")["project"]["name"] == "mmharness"
