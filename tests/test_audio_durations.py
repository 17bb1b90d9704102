"""The ragged-audio family's clip durations come from each model's own
limits (harness.workloads.audio.ragged_durations), not from a fixed list:
a short clip, one just short of the longest the model takes whole, and the
window's edge straddled where clips are cut into windows."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.workloads.audio import SAMPLE_RATE, AudioLimits, audio_limits_of, ragged_durations


def _seconds(durations):
    """To 0.1 s: each duration is one sample past it."""
    assert all(round((d - round(d, 1)) * SAMPLE_RATE) == 1 for d in durations), durations
    return [round(d, 1) for d in durations]


def _processor(**fe) -> SimpleNamespace:
    """A processor whose feature extractor states these limits (Whisper's and Gemma4's attribute names)."""
    extractor = SimpleNamespace(sampling_rate=16000, hop_length=160, **fe)
    extractor.__call__ = lambda raw, max_length=None: None
    return SimpleNamespace(feature_extractor=extractor)


def test_a_whisper_window_is_a_window_not_a_limit():
    """Qwen2-Audio cuts clips at its 30 s window, vLLM's Qwen2.5-Omni takes
    them whole: the window is where clips straddle, the longest comes from
    elsewhere (here: the engine's context)."""
    limits = audio_limits_of(_processor(chunk_length=30), 71.6)
    assert limits == AudioLimits(longest_s=71.6, window_s=30.0, frame_s=0.01)
    assert _seconds(ragged_durations(limits, 4)) == [0.5, 29.5, 30.5, 71.1]
    with pytest.raises(ValueError, match="no audio length limit"):
        audio_limits_of(_processor(chunk_length=30))


def test_a_window_as_long_as_the_longest_is_not_straddled():
    assert _seconds(ragged_durations(AudioLimits(30.0, 30.0, 0.01), 4)) == [0.5, 10.2, 19.8, 29.5]


def test_the_durations_move_with_the_models_limits():
    assert _seconds(ragged_durations(AudioLimits(15.0, 15.0, 0.01), 4)) == [0.5, 5.2, 9.8, 14.5]
    # A 20 ms hop: the short clip is 50 of its frames.
    assert _seconds(ragged_durations(AudioLimits(30.0, None, 0.02), 3)) == [1.0, 15.0, 29.0]


def test_clips_cut_into_windows_straddle_the_windows_edge():
    """A model that takes 60 s whole in 30 s windows: two clips sit just
    under and just over 30 s, so one clip fills one window and another spills
    into a second."""
    assert _seconds(ragged_durations(AudioLimits(60.0, 30.0, 0.01), 4)) == [0.5, 29.5, 30.5, 59.5]


def test_more_clips_than_the_limits_leave_room_for_are_refused():
    with pytest.raises(ValueError, match="do not fit"):
        ragged_durations(AudioLimits(1.2, None, 0.01), 8)


def test_a_token_budget_is_the_longest_clip_where_no_window_is():
    """Gemma4's processor: 750 audio tokens of 40 ms, clips kept at their own length."""
    gemma = SimpleNamespace(feature_extractor=SimpleNamespace(sampling_rate=16000, hop_length=160),
                            audio_seq_length=750, audio_ms_per_token=40)
    gemma.feature_extractor.__call__ = lambda raw: None
    assert audio_limits_of(gemma) == AudioLimits(30.0, None, 0.01)


def test_the_context_binds_a_count_that_grows_with_the_clip(monkeypatch):
    from harness.workloads import audio
    monkeypatch.setattr(audio, "audio_tokens", lambda proc, samples: -(-samples // 1600))  # 10 a second
    assert audio.context_bound_seconds(None, 1792) == 179.2


def test_a_count_cut_at_a_window_is_longest_at_the_window(monkeypatch):
    from harness.workloads import audio
    monkeypatch.setattr(audio, "audio_tokens", lambda proc, samples: min(750, -(-samples // 640)))
    assert audio.context_bound_seconds(None, 1792) == 30.0


def test_clips_padded_to_windows_are_bound_at_the_last_window_that_fits(monkeypatch):
    """Voxtral: every clip padded to a multiple of 30 s, 375 tokens each, so
    a 10 s clip's rate (37.5 a second) understates the longest: 4 windows fit 1792."""
    from harness.workloads import audio
    monkeypatch.setattr(audio, "audio_tokens", lambda proc, samples: 375 * max(1, -(-samples // 480000)))
    assert audio.context_bound_seconds(None, 1792) == 120.0


def test_a_count_that_does_not_grow_with_the_clip_is_never_bound(monkeypatch):
    """Gemma3n: 188 placeholders for any clip."""
    from harness.workloads import audio
    monkeypatch.setattr(audio, "audio_tokens", lambda proc, samples: 188)
    assert audio.context_bound_seconds(None, 1792) == float("inf")
