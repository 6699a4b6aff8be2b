#!/usr/bin/env python3
"""The PyTorch comparison point for swerve's trainer benchmark (trainer/benches/train_step.rs).

Runs the same GRPO-shaped step as the Rust benchmark, on CPU, with transformers'
Qwen2ForCausalLM built from the same config.json (random init) and torch.optim.AdamW:

    logits of the last C+1 positions (TRL's logits_to_keep) -> / temperature -> log_softmax ->
    gather the C completion tokens -> loss = -(logps * advantages).mean() -> backward ->
    clip_grad_norm_(1.0) -> AdamW step -> zero_grad

and, with --gen-tokens, batched sampling with the KV cache (model.generate); --gen-only skips the
training step. Prints one JSON object on stdout. Needs torch and transformers (e.g. a venv: pip install torch transformers).

    python3 benches/pytorch/train_step.py --config trainer/assets/tiny/config.json \
        --batch 8 --seq 256 --completion 128 --steps 5 --gen-tokens 64 --threads 2
"""

import argparse
import json
import resource
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="a Qwen2 config.json")
    ap.add_argument("--batch", type=int, default=8, help="rows B")
    ap.add_argument("--seq", type=int, default=256, help="tokens per row S (prompt + completion)")
    ap.add_argument("--completion", type=int, default=128, help="completion tokens C per row")
    ap.add_argument("--steps", type=int, default=5, help="timed training steps (after one warm-up)")
    ap.add_argument("--gen-prompt", type=int, default=64, help="prompt tokens per row for generation")
    ap.add_argument("--gen-tokens", type=int, default=0, help="new tokens per row (0: skip)")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--attn", default="eager", help="attn_implementation (eager or sdpa)")
    ap.add_argument("--gen-only", action="store_true", help="time generation only, no training step")
    ap.add_argument(
        "--matmul-peak",
        action="store_true",
        help="time only torch's matrix product on the model's linear-layer shapes (B*S rows)",
    )
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with open(args.config) as f:
        config = Qwen2Config(**json.load(f))
    if args.matmul_peak:
        print(json.dumps(matmul_peak(config, args.batch * args.seq, args.threads)))
        return
    config._attn_implementation = args.attn
    model = Qwen2ForCausalLM(config).float()
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)

    b, s, c = args.batch, args.seq, args.completion
    out = {
        "impl": f"pytorch {torch.__version__} ({args.attn})",
        "config": args.config,
        "params": params,
        "batch": b,
        "seq": s,
        "completion": c,
        "threads": args.threads,
    }
    if not args.gen_only:
        ids = torch.randint(0, config.vocab_size, (b, s))
        mask = torch.ones(b, s, dtype=torch.long)
        advantages = torch.randn(b, 1)

        def step() -> None:
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=c + 1).logits
            logits = logits[:, :-1, :] / 1.0
            logps = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, -c:].unsqueeze(-1)).squeeze(-1)
            loss = -(logps * advantages).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()  # warm-up
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        step_s = sorted(times)[len(times) // 2]
        out["step_s"] = step_s
        out["train_tok_s"] = b * s / step_s

    if args.gen_tokens > 0:
        model.eval()
        prompt = torch.randint(2, config.vocab_size, (b, args.gen_prompt))
        with torch.no_grad():
            gen = dict(
                max_new_tokens=args.gen_tokens,
                min_new_tokens=args.gen_tokens,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                pad_token_id=config.pad_token_id,
                use_cache=True,
            )
            model.generate(prompt, attention_mask=torch.ones_like(prompt), **{**gen, "max_new_tokens": 2, "min_new_tokens": 2})
            t0 = time.perf_counter()
            model.generate(prompt, attention_mask=torch.ones_like(prompt), **gen)
            gen_s = time.perf_counter() - t0
        out["gen_s"] = gen_s
        out["gen_tok_s"] = b * args.gen_tokens / gen_s

    # ru_maxrss is in KiB on Linux.
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def matmul_peak(config: Qwen2Config, tokens: int, threads: int) -> dict:
    """The best rate of torch's matrix product (MKL on x86) over the shapes of the model's
    linear layers with `tokens` rows, forward and weight-gradient: best of 10 after warm-up."""
    h, i = config.hidden_size, config.intermediate_size
    kv = config.num_key_value_heads * (h // config.num_attention_heads)
    shapes = [(tokens, h, h), (tokens, h, kv), (tokens, h, i), (tokens, i, h), (h, tokens, i), (i, tokens, h)]
    rates = {}
    for m, k, n in shapes:
        a, b = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            a @ b
        best = float("inf")
        for _ in range(10):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
        rates[f"{m}x{k}x{n}"] = 2 * m * k * n / best / 1e9
    return {
        "impl": f"pytorch {torch.__version__} matmul",
        "threads": threads,
        "matmul_gflops": max(rates.values()),
        "per_shape_gflops": rates,
    }


if __name__ == "__main__":
    main()
