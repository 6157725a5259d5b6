#!/usr/bin/env python3
"""Writes the small audio clips of tests/data/datasets/audio (custom_audio's and the SDK
audio module's tests) with soundfile (libsndfile), and prints each clip's length as
soundfile reads it back (frames / sample rate: what vLLM measures).

    pip install soundfile numpy
    python3 scripts/audio_test_clips.py tests/data/datasets/audio

The signals are deterministic (a tone with a slow glide and a little seeded noise), mono
16 kHz unless the name says otherwise, one to two seconds long.

It also writes `asr/`, a made-up ASR dataset in LibriSpeech's Hugging Face layout (subset
`clean`, split `train`, one Parquet file; needs pyarrow) whose `audio` cells hold the
bytes of short MP3, Ogg/Vorbis and FLAC clips (`{"bytes", "path"}`, as the hub's `Audio`
feature stores them), for `hf`'s ASR kind.
"""

import sys
from pathlib import Path

import numpy as np
import soundfile as sf

CLIPS = [
    # (file, seconds, rate, channels, format, subtype)
    ("tone.wav", 1.0, 16000, 1, "WAV", "PCM_16"),
    ("float.wav", 0.5, 16000, 1, "WAV", "FLOAT"),
    ("stereo24.wav", 0.25, 22050, 2, "WAV", "PCM_24"),
    ("glide.flac", 1.5, 16000, 1, "FLAC", "PCM_16"),
    ("glide.ogg", 1.25, 16000, 1, "OGG", "VORBIS"),
    ("glide.mp3", 2.0, 16000, 1, "MP3", "MPEG_LAYER_III"),
]


def signal(seconds: float, rate: int, channels: int, seed: int) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    freq = 220.0 + 220.0 * t / max(seconds, 1e-9)
    y = 0.4 * np.sin(2 * np.pi * np.cumsum(freq) / rate)
    y += 0.02 * np.random.default_rng(seed).standard_normal(len(t))
    if channels == 1:
        return y
    return np.stack([y, 0.5 * y], axis=1)


# (seconds, format, subtype) of the ASR rows, 8 kHz mono.
ASR = [
    (0.4, "MP3", "MPEG_LAYER_III"),
    (0.9, "OGG", "VORBIS"),
    (1.3, "MP3", "MPEG_LAYER_III"),
    (1.7, "OGG", "VORBIS"),
    (2.3, "MP3", "MPEG_LAYER_III"),
    (1.1, "FLAC", "PCM_16"),
    (0.7, "OGG", "VORBIS"),
    (1.5, "MP3", "MPEG_LAYER_III"),
]


def asr(out: Path) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i, (seconds, fmt, subtype) in enumerate(ASR):
        buf = io.BytesIO()
        sf.write(buf, signal(seconds, 8000, 1, 100 + i), 8000, format=fmt, subtype=subtype)
        data = buf.getvalue()
        y, sr = sf.read(io.BytesIO(data))
        ext = {"MP3": "mp3", "OGG": "ogg", "FLAC": "flac"}[fmt]
        rows.append({
            "file": f"{i}.{ext}",
            "audio": {"bytes": data, "path": f"{i}.{ext}"},
            "text": f"utterance {i}",
            "speaker_id": i % 3,
            "chapter_id": 7,
            "id": f"7-{i}",
        })
        print(f"asr row {i}\t{fmt}\t{sr} Hz\t{len(y)} frames\t{len(y) / sr:.6f} s\t"
              f"{len(data)} bytes")
    (out / "asr/clean").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "asr/clean/train-00000-of-00001.parquet")
    (out / "asr/README.md").write_text(
        "---\nconfigs:\n- config_name: clean\n  data_files:\n  - split: train\n"
        "    path: clean/train-*\n---\nMade up for bench's tests in LibriSpeech's schema "
        "(scripts/audio_test_clips.py).\n"
    )


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/datasets/audio")
    out.mkdir(parents=True, exist_ok=True)
    for seed, (name, seconds, rate, channels, fmt, subtype) in enumerate(CLIPS):
        path = out / name
        sf.write(path, signal(seconds, rate, channels, seed), rate, format=fmt, subtype=subtype)
        y, sr = sf.read(path)
        print(f"{name}\t{fmt}/{subtype}\t{sr} Hz\t{channels} ch\t{len(y)} frames\t"
              f"{len(y) / sr:.6f} s\t{path.stat().st_size} bytes")
    asr(out)


if __name__ == "__main__":
    main()
