"""Encoder memory under low free memory.

The regression: a 26B AWQ Gemma4 MoE on a 22 GiB L4 left about 3 GiB free
after load; the vision encoder sized its batch chunks from total memory, not
free, and a transient F.one_hot buffer of 2.88 GiB hit OOM. On the GPU tier
the card is emulated (`--card l4-22g`) and the engine's peak must stay
within it; on the CPU tier the tiny Gemma4 runs the same workload, memory is
recorded by the host sampler, and emulation is skipped with its reason.

Workload → run → checks.
"""
from __future__ import annotations

import pytest

from harness.budget_probe import check_encoder_chunk, load_gemma4_encoder_chunk
from harness.card.capacity import check_within_capacity, engine_peak
from harness.card.profiles import after_load_record
from harness.checks import check_alive, check_completed, check_invariant
from harness.engines.base import Sampling
from harness.samplers import used_key
from harness.workloads.vision import SHAPES, encoder_batch

pytestmark = [pytest.mark.modality("video"), pytest.mark.engine]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)


class EncoderRun:
    def __init__(self, session, requests, card, no_card_reason):
        self.session, self.requests = session, requests
        self.card, self.no_card_reason = card, no_card_reason
        self.batch, self.solos = [], {}

    @property
    def labels(self):
        return [r.label for r in self.requests]

    def attach(self, record):
        self.session.attach(record)
        record.evidence["workload"] = {r.label: {"images": r.images, "frames": r.frames}
                                       for r in self.requests}
        if self.card:
            record.params["card"] = self.card.profile.id
            record.memory_budget = {used_key(self.card.device): self.card.profile.capacity_bytes}


@pytest.fixture(scope="module")
def encoder_run(request, model_entry, open_engine):
    try:
        card, no_card = request.getfixturevalue("card"), None
    except pytest.skip.Exception as e:
        card, no_card = None, str(e)
    overrides = card.engine_overrides() if card else {}
    session = open_engine("offline", model_entry, f"{request.module.__name__}[{model_entry.name}]",
                          **overrides)
    gpu = request.config.getoption("tier") == "gpu"
    requests = encoder_batch(model_entry.engine_args.get("limit_mm_per_prompt", {}).get("image", 1),
                             video_frames=64 if gpu else 16, videos=2)
    run = EncoderRun(session, requests, card, no_card)
    if session.engine is not None:
        run.batch = session.engine.chat([r.conversation for r in requests], SAMPLING)
        if all(r.ok for r in run.batch):
            run.solos = {r.label: session.engine.chat([r.conversation], SAMPLING)[0]
                         for r in requests if r.label.startswith("single-")}
    return run


def test_all_answered_without_oom(encoder_run, check_record):
    """Every prompt of the big mixed batch answered: no OOM, no crash."""
    encoder_run.attach(check_record)
    encoder_run.session.require()
    check_completed(encoder_run.batch, encoder_run.labels)


def test_alive_after_encoder_batch(encoder_run, check_record):
    encoder_run.attach(check_record)
    check_alive(encoder_run.session.require(), after="the encoder batch")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_image_invariance_in_big_batch(encoder_run, shape, check_record):
    """An image's output in the big batch equals its output alone."""
    encoder_run.attach(check_record)
    encoder_run.session.require()
    check_completed(encoder_run.batch, encoder_run.labels)
    label = f"single-{shape}"
    got = encoder_run.batch[encoder_run.labels.index(label)]
    check_record.outputs = {"batch": got.to_dict(), "solo": encoder_run.solos[label].to_dict()}
    check_record.evidence.update(check_invariant(got, encoder_run.solos[label], label))


def test_peak_within_emulated_card(encoder_run, check_record):
    """The engine's peak (NVML per process, or device arithmetic where pids
    do not match) stays within the emulated capacity, even when the big GPU
    did not OOM."""
    encoder_run.attach(check_record)
    if encoder_run.card is None:
        pytest.skip(encoder_run.no_card_reason)
    encoder_run.session.require()
    card = encoder_run.card
    window = encoder_run.session.watch.window(encoder_run.session.t0)
    first_used = window.timeline[0][1][used_key(card.device)]
    check_record.evidence["after_load"] = after_load_record(card.profile,
                                                            card.ready.total_bytes - first_used)
    peak = engine_peak(window, card.device, baseline_used=card.baseline_used,
                       ballast_bytes=card.ballast_bytes)
    check_record.evidence["engine_peak"] = {"bytes": peak.bytes, "method": peak.method, "note": peak.note}
    check_within_capacity(card.profile, peak, scenarios=[encoder_run.session.scenario])


def test_encoder_chunk_budget_contract(engine_interpreter, check_record):
    """The engine's own chunk-size function keeps its transient within half of
    free memory for every card profile (no GPU needed)."""
    if str(engine_interpreter.python) != __import__("sys").executable:
        pytest.skip("the probe imports the engine in the harness's interpreter; "
                    f"the engine runs under {engine_interpreter.python}")
    fn, source = load_gemma4_encoder_chunk()
    if fn is None:
        pytest.skip(source)
    check_record.evidence["source"] = source
    check_encoder_chunk(fn, source=source)
