#!/usr/bin/env bash
# Makes the `hf-*` reference request sets of tests/data/datasets/vllm-requests with vLLM's
# own HuggingFaceDataset classes (scripts/vllm_reference.py) and the real `datasets` library
# reading the local test datasets of tests/data/datasets/hf (see its README).
#
#   PY=/path/to/venv/bin/python bash scripts/hf_references.sh
#
# The venv needs what scripts/vllm_reference.py needs plus `datasets` (5.2.0 was used:
# its streamed shuffle is what bench reproduces). Nothing is downloaded: HF_DATASETS_OFFLINE.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 HF_HOME=${HF_HOME:-$(mktemp -d)}
D=$PWD/tests/data/datasets/hf
OUT=tests/data/datasets/vllm-requests
GSM=datasets--openai--gsm8k/snapshots/0000000000000000000000000000000000000000

ref() { # name class tokenizer seed n path(relative to D) [--init/--sample ...]
  local name=$1 class=$2 tok=$3 seed=$4 n=$5 path=$6
  shift 6
  "$PY" scripts/vllm_reference.py --dataset "$class" --tokenizer "tests/data/tokenizers/$tok" \
    --seed "$seed" --num-requests "$n" --init "dataset_path=$D/$path" \
    --meta dataset=hf --meta "dataset_path=$path" "$@" --out "$OUT/$name.jsonl"
}

ref hf-gsm8k-qwen3-seed0 GSM8KDataset qwen3 0 20 $GSM \
  --init dataset_subset=main --init dataset_split=test --init hf_name=openai/gsm8k
ref hf-gsm8k-gpt2-seed42 GSM8KDataset gpt2 42 25 $GSM \
  --init dataset_subset=main --init dataset_split=test --init hf_name=openai/gsm8k \
  --sample skip_chat_template=true --sample output_len=64 --meta hf_output_len=64
ref hf-gsm8k-gpt2-seed0-nostream GSM8KDataset gpt2 0 15 $GSM \
  --init dataset_subset=main --init dataset_split=test --init hf_name=openai/gsm8k \
  --init no_stream=true --sample skip_chat_template=true --meta no_stream=true
ref hf-gsm8k-gpt2-seed7-noshuffle GSM8KDataset gpt2 7 10 $GSM \
  --init dataset_subset=main --init dataset_split=test --init hf_name=openai/gsm8k \
  --init disable_shuffle=true --sample skip_chat_template=true --meta disable_shuffle=true
ref hf-humaneval-qwen3-seed42 HumanEvalDataset qwen3 42 12 humaneval \
  --init dataset_split=train --init hf_name=openai/openai_humaneval
ref hf-instructcoder-gpt2-seed0 InstructCoderDataset gpt2 0 30 likaixin/InstructCoder \
  --init dataset_split=train --sample skip_chat_template=true
ref hf-instructcoder-qwen3-seed42 InstructCoderDataset qwen3 42 15 likaixin/InstructCoder \
  --init dataset_split=train
ref hf-mtbench-qwen3-seed0 MTBenchDataset qwen3 0 12 philschmid/mt-bench \
  --init dataset_split=train
ref hf-aimo-gpt2-seed0 AIMODataset gpt2 0 60 AI-MO/aimo-validation-aime \
  --init dataset_split=train
ref hf-aimo-qwen3-seed42 AIMODataset qwen3 42 20 AI-MO/aimo-validation-aime \
  --init dataset_split=train
ref hf-blazedit-gpt2-seed0 BlazeditDataset gpt2 0 10 vdaita/edit_5k_char \
  --init dataset_split=train --sample skip_chat_template=true \
  --sample min_distance=0.2 --sample max_distance=0.7 \
  --meta blazedit_min_distance=0.2 --meta blazedit_max_distance=0.7
ref hf-conversation-gpt2-seed0 ConversationDataset gpt2 0 40 Aeala/ShareGPT_Vicuna_unfiltered \
  --init dataset_split=train
ref hf-conversation-qwen3-seed42 ConversationDataset qwen3 42 10 Aeala/ShareGPT_Vicuna_unfiltered \
  --init dataset_split=train
ref hf-visionarena-gpt2-seed0 VisionArenaDataset gpt2 0 8 lmarena-ai/VisionArena-Chat \
  --init dataset_split=train --init hf_name=lmarena-ai/VisionArena-Chat
ref hf-zeta-gpt2-seed0 NextEditPredictionDataset gpt2 0 25 zed-industries/zeta \
  --init dataset_split=train --init hf_name=zed-industries/zeta
ref hf-mlperf-qwen3-seed42 MLPerfDataset qwen3 42 30 mgoin/mlperf-inference-llama3.1-data \
  --init dataset_split=train
ref hf-mmstar-gpt2-seed0 MMStarDataset gpt2 0 6 Lin-Chen/MMStar --init dataset_split=val
ref hf-asr-qwen3-seed0 ASRDataset qwen3 0 12 openslr/librispeech_asr \
  --init dataset_split=train --init dataset_subset=clean --init hf_name=openslr/librispeech_asr \
  --sample asr_min_audio_len_sec=0.5 --sample asr_max_audio_len_sec=2.0
# BFCL reads its category files through the hub API: vllm_reference.py's stand-in reads
# them from the local folder.
ref hf-bfcl-qwen3-seed0 BFCLDataset qwen3 0 12 gorilla-llm/Berkeley-Function-Calling-Leaderboard \
  --init dataset_split=train --sample 'categories=["simple","multiple"]' \
  --meta bfcl_categories=simple,multiple
# vLLM's decoded samples are long: keep their count and rate, which name the clip.
"$PY" - "$OUT/hf-asr-qwen3-seed0.jsonl" <<'PYEOF'
import json, sys
path = sys.argv[1]
lines = open(path, encoding="utf-8").read().splitlines()
out = [lines[0]]
for line in lines[1:]:
    r = json.loads(line)
    samples, rate = r["multi_modal_data"]["audio"]
    r["multi_modal_data"] = {"audio_samples": len(samples), "sampling_rate": rate}
    out.append(json.dumps(r, ensure_ascii=False))
open(path, "w", encoding="utf-8").write("\n".join(out) + "\n")
PYEOF
