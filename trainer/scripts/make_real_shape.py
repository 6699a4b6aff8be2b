#!/usr/bin/env python3
"""A random-weight checkpoint of a real model's shape and its logits from transformers.

    python3 trainer/scripts/make_real_shape.py OUT [--shape qwen2.5-0.5b|qwen2.5-0.5b-untied|llama-gqa]

Writes OUT/config.json and OUT/model.safetensors (Qwen2ForCausalLM / LlamaForCausalLM
save_pretrained, float32) and OUT/reference.json: two rows of token ids, the logits of each
row's last position over the whole vocabulary and the log-sum-exp of every position, from a
float32 eager-attention forward on the CPU. `trainer/examples/real_shape.rs` loads the same
folder with swerve's model and compares (trainer/scripts/real-shape-check.sh runs both).
Norm weights and biases are redrawn so that none is left at a trivial value. Nothing it
writes is committed: the Qwen2.5-0.5B shape is 2 GB of weights.
"""

import argparse
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

SHAPES = {
    # Qwen2.5-0.5B's config.json: 24 layers, hidden 896, 14/2 heads, tied embeddings, q/k/v
    # biases, rope_theta 1e6.
    "qwen2.5-0.5b": (
        Qwen2ForCausalLM,
        Qwen2Config(
            vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
            num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
            rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
            bos_token_id=151643, eos_token_id=151643,
        ),
    ),
    "qwen2.5-0.5b-untied": (
        Qwen2ForCausalLM,
        Qwen2Config(
            vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=4,
            num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
            rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
            bos_token_id=151643, eos_token_id=151643,
        ),
    ),
    # A Llama with 3 query heads per KV head, no biases, rope_theta 5e5, eps 1e-5.
    "llama-gqa": (
        LlamaForCausalLM,
        LlamaConfig(
            vocab_size=32000, hidden_size=384, intermediate_size=1024, num_hidden_layers=4,
            num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
            rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
            bos_token_id=1, eos_token_id=2,
        ),
    ),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--shape", default="qwen2.5-0.5b", choices=sorted(SHAPES))
    args = parser.parse_args()
    cls, config = SHAPES[args.shape]
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True, max_shard_size="10GB")
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (2, 12), generator=generator)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    reference = {
        "shape": args.shape,
        "torch": torch.__version__,
        "input_ids": ids.tolist(),
        "last_logits": logits[:, -1, :].tolist(),
        "logsumexp": torch.logsumexp(logits, dim=-1).tolist(),
    }
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(reference, f)
    print(f"{args.shape}: {sum(p.numel() for p in model.parameters())} parameters -> {args.out}")


if __name__ == "__main__":
    main()
