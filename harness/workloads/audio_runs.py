"""Runs of audio workloads on engines, kept for the checks that read them:
a batch then each clip alone (offline), concurrent requests (server), and
single edge or hostile inputs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fixtures import media
from harness.engines.base import Engine, Sampling
from harness.engines.results import Completion, Result
from harness.workloads import audio
from harness.workloads.chat import audio_part, audio_url_part, user

BASE_DURATIONS_S = (1.0, 3.5, 7.0, 12.0)


def _labels(clips: list[audio.Clip]) -> list[str]:
    return [f"clip{i}:{c.label}" for i, c in enumerate(clips)]


def _frames(model: str, clips: list[audio.Clip]) -> list[int]:
    return [audio.feature_frames(model, c) for c in clips]


@dataclass
class BatchRun:
    name: str
    session: object  # EngineSession
    clips: list[audio.Clip]
    frames: list[int]
    distinct: bool
    batch: list[Result] = field(default_factory=list)
    solos: list[Result] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return _labels(self.clips)

    def attach(self, record) -> None:
        self.session.attach(record)
        record.params["shape"] = self.name
        record.evidence.update({"durations_s": [c.duration_s for c in self.clips],
                                "feature_frames": self.frames})


def batch_run(name: str, session, clips: list[audio.Clip], sampling: Sampling, *,
              distinct: bool) -> BatchRun:
    run = BatchRun(name, session, clips, _frames(session.model, clips), distinct)
    if session.engine is None:
        return run
    run.batch = session.engine.chat([c.conversation() for c in clips], sampling)
    if all(isinstance(r, Completion) for r in run.batch):
        run.solos = [session.engine.chat([c.conversation()], sampling)[0] for c in clips]
    else:
        run.solos = list(run.batch)  # the engine is gone: nothing ran alone either
    return run


def concurrent_durations(n: int) -> list[float]:
    """n distinct durations: the base set, then shifted by half a second per round."""
    return [BASE_DURATIONS_S[i % 4] + 0.5 * (i // 4) for i in range(n)]


@dataclass
class ConcurrentRun:
    server: object  # EngineSession
    reference_kind: str
    clips: list[audio.Clip]
    results: list[Result] = field(default_factory=list)
    solos: list[Result] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        return _labels(self.clips)

    def attach(self, record) -> None:
        self.server.attach(record)
        record.params["concurrency"] = len(self.clips)
        record.evidence["durations_s"] = [c.duration_s for c in self.clips]


def concurrent_run(server, reference, clips: list[audio.Clip], sampling: Sampling) -> ConcurrentRun:
    """Fire all clips together at the server; solo references come from the
    offline engine, or, for a remote target, from solo requests to the server."""
    run = ConcurrentRun(server, "offline" if reference else "same server, solo", clips)
    if server.engine is None:
        return run
    audio.guard_lengths(clips, _frames(server.model, clips), distinct=True)
    run.results = server.engine.chat([c.conversation() for c in clips], sampling)
    ref = reference if reference is not None else server
    if ref.engine is None:
        run.solos = [ref.failure] * len(clips)
    else:
        run.solos = [ref.engine.chat([c.conversation()], sampling)[0] for c in clips]
    return run


def _clip_part(duration_s: float, *, sample_rate: int = audio.SAMPLE_RATE, channels: int = 1,
               kind: str = "sweep") -> dict:
    samples = media.audio_clip(duration_s, sample_rate=sample_rate, channels=channels, kind=kind, seed=7)
    return audio_part(media.encode_audio(samples, sample_rate, "wav"))


def _silence() -> dict:
    return audio_part(media.encode_audio(np.zeros(2 * audio.SAMPLE_RATE, np.float32), audio.SAMPLE_RATE))


def _truncated_wav() -> dict:
    wav = media.encode_audio(media.audio_clip(2.0, seed=7), audio.SAMPLE_RATE, "wav")
    return audio_part(wav[: len(wav) // 2])  # the header still promises two seconds


EDGE_INPUTS: dict[str, Callable[[str], dict]] = {
    "0.05s": lambda model: _clip_part(0.05),
    "silence": lambda model: _silence(),
    "stereo": lambda model: _clip_part(2.0, channels=2),
    "8kHz": lambda model: _clip_part(2.0, sample_rate=8000),
    "44.1kHz": lambda model: _clip_part(2.0, sample_rate=44100),
    "longest-allowed": lambda model: _clip_part(audio.max_audio_seconds(model)),
    "beyond-longest": lambda model: _clip_part(audio.max_audio_seconds(model) + 5.0),
    "truncated-wav": lambda model: _truncated_wav(),
    "random-bytes-as-wav": lambda model: audio_part(np.random.default_rng(7).bytes(4096)),
    "empty-payload": lambda model: audio_part(b""),
    "image-as-audio": lambda model: audio_url_part(
        media.encode_image(media.image(64, 64, seed=7)), "audio/wav"),
}


def edge_request(engine: Engine, model: str, name: str, sampling: Sampling) -> tuple[Result, dict]:
    """Send one edge input; returns its result and what the report should know."""
    notes = {"input": name}
    [result] = engine.chat([user(EDGE_INPUTS[name](model), audio.PROMPT)], sampling)
    if name == "beyond-longest" and isinstance(result, Completion):
        # Silent truncation passes, and is recorded: compare with the longest allowed clip.
        [longest] = engine.chat([user(EDGE_INPUTS["longest-allowed"](model), audio.PROMPT)], sampling)
        notes["max_audio_s"] = audio.max_audio_seconds(model)
        notes["prompt_tokens"] = result.prompt_token_count
        notes["longest_allowed_prompt_tokens"] = getattr(longest, "prompt_token_count", None)
        notes["silently_truncated"] = result.prompt_token_count == notes["longest_allowed_prompt_tokens"]
    return result, notes
