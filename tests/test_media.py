"""fixtures.media: seeded audio, images and video, and their refusals of bad sizes."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import soundfile
from PIL import Image

from fixtures import media

# ---------------------------------------------------------------- audio


@pytest.mark.parametrize("kind", media.AUDIO_KINDS)
@pytest.mark.parametrize("sample_rate", [8000, 16000, 44100])
@pytest.mark.parametrize("channels", [1, 2])
def test_audio_clip_shape_dtype_and_range(kind, sample_rate, channels):
    clip = media.audio_clip(0.25, sample_rate=sample_rate, channels=channels, kind=kind, seed=3)
    expected = (int(round(0.25 * sample_rate)),) if channels == 1 else (int(round(0.25 * sample_rate)), channels)
    assert clip.shape == expected
    assert clip.dtype == np.float32
    assert np.abs(clip).max() <= 1.0
    assert clip.std() > 0.05, "a clip must carry signal, not silence"


@pytest.mark.parametrize("kind", media.AUDIO_KINDS)
def test_audio_clip_is_deterministic_per_seed_and_differs_across_seeds(kind):
    same_a = media.audio_clip(0.5, kind=kind, seed=7)
    same_b = media.audio_clip(0.5, kind=kind, seed=7)
    other = media.audio_clip(0.5, kind=kind, seed=8)
    assert np.array_equal(same_a, same_b)
    assert not np.allclose(same_a, other)


def test_audio_kinds_differ_from_one_another():
    clips = [media.audio_clip(0.5, kind=kind, seed=0) for kind in media.AUDIO_KINDS]
    for i in range(len(clips)):
        for j in range(i + 1, len(clips)):
            assert not np.allclose(clips[i], clips[j]), (media.AUDIO_KINDS[i], media.AUDIO_KINDS[j])


def test_stereo_channels_differ():
    clip = media.audio_clip(0.5, channels=2, kind="tone", seed=1)
    assert not np.allclose(clip[:, 0], clip[:, 1])


def test_sweep_rises_in_frequency():
    # Zero crossings per half: a rising chirp crosses zero more often later.
    clip = media.audio_clip(1.0, kind="sweep", seed=0)
    first, second = np.array_split(clip, 2)
    crossings = [np.count_nonzero(np.diff(np.signbit(half))) for half in (first, second)]
    assert crossings[1] > 1.5 * crossings[0], crossings


@pytest.mark.parametrize("fmt", media.AUDIO_FORMATS)
@pytest.mark.parametrize("channels", [1, 2])
def test_encoded_audio_decodes_back_to_the_clip(fmt, channels):
    clip = media.audio_clip(0.3, sample_rate=22050, channels=channels, kind="noise", seed=2)
    decoded, rate = soundfile.read(io.BytesIO(media.encode_audio(clip, 22050, fmt)), dtype="float32")
    assert rate == 22050
    assert decoded.shape == clip.shape
    assert np.abs(decoded - clip).max() < 1e-4  # 16-bit PCM quantisation


def test_audio_data_url_carries_the_wav_bytes():
    clip = media.audio_clip(0.1, seed=1)
    url = media.audio_data_url(clip, 16000)
    prefix = "data:audio/wav;base64,"
    assert url.startswith(prefix)
    assert base64.b64decode(url[len(prefix):]) == media.encode_audio(clip, 16000, "wav")


@pytest.mark.parametrize("duration", [0, -1.0, 0.0, float("nan")])
def test_non_positive_duration_is_refused(duration):
    with pytest.raises(ValueError, match="duration_s"):
        media.audio_clip(duration)


def test_duration_shorter_than_one_sample_is_refused():
    with pytest.raises(ValueError, match="shorter than one sample"):
        media.audio_clip(1e-6, sample_rate=8000)


@pytest.mark.parametrize("rate", [0, 11025, 96000, -16000])
def test_unsupported_sample_rate_is_refused(rate):
    with pytest.raises(ValueError, match="unsupported sample_rate"):
        media.audio_clip(1.0, sample_rate=rate)
    with pytest.raises(ValueError, match="unsupported sample_rate"):
        media.encode_audio(np.zeros(10, dtype=np.float32), rate)


@pytest.mark.parametrize("bad", [{"channels": 0}, {"kind": "speech"}])
def test_bad_channels_or_kind_is_refused(bad):
    with pytest.raises(ValueError):
        media.audio_clip(1.0, **bad)


def test_unknown_audio_format_is_refused():
    with pytest.raises(ValueError, match="unknown audio format"):
        media.encode_audio(media.audio_clip(0.1), 16000, "mp3")


# ---------------------------------------------------------------- images


def test_image_size_mode_and_content():
    picture = media.image(120, 80, seed=1)
    assert picture.size == (120, 80) and picture.mode == "RGB"
    pixels = np.asarray(picture)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50, "an image must not be flat colour"


def test_images_are_deterministic_per_seed_and_differ_across_seeds():
    assert np.array_equal(np.asarray(media.image(64, 64, seed=5)), np.asarray(media.image(64, 64, seed=5)))
    differing = np.mean(np.asarray(media.image(64, 64, seed=5)) != np.asarray(media.image(64, 64, seed=6)))
    assert differing > 0.5


@pytest.mark.parametrize("fmt", media.IMAGE_FORMATS)
def test_encoded_image_decodes(fmt):
    picture = media.image(48, 32, seed=2)
    decoded = Image.open(io.BytesIO(media.encode_image(picture, fmt)))
    assert decoded.format == fmt.upper() and decoded.size == (48, 32)
    if fmt == "png":
        assert np.array_equal(np.asarray(decoded), np.asarray(picture))


def test_image_data_url():
    picture = media.image(16, 16, seed=0)
    url = media.image_data_url(picture, "jpeg")
    assert url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == media.encode_image(picture, "jpeg")


@pytest.mark.parametrize("width, height", [(0, 10), (10, 0), (-5, 10), (10.5, 10), (True, 10)])
def test_non_positive_or_non_integer_image_size_is_refused(width, height):
    with pytest.raises(ValueError, match="width|height"):
        media.image(width, height)


def test_unknown_image_format_is_refused():
    with pytest.raises(ValueError, match="unknown image format"):
        media.encode_image(media.image(8, 8), "gif")


# ---------------------------------------------------------------- video


def test_video_frames_shape_dtype_and_motion():
    frames = media.video_frames(6, 64, 48, seed=1)
    assert frames.shape == (6, 48, 64, 3) and frames.dtype == np.uint8
    for index in range(5):
        assert not np.array_equal(frames[index], frames[index + 1]), f"frame {index + 1} repeats frame {index}"


def test_video_is_deterministic_per_seed_and_differs_across_seeds():
    assert np.array_equal(media.video_frames(3, 32, 32, seed=4), media.video_frames(3, 32, 32, seed=4))
    assert not np.array_equal(media.video_frames(3, 32, 32, seed=4), media.video_frames(3, 32, 32, seed=5))


@pytest.mark.parametrize("num_frames, width, height", [(0, 8, 8), (-1, 8, 8), (2, 0, 8), (2, 8, -8)])
def test_non_positive_video_sizes_are_refused(num_frames, width, height):
    with pytest.raises(ValueError, match="num_frames|width|height"):
        media.video_frames(num_frames, width, height)


def test_a_clips_amplitude_is_its_peak_and_out_of_range_is_refused():
    loud, quiet = (media.audio_clip(1.0, kind="tone", seed=3, amplitude=a) for a in (0.8, 0.2))
    assert abs(float(np.abs(loud).max()) - 0.8) < 1e-3 and abs(float(np.abs(quiet).max()) - 0.2) < 1e-3
    for bad in (0, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match="amplitude"):
            media.audio_clip(1.0, amplitude=bad)


def test_clips_of_one_duration_differ_in_level_as_well_as_seed():
    """A noisy host's tolerance tells apart only answers to clips that differ
    enough: clips of one length have peaks of their own, from the levels."""
    from harness.workloads import audio

    work = audio.clip_workload("equal", [3.0] * 5)
    peaks = [round(float(np.abs(r.source.samples).max()), 2) for r in work.requests]
    assert sorted(peaks) == sorted(audio.LEVELS)
