#!/usr/bin/env python3
"""PyTorch eager peer of `shardwise train`: the same GPT (pre-norm blocks, causal attention with
biases, GELU (tanh) MLP of 4x width, final LayerNorm, head tied to the token embedding), the same
batch, context and thread count, AdamW; tokens/s of a training step, on the CPU in fp32.

    build/peer-venv/bin/python bench/torch_gpt_peer.py --model tiny --batch 12 --threads 2

Prints one JSON object: {"peer": "pytorch", "model", "batch", "seq", "threads",
"tokens_per_s", "seconds_per_step", "peak_rss_bytes"}; `--compile` runs the model through
`torch.compile` (Inductor's C++ code for the CPU; the compilation is in the first steps, which the
median leaves out); `--profile` then prints each operator's share of 4 more steps to stderr
(torch.profiler), the matrix products' first. Benchmarks only (scripts/install_bench_peers.sh).
"""

import argparse
import json
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {"tiny": (4, 4, 128, 64), "small": (6, 6, 384, 256), "gpt2": (12, 12, 768, 1024)}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.c_attn = nn.Linear(width, 3 * width)
        self.attn_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, heads, width, context, vocab=256):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)

    def forward(self, tokens, targets):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def train_step(model, step_model, optimizer, tokens, targets, bf16=False):
    optimizer.zero_grad(set_to_none=True)
    # bf16: PyTorch's CPU autocast (float32 parameters and optimizer; the products in bf16).
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = step_model(tokens, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def print_profile(step, steps=4):
    """Each operator's share of the self time of `steps` steps, under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    ops = prof.key_averages()
    total = sum(op.self_cpu_time_total for op in ops)
    products = sum(op.self_cpu_time_total for op in ops
                   if op.key in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"))
    print(f"matrix products (mm, addmm, bmm, baddbmm): {100 * products / total:.1f}%",
          file=sys.stderr)
    for op in sorted(ops, key=lambda o: -o.self_cpu_time_total)[:15]:
        print(f"{op.key:60s} {100 * op.self_cpu_time_total / total:5.1f}%", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="steps the median leaves out")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--bf16", action="store_true",
                        help="under torch.autocast('cpu', dtype=torch.bfloat16)")
    parser.add_argument("--profile", action="store_true",
                        help="after the timed steps, profile 4 more and print each operator's "
                             "share of their time (the matrix products' share first) to stderr")
    args = parser.parse_args()
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup is {args.warmup}; expected 0 to --steps - 1 ({args.steps - 1})")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layers, heads, width, context = PRESETS[args.model]
    model = Gpt(layers, heads, width, context)
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(0, 256, (args.batch, context))
    targets = torch.randint(0, 256, (args.batch, context))
    times = []
    for step in range(args.steps):
        start = time.perf_counter()
        loss = train_step(model, step_model, optimizer, tokens, targets, args.bf16)
        times.append(time.perf_counter() - start)
    if args.profile:
        print_profile(lambda: train_step(model, step_model, optimizer, tokens, targets, args.bf16))
    kept = sorted(times[args.warmup:])
    steady = kept[len(kept) // 2]  # median after warm-up
    print(json.dumps({"peer": ("pytorch-compile" if args.compile else "pytorch") +
                      ("-autocast-bf16" if args.bf16 else ""),
                      "model": args.model, "batch": args.batch, "seq": context,
                      "threads": args.threads, "seconds_per_step": steady,
                      "tokens_per_s": args.batch * context / steady,
                      # Linux reports the peak resident set in KiB.
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "loss": float(loss)}))


if __name__ == "__main__":
    main()
