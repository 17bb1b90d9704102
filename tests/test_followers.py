"""A follower on every path: a tolerated split is followed on the
reference's own stack, whatever computed it, and the comparison ends in a
verdict, pass where the continuation agrees and `mismatch` where it does
not, never a harness error.

Each split is forced: the answer under test takes, at one position, the
token the reference ranked second (its logprobs swapped, so both margins
are that near-tie), then continues as the reference's own stack continues
from there (asked of the same follower before the check), or as it does
not (a later token the stack never ranked). The stacks: an offline engine
retired before the check (the TP check's TP 1 reference; the follower
starts one of the same spec again through the pool, counted as a start),
a server (forced over HTTP), HF transformers, and HF on the dequantized
4-bit model. The profiles are crafted for the engines' own host kind and
allow exactly that split.
"""
from __future__ import annotations

import os

import pytest

from harness.checks.noise import PATHS, NoiseProfile, four_bit_path, save_profiles
from harness.verdicts import Cause, CheckFailure
from harness.engines.base import Sampling
from harness.engines.outcomes import Completion
from harness.engines.pool import EnginePool
from harness.models import models_for
from harness.results.record import CheckRecord
from harness.runner.check import Check
from harness.runner.run import EngineUse, Run, Sent
from harness.runner.runner import Runner
from harness.workloads.request import Request, Workload

pytestmark = pytest.mark.engine

SAMPLING = Sampling(max_tokens=12, ignore_eos=True, logprobs=5)
WORK = Workload("follow", (Request("story", [{"role": "user", "content": "Tell me about a harbour at dawn."}]),))
LABEL = "story"
SPLIT_AT = 3


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """A user cache of the module's own, for crafted profiles."""
    path = tmp_path_factory.mktemp("profiles") / "noise-profiles.toml"
    before = os.environ.get("MMHARNESS_NOISE_PROFILES")
    os.environ["MMHARNESS_NOISE_PROFILES"] = str(path)
    yield path
    if before is None:
        os.environ.pop("MMHARNESS_NOISE_PROFILES")
    else:
        os.environ["MMHARNESS_NOISE_PROFILES"] = before


@pytest.fixture(scope="module")
def pool(interpreter, tmp_path_factory):
    made = EnginePool(interpreter, tmp_path_factory.mktemp("logs"), watch_memory=False)
    yield made
    made.close_all()


def _entry(name: str):
    return next(e for e in models_for("cpu") if e.name == name)


@pytest.fixture(scope="module")
def gemma4(pool, interpreter):
    entry = _entry("tiny-gemma4")
    return Runner(entry, str(interpreter.build_tiny_model("gemma4")), "test_followers", pool, on_engine=lambda e: None)


def forced_split(reference: Run, *, agree: bool) -> Completion:
    """The reference's answer with its second-ranked token at SPLIT_AT, then
    the reference stack's own continuation (`agree`), or one it never
    ranked two positions later."""
    ref = reference[LABEL]
    ranked = sorted(ref.logprobs[SPLIT_AT].items(), key=lambda kv: -kv[1])
    (first, lp1), (second, lp2) = ranked[0], ranked[1]
    cont = reference.follower(LABEL)(ref.token_ids[:SPLIT_AT] + [second])
    tokens = ref.token_ids[:SPLIT_AT] + [second] + list(cont.token_ids)
    logprobs = ref.logprobs[:SPLIT_AT] + [{second: lp1, first: lp2}] + list(cont.logprobs)
    if not agree:
        at = SPLIT_AT + 2
        tokens[at] = next(t for t in range(100, 10_000) if t not in logprobs[at])
        logprobs[at] = {tokens[at]: -0.01}
    return Completion(text="", token_ids=tokens, logprobs=logprobs, prompt_token_count=ref.prompt_token_count,
                      finish_reason=ref.finish_reason)


@pytest.fixture(scope="module")
def offline(gemma4) -> Run:
    """The request on an offline engine: the TP check's TP 1 reference, and
    the engine whose identity and host kind judge every answer here."""
    return gemma4.batch(WORK, SAMPLING)


def under_test(answer: Completion, engine: EngineUse, entry=None) -> Run:
    """The answer as a run of `engine` (its identity and host kind judge
    it), as `entry`'s where given."""
    entry = entry or engine.entry
    use = EngineUse("offline", "under test", entry, engine=engine.engine, args=entry.engine_args,
                    host_kind=engine.host_kind)
    return Run.sent("batch", WORK, Sent(use, [answer]))


def allow_the_split(reference: Run, run: Run, path: str, profiles) -> None:
    """A profile of the run's host kind and model that tolerates exactly
    the forced near-tie, and no logprob move beyond 20 bf16 steps."""
    ranked = sorted(reference[LABEL].logprobs[SPLIT_AT].values(), reverse=True)
    entry = run.use.entry
    save_profiles([NoiseProfile("cpu", run.use.host_kind, entry.name, entry.engine_args["dtype"], path, 20.0,
                                round(ranked[0] - ranked[1] + 0.01, 4), 1, "crafted", "crafted")])


def verdict(run: Run, reference: Run, how) -> str:
    check = Check(CheckRecord(id="followed"), paths=tuple(PATHS))
    try:
        how(check, run, reference)
    except CheckFailure as e:
        assert e.cause == Cause.MISMATCH, e  # never a harness error, nor a failed follower
        return "mismatch"
    return "pass"


def test_tp_reference_retired_before_the_check_is_started_again_to_follow(offline, pool, profiles):
    """The TP check's reference engine (TP 1) is retired before the check
    reads it: the follower starts one of the same spec through the pool
    (a start of its own, its label says the follower) and the verdict is given."""
    reference = offline
    answers = {agree: forced_split(reference, agree=agree) for agree in (True, False)}
    pool.release_since(0)
    assert not reference.use.engine.ready
    run = under_test(answers[True], reference.use)
    allow_the_split(reference, run, "tp", profiles)
    across = lambda check, run, ref: check.across_tp(run, ref, 2)  # noqa: E731
    assert verdict(run, reference, across) == "pass"
    assert verdict(under_test(answers[False], reference.use), reference, across) == "mismatch"
    follower = [h for h in pool.handles.values() if any("(follower)" in s for s in h.served)]
    assert len(follower) == 1 and follower[0].engine is not reference.use.engine


def test_a_server_reference_is_followed_through_the_server_itself(gemma4, profiles):
    reference = gemma4.concurrent(WORK, SAMPLING)
    answers = {agree: forced_split(reference, agree=agree) for agree in (True, False)}
    run = under_test(answers[True], reference.use)
    allow_the_split(reference, run, "same-stack", profiles)
    agrees = lambda check, run, ref: check.agrees(run, ref, path="same-stack")  # noqa: E731
    assert verdict(run, reference, agrees) == "pass"
    assert verdict(under_test(answers[False], reference.use), reference, agrees) == "mismatch"


def test_an_hf_reference_is_followed_on_hf(gemma4, offline, profiles):
    reference = gemma4.hf_reference(WORK, SAMPLING)
    answers = {agree: forced_split(reference, agree=agree) for agree in (True, False)}
    run = under_test(answers[True], offline.use)
    allow_the_split(reference, run, "hf-vs-vllm", profiles)
    agrees = lambda check, run, ref: check.agrees(run, ref)  # noqa: E731
    assert verdict(run, reference, agrees) == "pass"
    assert verdict(under_test(answers[False], offline.use), reference, agrees) == "mismatch"


def test_the_dequantized_reference_is_followed_on_the_dequantized_model(pool, interpreter, offline, profiles):
    entry = _entry("tiny-gemma4-awq")
    runner = Runner(entry, str(interpreter.build_tiny_model("gemma4-awq")), "test_followers", pool,
                    on_engine=lambda e: None)
    reference = runner.dequantized_reference(WORK, SAMPLING)
    answers = {agree: forced_split(reference, agree=agree) for agree in (True, False)}
    run = under_test(answers[True], offline.use, entry)
    path = four_bit_path(interpreter.host.get("isa"))
    allow_the_split(reference, run, path, profiles)
    agrees = lambda check, run, ref: check.agrees(run, ref, path="w4a16")  # noqa: E731
    assert verdict(run, reference, agrees) == "pass"
    assert verdict(under_test(answers[False], offline.use, entry), reference, agrees) == "mismatch"
