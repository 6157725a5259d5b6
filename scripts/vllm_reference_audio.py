#!/usr/bin/env python3
"""Makes custom_audio's reference request sets with vLLM's own `CustomAudioDataset`.

Runs `scripts/vllm_reference.py` (which see for the setup; soundfile must be installed
too) in the clips' folder, since vLLM opens a line's `audio` path relative to its working
directory, then replaces each request's audio with a digest, so that the reference stays
small: an `input_audio` part's base64 WAV becomes `{"sha256", "bytes", "rate", "channels",
"frames"}` of the decoded WAV file, and a decoded `(array, rate)` pair (the upload vLLM
writes with `soundfile.write(buf, y, sr, format="WAV")`) the same digest of that WAV.

    VENV/bin/python scripts/vllm_reference_audio.py --vllm-src VLLM_SRC

writes `tests/data/datasets/vllm-requests/custom_audio-*.jsonl`, and, with vLLM's
`ASRDataset` reading `tests/data/datasets/audio/asr` through the `datasets` library (5.2.0,
offline), `hf-asr-mp3-ogg-qwen3-seed0.jsonl` (see that folder's README for the calls).
"""

import argparse
import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
CLIPS = ROOT / "tests/data/datasets/audio"
OUT = ROOT / "tests/data/datasets/vllm-requests"

# (name, tokenizer, seed, num_requests, sample kwargs)
SETS = [
    ("custom_audio-gpt2-seed0-chat", "gpt2", 0, 8,
     ["enable_multimodal_chat=true", "output_len=-1"]),
    ("custom_audio-qwen3-seed1", "qwen3", 1, 7, ["output_len=40"]),
]


# The hf ASR set: (name, tokenizer, seed, num_requests, init and sample arguments).
ASR = ("hf-asr-mp3-ogg-qwen3-seed0", "qwen3", 0, 10,
       ["--init", "dataset_split=train", "--init", "dataset_subset=clean",
        "--init", "hf_name=openslr/librispeech_asr",
        "--sample", "asr_min_audio_len_sec=0.5", "--sample", "asr_max_audio_len_sec=2.0"])


def digest(wav: bytes) -> dict:
    info = sf.info(io.BytesIO(wav))
    return {
        "sha256": hashlib.sha256(wav).hexdigest(),
        "bytes": len(wav),
        "rate": info.samplerate,
        "channels": info.channels,
        "frames": info.frames,
    }


def shrink(mm):
    if isinstance(mm, dict) and mm.get("type") == "input_audio":
        return {"type": "input_audio",
                "input_audio": digest(base64.b64decode(mm["input_audio"]["data"]))}
    if isinstance(mm, dict) and "audio" in mm:
        y, sr = mm["audio"]
        buf = io.BytesIO()
        import numpy as np
        sf.write(buf, np.asarray(y), sr, format="WAV")
        return {"audio": digest(buf.getvalue())}
    raise SystemExit(f"unexpected multi_modal_data {str(mm)[:80]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm-src", default="/work/vllm-src")
    args = parser.parse_args()
    for name, tok, seed, n, sample in SETS:
        out = OUT / f"{name}.jsonl"
        cmd = [sys.executable, str(ROOT / "scripts/vllm_reference.py"),
               "--vllm-src", args.vllm_src, "--dataset", "CustomAudioDataset",
               "--tokenizer", str(ROOT / "tests/data/tokenizers" / tok),
               "--seed", str(seed), "--num-requests", str(n),
               "--init", "dataset_path=clips.jsonl", "--out", str(out)]
        for s in sample:
            cmd += ["--sample", s]
        # The raw set first (it holds every sample of every clip), then the digest.
        subprocess.run(cmd, cwd=CLIPS, check=True)
        digest_file(out)
    name, tok, seed, n, extra = ASR
    out = OUT / f"{name}.jsonl"
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               HF_HOME=tempfile.mkdtemp())
    subprocess.run([sys.executable, str(ROOT / "scripts/vllm_reference.py"),
                    "--vllm-src", args.vllm_src, "--dataset", "ASRDataset",
                    "--tokenizer", str(ROOT / "tests/data/tokenizers" / tok),
                    "--seed", str(seed), "--num-requests", str(n),
                    "--init", f"dataset_path={CLIPS / 'asr'}",
                    "--meta", "dataset=hf", "--meta", "dataset_path=audio/asr",
                    *extra, "--out", str(out)], cwd=ROOT, env=env, check=True)
    digest_file(out)


def digest_file(out: Path) -> None:
    lines = [json.loads(l) for l in out.read_text(encoding="utf-8").splitlines()]
    for line in lines[1:]:
        mm = line.get("multi_modal_data")
        if mm is not None:
            line["multi_modal_data"] = shrink(mm)
    out.write_text("".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines),
                   encoding="utf-8")


if __name__ == "__main__":
    main()
