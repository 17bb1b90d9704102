"""Run by an engine interpreter: decode a WAV at 8 kHz and at 44.1 kHz with
vLLM's own media loader, and resample it to 16 kHz with vLLM's own parser
(its default method: torchaudio from 0.30.0 on, PyAV before). Prints one
RESAMPLED line of JSON."""
import inspect
import io
import json
import wave

import numpy as np
from vllm.multimodal.audio import AudioResampler
from vllm.multimodal.media.audio import AudioMediaIO
from vllm.multimodal.parse import MultiModalDataParser


def wav(rate, seconds=1.0):
    samples = (np.sin(np.arange(int(rate * seconds)) / 7) * 20000).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate); w.writeframes(samples.tobytes())
    return buf.getvalue()


parser = MultiModalDataParser(target_sr=16000)
out = {"method": parser.audio_resampler.method,
       "default": inspect.signature(AudioResampler.__init__).parameters["method"].default}
for rate in (8000, 44100):
    audio, sr = AudioMediaIO().load_bytes(wav(rate))
    resampled = parser.parse_mm_data({"audio": (audio, sr)})["audio"].get(0)
    out[str(rate)] = [int(sr), len(audio), len(resampled)]
print("RESAMPLED " + json.dumps(out))
