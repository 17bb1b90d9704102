"""cli_flags: vllm.LLM keyword arguments as `vllm serve` flags."""
from harness.engines.server import cli_flags


def test_underscores_become_dashes_and_values_become_text():
    assert cli_flags({"max_model_len": 2048, "dtype": "bfloat16", "gpu_memory_utilization": 0.5}) == [
        "--max-model-len", "2048", "--dtype", "bfloat16", "--gpu-memory-utilization", "0.5"]


def test_true_is_a_bare_flag_false_a_no_flag_and_none_left_out():
    """False is said, not left out: leaving out enable_prefix_caching=False
    served the cache matrix's "prefix caching off" cells with vLLM's default,
    on (their premise caught it)."""
    assert cli_flags({"enforce_eager": True, "enable_prefix_caching": False, "seed": None}) == [
        "--enforce-eager", "--no-enable-prefix-caching"]


def test_zero_is_a_value_not_a_false():
    assert cli_flags({"seed": 0}) == ["--seed", "0"]


def test_dicts_and_lists_go_as_json():
    assert cli_flags({"limit_mm_per_prompt": {"audio": 4, "image": 0},
                      "allowed_local_media_path": ["/a", "/b"]}) == [
        "--limit-mm-per-prompt", '{"audio": 4, "image": 0}',
        "--allowed-local-media-path", '["/a", "/b"]']


def test_lora_modules_go_as_name_equals_path_items():
    assert cli_flags({"enable_lora": True, "lora_modules": {"a": "/x/a", "b": "/x/b"}}) == [
        "--enable-lora", "--lora-modules", "a=/x/a", "b=/x/b"]
    assert cli_flags({"lora_modules": ["a=/x/a", {"name": "b", "path": "/x/b"}]}) == [
        "--lora-modules", "a=/x/a", "b=/x/b"]
    assert cli_flags({"lora_modules": {}}) == []


def test_a_lora_path_with_a_comma_goes_as_json():
    # vLLM reads an item with a comma as JSON.
    assert cli_flags({"lora_modules": {"a": "/x/a,b"}}) == [
        "--lora-modules", '{"name": "a", "path": "/x/a,b"}']
