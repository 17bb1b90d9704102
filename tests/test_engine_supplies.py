"""What an engine interpreter lacks is supplied from outside its venv, or
named with what to install (harness.engines.supplies)."""
import subprocess
import sys

from harness.engines import supplies


def _identity(**packages):
    base = {"python": "/x/bin/python", "python_version": "%d.%d" % sys.version_info[:2], "timm": "1.0.31"}
    healthy = {"version": "1", "path": "/x", "error": None}
    return base | {n: dict(healthy) for n in ("torchaudio", "torchcodec", "av", "soundfile")} | packages


def _fake_torchaudio(tmp_path):
    package = tmp_path / "site" / "torchaudio"
    (package / "lib").mkdir(parents=True)
    (package / "__init__.py").write_text("RESAMPLE = True\n")
    (package / "lib" / "__init__.py").write_text("")
    (package / "lib" / "libtorchaudio.so").write_bytes(b"\x7fELF")
    return package


def test_a_healthy_interpreter_gets_nothing_and_is_told_nothing(tmp_path):
    assert supplies.supplied_paths(_identity(), tmp_path) == []
    assert supplies.shortfalls(_identity()) == []


def test_torchaudio_that_cannot_load_is_supplied_without_its_compiled_libraries(tmp_path):
    package = _fake_torchaudio(tmp_path)
    identity = _identity(torchaudio={"version": "2.11.1", "path": str(package),
                                     "error": "OSError: Could not load this library: x.so"})
    [folder] = supplies.supplied_paths(identity, tmp_path / "cache")
    assert (folder / "torchaudio" / "__init__.py").read_text() == "RESAMPLE = True\n"
    assert not list(folder.rglob("*.so"))
    assert package.joinpath("lib", "libtorchaudio.so").is_file()  # the venv is left as it was
    assert supplies.supplied_paths(identity, tmp_path / "cache") == [folder]  # built once
    assert supplies.shortfalls(identity) == []


def test_torchcodec_that_cannot_load_reads_as_absent_to_vllm(tmp_path):
    identity = _identity(torchcodec={"version": "0.17.0", "path": "/x", "error": "OSError: no .so"})
    [folder] = supplies.supplied_paths(identity, tmp_path)
    # vLLM catches ImportError (and RuntimeError) around torchcodec, not OSError.
    out = subprocess.run([sys.executable, "-c", "from torchcodec.decoders import AudioDecoder"],
                         env={"PYTHONPATH": str(folder)}, capture_output=True, text=True)
    assert "ImportError: torchcodec cannot load beside this torch" in out.stderr


def test_no_audio_decoder_borrows_the_harness_pyav(tmp_path):
    missing = {"version": None, "path": None, "error": None}
    identity = _identity(av=missing, soundfile=missing)
    [folder] = supplies.supplied_paths(identity, tmp_path)
    out = subprocess.run([sys.executable, "-S", "-c", "import av; print(av.__file__)"],
                         env={"PYTHONPATH": str(folder)}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-1000:]
    other_python = identity | {"python_version": "3.99"}
    assert supplies.supplied_paths(other_python, tmp_path) == []
    assert "Install one: pip install av" in supplies.shortfalls(other_python)[0]


def test_timm_is_lent_from_the_harness_to_an_engine_without_it(tmp_path):
    [folder] = supplies.supplied_paths(_identity(timm=None), tmp_path)
    assert (folder / "timm" / "__init__.py").is_file()
    assert list(folder.glob("timm-*.dist-info"))  # the engine reads its version too
    other_python = _identity(timm=None) | {"python_version": "3.99"}
    assert supplies.supplied_paths(other_python, tmp_path) == [folder]  # pure Python
    assert supplies.shortfalls(_identity(timm=None)) == []
    assert supplies.build_shortfalls(_identity(timm=None), ["gemma3n"]) == []


def test_timm_that_neither_has_stops_only_a_gemma3n_build(monkeypatch):
    monkeypatch.setattr(supplies, "_harness_has", lambda name: name != "timm")
    identity = _identity(timm=None)
    assert supplies.build_shortfalls(identity, ["gemma4", "gemma4-awq"]) == []
    [note] = supplies.build_shortfalls(identity, ["gemma4", "gemma3n"])
    assert note == ("engine interpreter /x/bin/python: building the tiny gemma3n needs timm, which "
                    "neither it nor the harness has. Install it into the engine's venv: "
                    "pip install timm==1.0.31 --no-deps")


def test_missing_torchaudio_and_timm_are_named_with_what_to_install(monkeypatch):
    monkeypatch.setattr(supplies, "_harness_has", lambda name: False)
    identity = _identity(torchaudio={"version": None, "path": None, "error": None}, timm=None)
    audio, timm = supplies.shortfalls(identity)
    assert "HTTP 500" in audio and supplies.FINDING_001 in audio
    assert "pip install --no-deps torchaudio==2.11.1" in audio
    assert "gemma3n" in timm and timm.endswith("pip install timm==1.0.31 --no-deps")
