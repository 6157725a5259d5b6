#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one prepared script: the native engine's CUDA path
# (correctness against the CPU engine, speed against the CPU engine and the HBM roofline),
# NVML telemetry, and --workers on the GPU machine's many CPU cores. First run on a lent H200 on
# 2026-11-30 (its report is in docs/offline.md, block gpu-check).
#
#   bash scripts/gpu-check.sh prepare        # here: bench --features cuda (release), packed into .gpu/
#   bash scripts/gpu-check.sh run            # on the GPU machine, in the repository root, .gpu/ carried
#   bash scripts/gpu-check.sh readme REPORT  # here: the report into docs/offline.md (block gpu-check)
#
# The GPU machine (the `device` tool's nvidia-h200) reaches no registry and has no Rust
# toolchain, so `prepare` builds here with scripts/check-cuda-build.sh (CUDA 13.0 from PyPI
# when no toolkit is installed; about 20 minutes on 2 cores), strips the binary and packs it
# xz-compressed into .gpu/ (ignored by git; add `/.gpu/` to .git/info/exclude), with the
# commit it was built from. Then, with the `device` tool:
#   run(command="bash scripts/gpu-check.sh run", carry=[".gpu"], timeout_s=540)
# `run` writes its report to $OUT/gpu-check.md (or .gpu/out/ without $OUT) and exits non-zero
# when a check failed; `readme` puts that report in docs/offline.md with the date, the commit and
# the machine (scripts/readme_block.py), where scripts/check_figures.py dates it.
#
# What `run` checks, each printing PASS or FAIL with its figures:
#   correctness  greedy tokens (--temperature 0, EOS ignored, 32 tokens, 8 random prompts) of
#                the in-repo tiny Llama (tests/data/models/tiny-llama-hf) on --device cuda
#                against --device cpu: PASS when every prompt's first 8 tokens agree (the
#                two sum floats in another order, so later near-ties may part)
#   speed        a 1.1B-parameter Llama with random bf16 weights (TinyLlama's shape, written
#                there with PyTorch: no download), `bench latency` at batch 1 (32-token
#                prompts, 256 output tokens) on cuda and on the CPU engine (all cores, 32
#                output tokens): PASS when cuda is faster than the CPU and reaches at least
#                GPU_ROOFLINE_FLOOR (0.10) of the HBM roofline, the measured device-to-device
#                copy bandwidth (PyTorch) over the weights' bytes: each decoded token at batch
#                1 reads every weight once
#   telemetry    `bench serve` against the mock server with GPU telemetry on: PASS when the
#                result names the GPU (gpu_devices) with its memory (gpu_memory_total_bytes),
#                and, with --cost-per-hour 3.5, its energy and price per token agree with
#                gpu_energy_j, duration and the token totals
#   workers      scripts/perf.sh's workers rows on the machine's CPU cores (clients on the
#                lower cores, the mock server on the rest): figures, no verdict
set -euo pipefail
cd "$(dirname "$0")/.."

pack=.gpu
case ${1:-} in
  prepare)
    bash scripts/check-cuda-build.sh --release
    target=${BENCH_CUDA_TARGET_DIR:-${BENCH_CUDA_CACHE:-$HOME/.cache/bench-cuda}/target}
    mkdir -p "$pack"
    strip -o "$pack/bench" "$target/release/bench"
    xz -T0 -6 -f "$pack/bench"
    git rev-parse --short=10 HEAD >"$pack/commit"
    ls -la "$pack"
    echo "gpu-check.sh: packed $(cat "$pack/commit"); now: run(command=\"bash scripts/gpu-check.sh run\", carry=[\".gpu\"], timeout_s=540)"
    exit 0
    ;;
  readme)
    report=${2:?readme REPORT}
    grep -q '<!-- gpu-check:start -->' docs/offline.md || python3 - <<'PY'
# The block goes under the native engine's GPU paragraph the first time.
text = open("docs/offline.md").read()
anchor = "## GPU telemetry\n"
assert anchor in text, "docs/offline.md has no '## GPU telemetry' section"
text = text.replace(anchor, anchor + "\n<!-- gpu-check:start -->\n<!-- gpu-check:end -->\n", 1)
open("docs/offline.md", "w").write(text)
PY
    python3 scripts/readme_block.py gpu-check "bash scripts/gpu-check.sh run (on the device tool's GPU machine, bench --features cuda built at $(cat "$pack/commit" 2>/dev/null || echo '?') by gpu-check.sh prepare)" "$report"
    exit 0
    ;;
  run) ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
esac

# ---- run: on the GPU machine --------------------------------------------------------------
out=${OUT:-$pack/out}
mkdir -p "$out"
report=$out/gpu-check.md
: >"$report"
say() { echo "$*" | tee -a "$report"; }
failures=0
verdict() { say "$1"; [[ $1 == PASS* ]] || failures=$((failures + 1)); }
tmp=$(mktemp -d)

[ -f "$pack/bench.xz" ] || { echo "gpu-check.sh: no $pack/bench.xz: run 'prepare' here first and carry $pack" >&2; exit 2; }
xz -dc "$pack/bench.xz" >"$tmp/bench"
chmod +x "$tmp/bench"
bench=$tmp/bench
# The CUDA libraries bench loads at run time (cudart, cublas, curand, nvrtc): the machine's
# toolkit, and the NVIDIA wheels beside its PyTorch.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  $(python3 -c 'import glob, os, nvidia; print(" ".join(sorted({os.path.dirname(p) for b in nvidia.__path__ for p in glob.glob(b + "/**/lib*.so*", recursive=True)})))' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export LD_LIBRARY_PATH
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
say "bench --features cuda built at $(cat "$pack/commit" 2>/dev/null || echo '?'); GPU: ${gpu:-none found}; $(nproc) CPU cores"
say ""
"$bench" --version >/dev/null || { say "FAIL: the binary does not start (above: a missing CUDA library?)"; exit 1; }

# correctness: the tiny model on cuda against cpu.
greedy() { # device result
  "$bench" serve --backend native --model tests/data/models/tiny-llama-hf --device "$1" \
    --dataset-name random --random-input-len 16 --random-output-len 32 --num-prompts 8 --seed 0 \
    --temperature 0 --ignore-eos --disable-tqdm --save-result --save-detailed \
    --result-dir "$tmp" --result-filename "$2.json" >"$tmp/$2.log" 2>&1 || { tail -20 "$tmp/$2.log"; return 1; }
}
if greedy cpu greedy-cpu && greedy cuda greedy-cuda; then
  verdict "$(python3 - "$tmp/greedy-cpu.json" "$tmp/greedy-cuda.json" <<'PY'
import json, sys
cpu, cuda = (json.load(open(p))["generated_texts"] for p in sys.argv[1:3])
# Texts, compared by their leading characters as a stand-in for tokens: the first
# difference, per prompt.
def agree(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
same = [agree(a, b) for a, b in zip(cpu, cuda)]
full = sum(a == b for a, b in zip(cpu, cuda))
# 8 tokens of this tokenizer are at least 8 characters of text.
ok = len(same) == 8 and all(n >= min(8, len(a)) for n, a in zip(same, cpu))
print(f"{'PASS' if ok else 'FAIL'} correctness: the tiny Llama's greedy texts on cuda against cpu, "
      f"{full} of {len(cpu)} identical; common prefix per prompt (characters): {same}")
PY
)"
else
  verdict "FAIL correctness: a run failed (above)"
fi

# speed: a 1.1B Llama with random bf16 weights, and the roofline.
model=$tmp/llama-1b
weights_ok=0
python3 - "$model" tests/data/models/tiny-llama-hf/tokenizer.json <<'PY' >"$tmp/roofline.txt" && weights_ok=1
import json, os, shutil, struct, sys, time
import torch
out, tokenizer = sys.argv[1:3]
os.makedirs(out)
cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
           intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
           num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=10000.0,
           max_position_embeddings=2048, vocab_size=32000, tie_word_embeddings=False,
           bos_token_id=1, eos_token_id=2, hidden_act="silu", torch_dtype="bfloat16")
json.dump(cfg, open(f"{out}/config.json", "w"))
shutil.copy(tokenizer, f"{out}/tokenizer.json")
h, f, v, kv = 2048, 5632, 32000, 4 * 64
shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
for i in range(22):
    p = f"model.layers.{i}."
    shapes.update({p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                   p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                   p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                   p + "mlp.down_proj.weight": (h, f), p + "input_layernorm.weight": (h,),
                   p + "post_attention_layernorm.weight": (h,)})
g = torch.Generator(device="cuda").manual_seed(0)
header, blobs, offset = {}, [], 0
for name, shape in shapes.items():
    t = (torch.ones(shape, device="cuda") if len(shape) == 1
         else torch.randn(shape, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
    raw = t.view(torch.int16).cpu().numpy().tobytes()
    header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
    blobs.append(raw)
    offset += len(raw)
head = json.dumps(header).encode()
head += b" " * (-len(head) % 8)
with open(f"{out}/model.safetensors", "wb") as w:
    w.write(struct.pack("<Q", len(head)) + head)
    for b in blobs:
        w.write(b)
# The HBM bandwidth, measured: device-to-device copies of 4 GiB, bytes read and written.
x = torch.empty(2**31, dtype=torch.int16, device="cuda")
y = torch.empty_like(x)
for _ in range(3):
    y.copy_(x)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(10):
    y.copy_(x)
torch.cuda.synchronize()
bw = 10 * 2 * x.numel() * 2 / (time.perf_counter() - t)
print(offset, bw)
PY
read -r weight_bytes bandwidth <"$tmp/roofline.txt" || true
latency() { # device output_len result [flags]
  "$bench" latency --model "$model" --device "$1" --batch-size 1 --input-len 32 --output-len "$2" \
    --num-iters-warmup 1 --num-iters 3 --output-json "$tmp/$3.json" "${@:4}" >"$tmp/$3.log" 2>&1 \
    || { tail -20 "$tmp/$3.log"; return 1; }
}
if [ "$weights_ok" != 1 ]; then
  verdict "FAIL speed: the model's weights or the bandwidth could not be made with PyTorch on the GPU (above)"
elif latency cuda 256 speed-cuda && latency cpu 32 speed-cpu --threads "$(nproc)"; then
  verdict "$(python3 - "$tmp/speed-cuda.json" "$tmp/speed-cpu.json" "$weight_bytes" "$bandwidth" "${GPU_ROOFLINE_FLOOR:-0.10}" <<'PY'
import json, sys
cuda, cpu = (json.load(open(p)) for p in sys.argv[1:3])
weights, bw, floor = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
roofline = bw / weights
c, p = cuda["output_tokens_per_second"], cpu["output_tokens_per_second"]
ok = c > p and c >= floor * roofline
print(f"{'PASS' if ok else 'FAIL'} speed: 1.1B Llama bf16 ({weights / 1e9:.2f} GB of weights), batch 1: "
      f"cuda {c:.1f} output tok/s (mean latency {cuda['avg_latency']:.3f} s for 256 tokens), "
      f"cpu {p:.1f} tok/s; HBM copy bandwidth {bw / 1e12:.2f} TB/s, roofline {roofline:.0f} tok/s, "
      f"cuda at {c / roofline:.2f} of it (floor {floor})")
PY
)"
else
  verdict "FAIL speed: a run failed (above)"
fi

# telemetry: NVML through a plain serve run against the mock.
port=18191
"$bench" mock-server --port "$port" --ttft-ms 20 --itl-ms 5 >/dev/null 2>&1 &
mock=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
if "$bench" --backend openai --model mock --tokenizer tests/data/tokenizers/gpt2 \
  --base-url "http://127.0.0.1:$port" --random-input-len 64 --random-output-len 64 --num-prompts 200 \
  --max-concurrency 16 --disable-tqdm --save-result --result-dir "$tmp" --cost-per-hour 3.5 \
  --result-filename telemetry.json >"$tmp/telemetry.log" 2>&1; then
  verdict "$(python3 - "$tmp/telemetry.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
devices = r.get("gpu_devices") or []
total = r.get("gpu_memory_total_bytes") or 0
ok = bool(devices) and total > 0
tokens, energy = r["total_input_tokens"] + r["total_output_tokens"], r.get("gpu_energy_j") or 0
ok = ok and energy > 0 and abs((r.get("gpu_energy_per_token_j") or 0) * tokens - energy) <= 1e-9 * energy \
  and abs(r["cost_per_million_tokens_usd"] * tokens / 1e6 - 3.5 * r["duration"] / 3600) <= 1e-9 * r["run_cost_usd"]
print(f"{'PASS' if ok else 'FAIL'} telemetry: gpu_devices {devices}, gpu_memory_total_bytes {total}, "
      f"gpu_mean_power_w {r.get('gpu_mean_power_w')}, gpu_max_utilization_pct {r.get('gpu_max_utilization_pct')}, "
      f"gpu_energy_per_token_j {r.get('gpu_energy_per_token_j')}, cost_per_million_tokens_usd {r.get('cost_per_million_tokens_usd')}")
PY
)"
else
  tail -20 "$tmp/telemetry.log"
  verdict "FAIL telemetry: the run failed (above)"
fi
kill $mock 2>/dev/null || true

# workers: the client processes on the lower cores, the mock on the rest (figures only).
say ""
for c in 2 4 8; do
  [ "$(nproc)" -gt "$c" ] || continue
  say "workers, $c client cores, $(($(nproc) - c)) server cores:"
  BENCH_BIN=$bench WORKERS_CLIENT_CORES=$c ROWS="workers-1 workers-2 workers-4" N_CEILING=40000 \
    bash scripts/perf.sh 2>/dev/null | grep -E '^\| (scenario +\| conc\.|workers)' | tee -a "$report" || true
  say ""
done

say "$failures check(s) failed"
[ "$failures" -eq 0 ]
