#!/usr/bin/env python3
"""Makes the small test datasets of `tests/data/datasets/hf/` (run from the repository root).

Each is laid out as its Hugging Face repository is (or as a plain folder), in that
dataset's schema, so that both bench's `hf` plugin and `datasets.load_dataset` read it:
slices of real data where we have it (HumanEval, GSM8K: MIT; MT-Bench questions from
Spec-Bench: Apache-2.0; ShareGPT) and rows made up for the tests otherwise. Needs pyarrow.
"""

import io
import json
import shutil
import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SHARED = Path("/work/shared/data/datasets")
OUT = Path("tests/data/datasets/hf")


def jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def parquet(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, compression="snappy", row_group_size=300)


def png(width: int, height: int, rgb) -> bytes:
    """A solid-colour PNG."""
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def main() -> None:
    shutil.rmtree(OUT / "humaneval", ignore_errors=True)
    # HumanEval: the first 60 tasks, a plain folder (the path does not show the hub id).
    lines = (SHARED / "humaneval/HumanEval.jsonl").read_text().splitlines()[:60]
    (OUT / "humaneval").mkdir(parents=True, exist_ok=True)
    (OUT / "humaneval/HumanEval.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(SHARED / "humaneval/LICENSE", OUT / "humaneval/LICENSE")

    # GSM8K: the first 1 200 test questions as the hub's snapshot lays them out (subset
    # folder `main`, a Parquet shard), more than the 1 000-row shuffle buffer.
    snap = OUT / "datasets--openai--gsm8k/snapshots/0000000000000000000000000000000000000000"
    shutil.rmtree(OUT / "datasets--openai--gsm8k", ignore_errors=True)
    rows = [json.loads(l) for l in (SHARED / "gsm8k/test.jsonl").read_text().splitlines()[:1200]]
    parquet(snap / "main/test-00000-of-00001.parquet", rows)
    (snap / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: test\n"
        "    path: main/test-*\n---\nA slice of openai/gsm8k (MIT), made for bench's tests.\n"
    )
    shutil.copy(SHARED / "gsm8k/LICENSE", snap / "LICENSE")

    # MT-Bench: the 80 MT-Bench questions of Spec-Bench, as philschmid/mt-bench's
    # `question.jsonl` ({question_id, category, turns}).
    mt = [json.loads(l) for l in (SHARED / "spec_bench/question.jsonl").read_text().splitlines()]
    mt = [{k: r[k] for k in ("question_id", "category", "turns")} for r in mt[:80]]
    jsonl(OUT / "philschmid/mt-bench/question.jsonl", mt)

    # ShareGPT-style conversations: 30 short conversations of ShareGPT V3 (the slice in
    # tests/data/datasets/sharegpt), in a folder named by the hub id vLLM knows them by.
    share = json.loads(Path("tests/data/datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json").read_text())
    share = [{"id": c["id"], "conversations": [{"from": t["from"], "value": t["value"]} for t in c["conversations"]]} for c in share[:60] if len(json.dumps(c)) < 6000][:30]
    path = OUT / "Aeala/ShareGPT_Vicuna_unfiltered/ShareGPT_V3_slice.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(share, ensure_ascii=False, indent=1))

    # InstructCoder (made up): 1 500 rows {instruction, input, output}, a JSON Lines train
    # split in a folder named by the hub id.
    jsonl(
        OUT / "likaixin/InstructCoder/train.jsonl",
        (
            {
                "instruction": f"Rename the function f{i} to g{i}.",
                "input": f"def f{i}(x):\n    return x * {i % 7}",
                "output": f"def g{i}(x):\n    return x * {i % 7}",
            }
            for i in range(1200)
        ),
    )

    # AIMO (made up): problems and solutions of varied length, some outside vLLM's filter.
    aimo = []
    for i in range(40):
        words = 2 if i % 9 == 0 else 6 + (i * 37) % 50
        aimo.append(
            {
                "id": i,
                "problem": f"Problem {i}: " + " ".join(["compute"] * words),
                "solution": " ".join(["step"] * (1 if i % 11 == 0 else 3 + (i * 13) % 40)),
                "answer": str(i),
                "url": f"https://example.invalid/aimo/{i}",
            }
        )
    jsonl(OUT / "AI-MO/aimo-validation-aime/data/train.jsonl", aimo)

    # Blazedit (made up): Parquet rows {code, change_request, norm_distance}.
    parquet(
        OUT / "vdaita/edit_5k_char/data/train-00000-of-00001.parquet",
        [
            {
                "code": f"def area_{i}(r):\n    return 3.14 * r * r\n",
                "change_request": f"Use math.pi in area_{i}.",
                "norm_distance": round((i * 0.037) % 1.0, 4),
            }
            for i in range(50)
        ],
    )

    # VisionArena (made up): conversation turns and a stored PNG per row.
    parquet(
        OUT / "lmarena-ai/VisionArena-Chat/data/train-00000-of-00001.parquet",
        [
            {
                "conversation_id": f"c{i}",
                "conversation": [[{"role": "user", "content": f"What colour is picture {i}?"}],
                                 [{"role": "assistant", "content": "Blue."}]],
                "images": [{"bytes": png(4 + i % 3, 3, (i * 40 % 256, 20, 200)), "path": None}],
            }
            for i in range(12)
        ],
    )

    # MMVU (made up): questions, choices and the hub URL of a video, `validation.json`.
    mmvu = OUT / "yale-nlp/MMVU"
    mmvu.mkdir(parents=True, exist_ok=True)
    (mmvu / "validation.json").write_text(json.dumps([
        {
            "id": f"v{i}",
            "question": f"What happens in clip {i}?",
            "choices": {"A": "a ball falls", "B": "a cup breaks", "C": None},
            "video": f"https://huggingface.co/datasets/yale-nlp/MMVU/resolve/main/videos/Physics/{i}.mp4",
        }
        for i in range(5)
    ], indent=1))

    # Zed's zeta (made up): edit events, an excerpt and the rewritten excerpt.
    jsonl(
        OUT / "zed-industries/zeta/train.jsonl",
        (
            {
                "events": f"User edited file.py:\n- x = {i}\n+ x = {i + 1}",
                "input": f"<|editable_region_start|>\nx = {i + 1}<|user_cursor_is_here|>\n<|editable_region_end|>",
                "output": f"<|editable_region_start|>\nx = {i + 1}\ny = x * {i}\n<|editable_region_end|>",
            }
            for i in range(20)
        ),
    )

    # MLPerf (made up): {system_prompt, question, output}.
    parquet(
        OUT / "mgoin/mlperf-inference-llama3.1-data/data/train-00000-of-00001.parquet",
        [
            {
                "system_prompt": "You are a helpful assistant.",
                "question": f"Summarise item {i}: " + "alpha beta " * (1 + i % 5),
                "output": "gamma " * (2 + (i * 7) % 30),
            }
            for i in range(25)
        ],
    )

    # MMStar (made up): a question with its options and an image, split `val`.
    parquet(
        OUT / "Lin-Chen/MMStar/mmstar/val-00000-of-00001.parquet",
        [
            {
                "index": i,
                "question": f"Which colour is shown in picture {i}?\nOptions: A: red, B: blue",
                "image": {"bytes": png(3, 2 + i % 2, (10, i * 30 % 256, 90)), "path": None},
                "answer": "B",
                "category": "coarse perception",
            }
            for i in range(8)
        ],
    )

    (OUT / "Lin-Chen/MMStar/README.md").write_text(
        "---\nconfigs:\n- config_name: val\n  data_files:\n  - split: val\n"
        "    path: mmstar/val-*\n---\nMade up for bench's tests in MMStar's schema.\n"
    )

    # LibriSpeech-style ASR (made up): WAV clips of 0.2 to 2.4 s (a tone at 2 kHz sampling), as the hub's
    # `Audio` feature stores them ({bytes, path}).
    def wav(seconds: float, rate: int = 2000) -> bytes:
        import math
        n = int(seconds * rate)
        samples = b"".join(struct.pack("<h", int(8000 * math.sin(i / 5))) for i in range(n))
        fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
        body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(samples)) + samples
        return b"RIFF" + struct.pack("<I", len(body)) + body

    parquet(
        OUT / "openslr/librispeech_asr/clean/train-00000-of-00001.parquet",
        [
            {
                "file": f"{i}.wav",
                "audio": {"bytes": wav(0.2 + (i * 0.7) % 2.2), "path": f"{i}.wav"},
                "text": f"utterance {i}",
                "speaker_id": i % 3,
                "chapter_id": 7,
                "id": f"7-{i}",
            }
            for i in range(16)
        ],
    )

    (OUT / "openslr/librispeech_asr/README.md").write_text(
        "---\nconfigs:\n- config_name: clean\n  data_files:\n  - split: train\n"
        "    path: clean/train-*\n---\nMade up for bench's tests in LibriSpeech's schema.\n"
    )

    # BFCL (made up): two categories in BFCL's schema, one JSON object per line, at the
    # repository's root.
    bfcl = OUT / "gorilla-llm/Berkeley-Function-Calling-Leaderboard"
    fn = {
        "name": "calc_area",
        "description": "Area of a shape.",
        "parameters": {
            "type": "dict",
            "properties": {"base": {"type": "float"}, "sides": {"type": "tuple", "items": {"type": "integer"}}},
            "required": ["base"],
        },
    }
    jsonl(
        bfcl / "BFCL_v3_simple.json",
        [
            {"id": f"simple_{i}", "question": [[{"role": "user", "content": f"Area of triangle {i}?"}]], "function": [fn]}
            for i in range(6)
        ] + [{"id": "simple_bad", "question": [], "function": [fn]}],
    )
    jsonl(
        bfcl / "BFCL_v3_multiple.json",
        [
            {"id": f"multiple_{i}", "question": [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Two areas, case {i}."}]], "function": [fn, dict(fn, name="calc_perimeter")]}
            for i in range(4)
        ],
    )


if __name__ == "__main__":
    main()
