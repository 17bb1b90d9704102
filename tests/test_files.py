"""The harness's one log tail, JSON-lines reader and file-name slug."""
from __future__ import annotations

from harness.files import log_tail, read_json_lines, slug


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
