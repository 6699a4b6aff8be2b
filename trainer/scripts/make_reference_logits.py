#!/usr/bin/env python3
"""Generate trainer/fixtures/tiny-qwen2: a tiny random Qwen2 checkpoint and reference numbers.

The Rust model in trainer/src/model is checked against Hugging Face transformers on this fixture
(trainer/tests/it/model_logits.rs). Run once and commit the output; rerunning with the same
versions reproduces it byte for byte (seeded).

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch transformers safetensors numpy
    /tmp/refvenv/bin/python trainer/scripts/make_reference_logits.py trainer/fixtures/tiny-qwen2

What it writes into the output directory:
  config.json, model.safetensors      f32 weights (Qwen2ForCausalLM.save_pretrained)
  tokenizer.json                      a word-level tokenizer over the 64-token vocabulary
  bf16/                               the same weights stored as bfloat16 (+ config, tokenizer)
  sharded/                            the f32 weights split into shards + model.safetensors.index.json
  reference.json                      inputs, logits (float64 forward) of the f32 and bf16 weights,
                                      and greedy continuations from model.generate

Every parameter is redrawn (norm weights near 1, biases non-zero) so that no tensor kind is left
at a trivial initial value that would hide a loading or forward bug. The reference forward runs in
float64 with eager attention, one unpadded row at a time (see logits_f64).
"""

import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import Qwen2Config, Qwen2ForCausalLM

VOCAB = 64


def build_model() -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        hidden_act="silu",
        bos_token_id=None,
        eos_token_id=1,
        pad_token_id=0,
        attn_implementation="eager",
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    return model.eval()


def build_tokenizer() -> Tokenizer:
    words = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(VOCAB - 3)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<pad>", "<eos>"])
    return tok


def inputs():
    # Three rows, left-padded to 10 tokens with pad id 0 (mask 0).
    rows = [
        [5, 9, 13, 17, 21, 25, 29, 33, 37, 41],
        [7, 3, 60, 12, 12, 44],
        [63, 2, 8, 30],
    ]
    length = max(len(r) for r in rows)
    ids = [[0] * (length - len(r)) + r for r in rows]
    mask = [[0] * (length - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def logits_f64(model, ids, mask):
    """Logits per position of the padded batch; null at padded positions.

    Each row runs alone without its padding: in float64, transformers' eager attention casts the
    mask's finfo(float64).min to float32 -inf, so fully masked (padding) query rows become NaN
    and the NaN reaches the real positions through the next layer's values. Without padding
    the row sees positions 0..n-1 while the padded Rust batch uses pad..pad+n-1; RoPE depends
    only on relative positions, so the logits agree, and the test covers that invariance too.
    """
    m64 = Qwen2ForCausalLM(model.config).eval()
    m64.load_state_dict(model.state_dict())
    m64 = m64.to(torch.float64)
    rows = []
    for row_ids, row_mask in zip(ids, mask):
        real = [t for t, m in zip(row_ids, row_mask) if m]
        with torch.no_grad():
            out = m64(input_ids=torch.tensor([real])).logits[0].tolist()
        pad = len(row_ids) - len(real)
        rows.append([None] * pad + out)
    return rows


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "trainer/fixtures/tiny-qwen2"
    if os.path.exists(out):
        shutil.rmtree(out)
    model = build_model()
    model.save_pretrained(out, safe_serialization=True)
    tok = build_tokenizer()
    tok.save(os.path.join(out, "tokenizer.json"))

    sharded = os.path.join(out, "sharded")
    model.save_pretrained(sharded, safe_serialization=True, max_shard_size="40KB")
    tok.save(os.path.join(sharded, "tokenizer.json"))

    bf16_dir = os.path.join(out, "bf16")
    os.makedirs(bf16_dir)
    state = load_file(os.path.join(out, "model.safetensors"))
    save_file({k: v.to(torch.bfloat16) for k, v in state.items()},
              os.path.join(bf16_dir, "model.safetensors"), metadata={"format": "pt"})
    shutil.copy(os.path.join(out, "config.json"), bf16_dir)
    tok.save(os.path.join(bf16_dir, "tokenizer.json"))
    bf16_model = build_model()
    bf16_model.load_state_dict({k: v.to(torch.bfloat16).to(torch.float32) for k, v in state.items()})

    ids, mask = inputs()
    prompts = [[5, 9, 13], [40, 41, 42, 43, 44], [8]]
    greedy = []
    with torch.no_grad():
        for p in prompts:
            g = model.to(torch.float64).generate(
                torch.tensor([p]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                pad_token_id=0, attention_mask=torch.ones(1, len(p), dtype=torch.long))
            greedy.append(g[0, len(p):].tolist())
    model = model.to(torch.float32)
    reference = {
        "generator": {
            "script": "trainer/scripts/make_reference_logits.py",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "input_ids": ids,
        "attention_mask": mask,
        "logits": logits_f64(model, ids, mask),
        "logits_bf16_weights": logits_f64(bf16_model, ids, mask),
        "greedy_prompts": prompts,
        "greedy_completions": greedy,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(reference, f, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    print("wrote", out, "with", sum(p.numel() for p in model.parameters()), "parameters")


if __name__ == "__main__":
    main()
