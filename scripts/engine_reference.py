#!/usr/bin/env python3
"""Reference logits for bench-engine's correctness tests, computed another way.

A one-off script: its outputs are committed, and CI never runs it. It implements the GPT-2
and Llama forward passes independently of the engine, in float64 numpy, straight from the
papers' / transformers' definitions, and writes what the engine's tests compare against:

  tests/data/models/reference_logits.json
      for fake-gpt2 (HF safetensors) and llama-2-tiny-random (GGUF, F16): a few fixed token
      sequences, and at every position the logits at a fixed set of vocabulary ids, the
      argmax and the log-sum-exp over the whole vocabulary (which a wrong logit anywhere in
      the row would move); plus Llama-2 SentencePiece tokenizations of a few sentences by
      llama.cpp's algorithm (bigram merges by score, byte fallback), for the GGUF-vocabulary
      tokenizer test.
  tests/data/models/tiny-llama-hf/
      the tiny GGUF Llama written as a Hugging Face Llama directory (config.json,
      model.safetensors in F16, tokenizer.json), for the HF-Llama loader. llama.cpp's converter
      permutes the rows of attn_q/attn_k so that its interleaved ("GPT-J") RoPE gives what HF's
      half-split RoPE gives on the original weights; this script undoes that permutation, and
      checks in float64 that the two layouts give the same logits, so the engine must give the
      same logits through both loaders.

Environment (all on PyPI; torch/transformers are not needed):

    python3 -m venv /tmp/engref && /tmp/engref/bin/pip install numpy safetensors gguf
    /tmp/engref/bin/python scripts/engine_reference.py

Written with numpy 2.4, safetensors 0.8.0, gguf 0.19.0.
"""

import json
import math
import os
import sys

import numpy as np
from gguf import GGUFReader
from safetensors.numpy import load_file, save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS = os.path.join(ROOT, "tests", "data", "models")
GPT2_DIR = os.path.join(MODELS, "fake-gpt2")
GGUF_PATH = os.path.join(MODELS, "llama-2-tiny-random-gguf", "llama-2-tiny-random.gguf")
HF_LLAMA_DIR = os.path.join(MODELS, "tiny-llama-hf")
FIXTURE = os.path.join(MODELS, "reference_logits.json")

# Vocabulary ids whose logits are stored at every position: the first few, a stride through
# the rest, and the last. (Storing whole 50k-wide rows would make a multi-megabyte fixture;
# the log-sum-exp covers the rest of each row.)
def probe_ids(vocab):
    ids = set(range(16))
    ids.update(range(16, vocab, 397))
    ids.add(vocab - 1)
    return sorted(ids)


def row_summary(logits, ids):
    m = logits.max(axis=-1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=-1))
    return {
        "argmax": [int(a) for a in logits.argmax(axis=-1)],
        "logsumexp": [float(v) for v in lse],
        "values": [[float(v) for v in row[ids]] for row in logits],
    }


# ---------------------------------------------------------------------------------------
# GPT-2 (transformers' GPT2LMHeadModel, eval mode)

def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def causal_attention(q, k, v):
    """q, k, v: (heads, T, head_dim); causal, scaled by 1/sqrt(head_dim)."""
    t = q.shape[1]
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    mask = np.triu(np.ones((t, t), dtype=bool), k=1)
    scores = np.where(mask[None], -np.inf, scores)
    return softmax(scores) @ v


def gpt2_logits(w, cfg, tokens):
    d, n_head = cfg["n_embd"], cfg["n_head"]
    eps = cfg["layer_norm_epsilon"]
    hd = d // n_head
    t = len(tokens)
    x = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][np.arange(t)]
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        # Conv1D: weight is (in, out)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(t, n_head, hd).transpose(1, 0, 2) for a in (q, k, v))
        a = causal_attention(q, k, v).transpose(1, 0, 2).reshape(t, d)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        h = gelu_new(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w["transformer.wte.weight"].T  # lm_head tied to wte


# ---------------------------------------------------------------------------------------
# Llama

def rms_norm(x, w, eps):
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * w


def rope_interleaved(x, theta):
    """llama.cpp's LLAMA_ROPE_TYPE_NORM: rotates adjacent pairs (x[2i], x[2i+1]).
    x: (heads, T, hd)."""
    t, hd = x.shape[1], x.shape[2]
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(t, dtype=np.float64)[:, None] * inv[None]
    cos, sin = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def rope_half(x, theta):
    """transformers' rotate_half RoPE: rotates (x[i], x[i + hd/2])."""
    t, hd = x.shape[1], x.shape[2]
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(t, dtype=np.float64)[:, None] * inv[None]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)
    rot = np.concatenate([-x[..., hd // 2 :], x[..., : hd // 2]], axis=-1)
    return x * cos + rot * sin


def llama_logits(w, c, tokens, rope):
    """w: HF-style names, matrices as (out, in). c: n_head, n_kv_head, eps, theta, n_layer."""
    t = len(tokens)
    x = w["model.embed_tokens.weight"][tokens]
    d = x.shape[-1]
    nh, nkv = c["n_head"], c["n_kv_head"]
    hd = d // nh
    for i in range(c["n_layer"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], c["eps"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(t, nh, hd).transpose(1, 0, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(t, nkv, hd).transpose(1, 0, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(t, nkv, hd).transpose(1, 0, 2)
        q, k = rope(q, c["theta"]), rope(k, c["theta"])
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
        a = causal_attention(q, k, v).transpose(1, 0, 2).reshape(t, nh * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], c["eps"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], c["eps"])
    return x @ w["lm_head.weight"].T


def unpermute(w, n_head):
    """Inverse of convert_hf_to_gguf.py's LlamaModel.permute: rows (head, pair, 2) -> (head, 2, pair)."""
    rows, cols = w.shape
    return w.reshape(n_head, rows // n_head // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def field(reader, key):
    f = reader.fields[key]
    return f.contents()


def read_gguf_llama():
    r = GGUFReader(GGUF_PATH)
    arch = field(r, "general.architecture")
    assert arch == "llama", arch
    c = {
        "n_layer": int(field(r, "llama.block_count")),
        "n_head": int(field(r, "llama.attention.head_count")),
        "n_kv_head": int(field(r, "llama.attention.head_count_kv")),
        "eps": float(field(r, "llama.attention.layer_norm_rms_epsilon")),
        "theta": float(field(r, "llama.rope.freq_base")) if "llama.rope.freq_base" in r.fields else 10000.0,
        "context": int(field(r, "llama.context_length")),
        "d": int(field(r, "llama.embedding_length")),
        "ff": int(field(r, "llama.feed_forward_length")),
    }
    t = {}
    for ten in r.tensors:
        # GGUFReader gives ggml's ne reversed, i.e. numpy row-major (out, in) for matrices.
        t[ten.name] = np.array(ten.data, dtype=np.float64).reshape(
            [int(v) for v in reversed(ten.shape.tolist())]
        )
    names = {
        "token_embd.weight": "model.embed_tokens.weight",
        "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight",
    }
    per_layer = {
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    raw = {}  # GGUF layout under HF names
    for name, arr in t.items():
        if name in names:
            raw[names[name]] = arr
            continue
        _, i, rest = name.split(".", 2)
        stem = rest.rsplit(".", 1)[0]
        raw[f"model.layers.{i}.{per_layer[stem]}.weight"] = arr
    tokens = [bytes(f.parts[i]).decode("utf-8") for f in [r.fields["tokenizer.ggml.tokens"]] for i in f.data]
    sf = r.fields["tokenizer.ggml.scores"]
    scores = [float(sf.parts[i][0]) for i in sf.data]
    tf = r.fields["tokenizer.ggml.token_type"]
    types = [int(tf.parts[i][0]) for i in tf.data]
    return c, raw, tokens, scores, types, {name: ten.tensor_type.name for name, ten in ((x.name, x) for x in r.tensors)}


# ---------------------------------------------------------------------------------------
# Llama-2 SentencePiece tokenization, as llama.cpp's llm_tokenizer_spm does it

def spm_encode(text, vocab, scores, bos=1):
    text = "\u2581" + text.replace(" ", "\u2581")
    syms = list(text)
    while True:
        best = None
        for i in range(len(syms) - 1):
            tid = vocab.get(syms[i] + syms[i + 1])
            if tid is not None and (best is None or scores[tid] > best[0]):
                best = (scores[tid], i)
        if best is None:
            break
        i = best[1]
        syms[i : i + 2] = [syms[i] + syms[i + 1]]
    ids = [bos]
    for s in syms:
        if s in vocab:
            ids.append(vocab[s])
        else:
            ids.extend(vocab["<0x%02X>" % b] for b in s.encode("utf-8"))
    return ids


def llama_tokenizer_json(tokens, scores, types):
    """A tokenizer.json like transformers' LlamaConverter writes for Llama-2 (legacy): BPE with
    byte fallback, merges from the scores as transformers' SentencePieceExtractor orders them."""
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = []
    for piece, pid in vocab.items():
        if types[pid] != 1:
            continue
        local = []
        for j in range(1, len(piece)):
            left, right = piece[:j], piece[j:]
            if left in vocab and right in vocab:
                local.append((left, right, scores[pid]))
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)

    def added(i):
        return {"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": False, "special": True}

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added(0), added(1), added(2)],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>",
            "continuing_subword_prefix": None, "end_of_word_suffix": None,
            "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab,
            "merges": [[a, b] for a, b, _ in merges],
        },
    }


# ---------------------------------------------------------------------------------------

def main():
    out = {"generated_by": "scripts/engine_reference.py (float64 numpy)", "models": {}}

    # GPT-2
    cfg = json.load(open(os.path.join(GPT2_DIR, "config.json")))
    w = {k: v.astype(np.float64) for k, v in load_file(os.path.join(GPT2_DIR, "model.safetensors")).items()}
    vocab = cfg["vocab_size"]
    ids = probe_ids(vocab)
    seqs = [
        # "Hello world! The quick brown fox jumps over the lazy dog." (GPT-2 tokenizer)
        [15496, 995, 0, 383, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13],
        [50256],
        [(i * 7919 + 13) % vocab for i in range(40)],
    ]
    out["models"]["fake-gpt2"] = {
        "probe_ids": ids,
        "sequences": [{"tokens": s, **row_summary(gpt2_logits(w, cfg, s), ids)} for s in seqs],
    }

    # Llama (GGUF), both RoPE layouts
    c, raw, tokens, scores, types, dtypes = read_gguf_llama()
    hf = dict(raw)
    for i in range(c["n_layer"]):
        p = f"model.layers.{i}.self_attn."
        hf[p + "q_proj.weight"] = unpermute(raw[p + "q_proj.weight"], c["n_head"])
        hf[p + "k_proj.weight"] = unpermute(raw[p + "k_proj.weight"], c["n_kv_head"])
    vocab_map = {tok: i for i, tok in enumerate(tokens)}
    sentences = [
        "Hello world",
        "Hello world! The quick brown fox jumps over the lazy dog.",
        "  multiple   spaces and a tab\there",
        "numbers 12345 and unicode: café, 東京, 🙂",
    ]
    tokenized = [{"text": s, "ids": spm_encode(s, vocab_map, scores)} for s in sentences]
    assert tokenized[0]["ids"] == [1, 15043, 3186], tokenized[0]["ids"]  # well-known Llama-2 ids
    nv = len(tokens)
    ids = probe_ids(nv)
    seqs = [
        tokenized[1]["ids"],
        [1],
        [1] + [(i * 7919 + 13) % nv for i in range(40)],
    ]
    rows = []
    for s in seqs:
        a = llama_logits(raw, c, s, rope_interleaved)
        b = llama_logits(hf, c, s, rope_half)
        diff = np.abs(a - b).max()
        assert diff < 1e-9, f"un-permuted weights with half-split RoPE differ by {diff}"
        rows.append({"tokens": s, **row_summary(a, ids)})
    out["models"]["llama-2-tiny-random"] = {
        "probe_ids": ids,
        "sequences": rows,
        "tokenizer": tokenized,
        "gguf_dtypes": dtypes,
    }

    # The same model as an HF Llama directory.
    os.makedirs(HF_LLAMA_DIR, exist_ok=True)
    save_file({k: v.astype(np.float16) for k, v in hf.items()},
              os.path.join(HF_LLAMA_DIR, "model.safetensors"), metadata={"format": "pt"})
    # The GGUF's F16 values are exact in F16; norms were F32 in the GGUF: check nothing was lost.
    for k, v in hf.items():
        assert np.array_equal(v.astype(np.float16).astype(np.float64), v), f"{k} not exact in f16"
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": c["d"],
        "intermediate_size": c["ff"],
        "num_hidden_layers": c["n_layer"],
        "num_attention_heads": c["n_head"],
        "num_key_value_heads": c["n_kv_head"],
        "rms_norm_eps": c["eps"],
        "rope_theta": c["theta"],
        "max_position_embeddings": c["context"],
        "vocab_size": nv,
        "tie_word_embeddings": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "torch_dtype": "float16",
    }
    with open(os.path.join(HF_LLAMA_DIR, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(HF_LLAMA_DIR, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(llama_tokenizer_json(tokens, scores, types), f, ensure_ascii=False)

    with open(FIXTURE, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {FIXTURE} and {HF_LLAMA_DIR}/", file=sys.stderr)


if __name__ == "__main__":
    main()
