"""Engine arguments per scenario family (models.toml [per_family.<family>] and
an entry's [<tier>.per_family.<family>]): the runner merges the entry's, the
family's and the call's own; on the CPU tier the same arguments reach the
engine as before they moved into the matrix."""
import pytest

from harness.models import ModelMatrixError, load_matrix, models_for, scenario_families
from harness.runner.runner import Runner
from tests.test_models_matrix import GOOD

# The CPU entries' engine_args and what test_vision_lora's calls added to
# them (harness/workloads/lora.py ENGINE_ARGS), as they were at beb023d,
# before the family's settings moved into the matrix.
COMMON = {"dtype": "bfloat16", "enforce_eager": True, "max_model_len": 2048, "max_num_seqs": 16,
          "max_num_batched_tokens": 8192}
BEFORE = {
    "tiny-gemma4": {**COMMON, "limit_mm_per_prompt": {"image": 4, "audio": 1, "video": 1}},
    "tiny-gemma4-conformer": {**COMMON, "limit_mm_per_prompt": {"image": 4, "audio": 1, "video": 1}},
    "tiny-gemma4-awq": {**COMMON, "limit_mm_per_prompt": {"image": 4, "video": 1}},
    "tiny-gemma4-heads4": {**COMMON, "limit_mm_per_prompt": {"image": 4}},
    "tiny-gemma3n": {**COMMON, "limit_mm_per_prompt": {"image": 4, "audio": 1}},
}
# The audio zoo's entries (added since), audio only: the arguments every entry has.
ZOO = ("tiny-qwen2-audio", "tiny-qwen2-5-omni", "tiny-audioflamingo3", "tiny-granite-speech", "tiny-qwen3-asr",
       "tiny-qwen3-omni", "tiny-glmasr", "tiny-gemma4-unified", "tiny-granite-speech-plus")
BEFORE |= {name: {**COMMON, "limit_mm_per_prompt": {"audio": 1}} for name in ZOO}
# The Omni thinkers, audio and images (two per prompt, for the ragged-images family).
BEFORE |= {name: {**COMMON, "limit_mm_per_prompt": {"audio": 1, "image": 2}}
           for name in ("tiny-qwen2-5-omni", "tiny-qwen3-omni")}
# Voxtral, in Mistral's format: vLLM reads it only when told.
BEFORE["tiny-voxtral"] = {**COMMON, "limit_mm_per_prompt": {"audio": 1}, "tokenizer_mode": "mistral",
                          "config_format": "mistral", "load_format": "mistral"}
# The vision zoo's entries: two images per prompt (the ragged family's request of several).
BEFORE |= {name: {**COMMON, "limit_mm_per_prompt": {"image": 2}} for name in ("tiny-qwen2-5-vl", "tiny-qwen3-vl",
                                                                                      "tiny-qwen3-vl-moe",
                                                                                      "tiny-llava-onevision",
                                                                                      "tiny-idefics3",
                                                                                      "tiny-smolvlm",
                                                                                      "tiny-gemma3")}
LORA_BEFORE = {"enable_lora": True, "max_lora_rank": 8, "max_loras": 4, "enable_tower_connector_lora": True}
ADDED_BEFORE = {"test_vision_lora": LORA_BEFORE}
# Added since: the fuzzer's engines on tiny-gemma4 serve the crafted lm adapter.
# The soak family (added since) keeps the processor cache small on every entry;
# the aborts-and-preemption family cuts tiny-gemma4's KV cache short; the
# soak on tiny-gemma4 switches between the base model and the lm adapter.
LM_LORA = {"enable_lora": True, "max_lora_rank": 8, "max_loras": 2}
ADDED_SINCE = {("tiny-gemma4", "test_fuzz_multimodal"): LM_LORA,
               ("tiny-gemma4", "test_aborts_preemption"): {"num_gpu_blocks_override": 8, "max_model_len": 512},
               **{(e, "test_soak"): {"mm_processor_cache_gb": 0.005} for e in BEFORE},
               ("tiny-gemma4", "test_soak"): {"mm_processor_cache_gb": 0.005, **LM_LORA}}


def _runner(entry, family) -> Runner:
    return Runner(entry, "unused-model-path", family, pool=None,
                  on_engine=lambda engine: None)


def test_the_families_are_the_scenario_modules():
    assert scenario_families() == ["test_aborts_preemption", "test_cache_consistency", "test_encoder_memory", "test_fuzz_multimodal",
                                   "test_quantized_load", "test_ragged_audio", "test_ragged_images", "test_soak",
                                   "test_vision_lora"]


@pytest.mark.parametrize("family", scenario_families())
@pytest.mark.parametrize("entry", models_for("cpu"), ids=lambda e: e.name)
def test_cpu_engines_get_the_arguments_they_got_before(entry, family):
    """Every family x CPU entry: a call with no arguments of its own, and
    the LoRA family's reference call (max_loras 32), reach the engine with
    what the entry and the family's hard-coded settings gave them before
    (and what was added since)."""
    runner = _runner(entry, family)
    before = {**BEFORE[entry.name], **ADDED_BEFORE.get(family, {}), **ADDED_SINCE.get((entry.name, family), {})}
    assert runner.args_for(None) == before
    assert runner.args_for({"max_loras": 32}) == {**before, "max_loras": 32}
    assert runner.mm_limit("image") == BEFORE[entry.name]["limit_mm_per_prompt"].get("image", 1)


def test_call_over_entry_family_over_family_default_over_entry(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(GOOD + """max_num_seqs = 16
[cpu.per_family.test_vision_lora]
engine_args = { max_lora_rank = 16 }
[cpu.per_family.test_ragged_audio.engine_args]
max_num_seqs = 64

[per_family.test_vision_lora]
engine_args = { enable_lora = true, max_lora_rank = 8, max_loras = 4 }
""")
    [entry] = load_matrix(path)["cpu"]
    lora, audio, other = (_runner(entry, f) for f in ("test_vision_lora", "test_ragged_audio",
                                                      "test_quantized_load"))
    assert lora.family_args == {"enable_lora": True, "max_lora_rank": 16, "max_loras": 4}
    assert lora.args_for({"max_loras": 32}) == {"dtype": "bfloat16", "max_num_seqs": 16, "enable_lora": True,
                                                "max_lora_rank": 16, "max_loras": 32}
    assert audio.args_for(None) == {"dtype": "bfloat16", "max_num_seqs": 64}
    assert other.args_for({"dtype": "float32"}) == {"dtype": "float32", "max_num_seqs": 16}


@pytest.mark.parametrize("extra, fragment", [
    ('[cpu.per_family.test_vision_lroa]\nengine_args = { max_loras = 2 }',
     "[[cpu]] entry 1 (a): unknown scenario family 'test_vision_lroa'"),
    ('[per_family.vision_lora]\nengine_args = { max_loras = 2 }',
     "[per_family]: unknown scenario family 'vision_lora'"),
    ('[cpu.per_family.test_vision_lora]\nmax_loras = 2', "per_family.test_vision_lora must be a table with only"),
    ('[cpu.per_family.test_vision_lora]\nengine_args = 2', "per_family.test_vision_lora must be a table with only"),
    ('[cpu.per_family]\ntest_vision_lora = 1', "per_family.test_vision_lora must be a table with only"),
])
def test_bad_family_tables_are_one_clear_error(tmp_path, extra, fragment):
    path = tmp_path / "m.toml"
    path.write_text(GOOD + extra + "\n")
    with pytest.raises(ModelMatrixError) as e:
        load_matrix(path)
    assert fragment in str(e.value)
    assert "test_vision_lora" in str(e.value) or "known" in str(e.value)


def test_max_lora_rank_in_the_lora_table_says_where_it_went(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(GOOD.replace('name = "a"', 'name = "a"\nlora = { max_lora_rank = 16 }'))
    with pytest.raises(ModelMatrixError, match=r"\[cpu.per_family.test_vision_lora\] engine_args"):
        load_matrix(path)


class _Interpreter:
    def __init__(self, version):
        self.identity = {"version": version}


class _Pool:
    def __init__(self, version):
        self.interpreter = _Interpreter(version)


def _tiny_gemma4():
    return next(e for e in models_for("cpu") if e.name == "tiny-gemma4")


@pytest.mark.parametrize("family", ["test_soak", "test_fuzz_multimodal"])
def test_a_load_with_lora_keeps_it_where_the_engine_version_serves_it(family):
    runner = Runner(_tiny_gemma4(), "unused-model-path", family, pool=_Pool("0.32.0"), on_engine=lambda e: None)
    assert runner.lora_in_load() and runner.lora_left_out is None
    assert runner.args_for(None)["enable_lora"] is True


@pytest.mark.parametrize("family", ["test_soak", "test_fuzz_multimodal"])
def test_an_older_engine_runs_the_load_without_lora_saying_why(family):
    """lora.supported = ">=0.32" for tiny-gemma4: a bisect or an A/B with
    0.31.0 would refuse to start the family's engines with LoRA on."""
    runner = Runner(_tiny_gemma4(), "unused-model-path", family, pool=_Pool("0.31.0"), on_engine=lambda e: None)
    before = runner.args_for(None)
    assert not runner.lora_in_load()
    assert runner.args_for(None) == {k: v for k, v in before.items()  # the rest of the family's stays
                                     if k not in ("enable_lora", "max_lora_rank", "max_loras")}
    assert "engine 0.31.0 is outside" in runner.lora_left_out and ">=0.32" in runner.lora_left_out


def test_a_family_without_lora_or_an_entry_naming_no_versions_is_left_as_it_is(tmp_path):
    runner = Runner(_tiny_gemma4(), "unused-model-path", "test_aborts_preemption", pool=_Pool("0.31.0"),
                    on_engine=lambda e: None)
    assert not runner.lora_in_load() and runner.lora_left_out is None
    path = tmp_path / "m.toml"
    path.write_text(GOOD + """[cpu.per_family.test_soak]
engine_args = { enable_lora = true }
""")
    [entry] = load_matrix(path)["cpu"]
    runner = Runner(entry, "unused-model-path", "test_soak", pool=_Pool("0.20.0"), on_engine=lambda e: None)
    assert runner.lora_in_load() and runner.args_for(None)["enable_lora"] is True


def test_a_soak_on_an_older_engine_switches_no_adapters_and_its_engines_start_without_lora():
    from harness.soak.load import soak_adapters
    runner = Runner(_tiny_gemma4(), "unused-model-path", "test_soak", pool=_Pool("0.31.0"), on_engine=lambda e: None)
    assert soak_adapters(runner) == ()
    assert "enable_lora" not in runner.args_for(None) and runner.lora_left_out
