"""Ragged images: images of different sizes and aspect ratios in one
forward pass.

The regressions: batched image requests answered wrong where alone they
were right (vLLM #10891, LLaVA in V1; #45673, the Gemma3 family: only the
first request of a batch right), and models of dynamic resolution
(Qwen2-VL, Qwen2.5-VL, Qwen3-VL) whose encoder meets patch grids of
different shapes in one call. Run for every image model of the tier.

The same batches at TP 2 (and 4), where an entry's heads split
(`tp_sizes` in models.toml): vLLM #36117, Qwen3-VL's accuracy gone at TP 4.

Workload → run → checks. Each check is its own test and its own record.
"""
from __future__ import annotations

import pytest

from harness.engines.base import Sampling
from harness.runner import Paired
from harness.runner.declared import Engine
from harness.workloads import images

pytestmark = [pytest.mark.modality("image"), pytest.mark.engine]

# Fixed length with EOS ignored, so outputs are comparable position by position.
SAMPLING = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)

# The TP sizes of the TP-invariance check; an entry runs those its `tp_sizes` name.
TP_SIZES = (2, 4)

# The batch engine, and the references' (started beside it); one engine per TP size.
ENGINES = (
    Engine("offline", used_by=("batch", "test_tp_invariance")),
    Engine("reference", used_by=("batch",)),
    Engine("offline", used_by=("test_tp_invariance",), args=lambda runner, params: {"tensor_parallel_size": params["tp"]}),
)


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module")
def limits(runner) -> images.ImageLimits:
    """The model's own limits on an image's pixels, from its processor."""
    return images.image_limits(images.processor(runner.model))


@pytest.fixture(scope="module", params=["ragged", "equal"])
def batch(request, runner, limits):
    """One batch in one generate call (offline engine), then each request
    alone. Ragged: one image per request at sizes from the model's own
    limits (the smallest it keeps, a square at its largest, wide, tall),
    and one request of two images of different sizes where the model takes
    several; equal: every image at one size."""
    if request.param == "ragged":
        work = ragged_workload(runner, limits)
    else:
        work = images.image_workload("equal", [images.equal_size(limits)] * len(images.ragged_sizes(limits)))
    return Paired(runner.batch(work, SAMPLING), runner.each_alone(work, SAMPLING))


def ragged_workload(runner, limits):
    """One image per request at the model's ragged sizes, and one request
    of two where it takes several; skipped where its processor makes one
    patch grid of every size (no batch of it is ragged)."""
    sizes = images.ragged_sizes(limits)
    if len(set(images.grids(images.processor(runner.model), sizes))) == 1:
        pytest.skip("the model's processor makes one patch grid of every size: no batch of it is ragged")
    return images.image_workload("ragged", sizes, several=min(2, runner.mm_limit("image")))


# --- checks: one pass, offline ----------------------------------------------

def test_one_pass(batch, check):
    """The premise, observed inside the engine: all prompts were scheduled
    in one step, and one image encoder call held images of different patch
    grids (ragged) or all at one grid (equal). Without it, the invariance
    below would prove nothing."""
    check.one_pass(batch.run, modality="image", ragged=batch.run.workload.name == "ragged")


def test_placeholders_as_the_processor(batch, runner, check):
    """Each request's image placeholder tokens in the engine's prompt are as
    many as the model's own processor puts there for its images' sizes: a
    count off by one drops part of an image without a word."""
    check.image_placeholders_as_processor(batch.run, images.processor(runner.model))


@pytest.mark.numeric_paths("same-stack")
@pytest.mark.parametrize("image", range(images.RAGGED_IMAGES + 1), ids=lambda i: f"request{i}")
def test_batch_invariance(batch, image, check):
    """A request's greedy output in the batch equals its output alone on the
    reference engine (no cached tokens): another image's patches do not
    leak into its answer. Prompt tokens, tokens, length, finish reason and
    logprobs, to the same-stack noise profile. The comparator must reject
    the other requests' answers (power); an answer that equals another
    request's is named as that request's."""
    if image >= len(batch.run.labels):
        pytest.skip(f"the {batch.run.workload.name} batch has {len(batch.run.labels)} requests "
                    "(the model takes one image per prompt)")
    check.completed(batch.run)
    check.invariant(batch.run, batch.reference, batch.run.labels[image])


def test_alive_after_batch(batch, check):
    """The engine still answers after the batch; a crash is named by its
    exception."""
    check.alive(batch.run, after=f"{batch.run.workload.name} batch {batch.run.labels}")


# --- checks: tensor parallel (last: engines of their own) ---------------------

@pytest.mark.numeric_paths("tp")
@pytest.mark.parametrize("tp", TP_SIZES, ids=lambda n: f"tp{n}")
def test_tp_invariance(tp, runner, limits, check):
    """The ragged batch at TP `tp` answers as at TP 1, request by request,
    within the TP noise profile, a tolerated split followed on the TP 1
    stack; the comparator rejects the other requests' TP 1 answers. Every
    rank is seen stepping, in one step, as at TP 1 (observed)."""
    work = ragged_workload(runner, limits)
    reference = runner.batch(work, SAMPLING)
    run = runner.batch(work, SAMPLING, engine_args={"tensor_parallel_size": tp})
    check.every_rank_stepped(run, tp)
    check.one_pass(run, modality="image", ragged=True)
    check.across_tp(run, reference, tp)
