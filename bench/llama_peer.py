#!/usr/bin/env python3
"""transformers peer of `shardwise train` on the Llama family: LlamaForCausalLM (sdpa attention),
or the class the config.json's model_type names (Qwen2, Qwen3, MixtralForCausalLM,
Qwen3MoeForCausalLM), of the same shape as a shardwise model file or preset (its config.json written by
`shardwise ckpt export`, or the sizes given here), the same batch, context and thread count,
fp32, AdamW; tokens/s of a training step and the activations one sequence keeps for backward.

    python bench/llama_peer.py --config DIR/config.json --batch 8 --seq 64 --threads 2 [--compile]

Prints one JSON object: {"peer", "batch", "seq", "threads", "tokens_per_s", "seconds_per_step",
"activation_bytes_per_sequence", "peak_rss_bytes"}. Activations are the bytes of the tensors
autograd saves for backward in one step (torch.autograd.graph.saved_tensors_hooks, each storage
counted once), eager only: a compiled graph saves what Inductor chose, which the hooks do not
see. `--compile` runs the model through torch.compile; its compilation falls in the first steps,
which the median leaves out. Benchmarks only (scripts/install_bench_peers.sh).
"""

import argparse
import json
import os
import resource
import statistics
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def saved_bytes(step):
    """Bytes of the distinct storages autograd saves while `step` runs its forward."""
    seen = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True, help="a Llama config.json")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3, help="steps the median leaves out")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--bf16", action="store_true",
                        help="under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = parser.parse_args()
    if not 0 <= args.warmup < args.steps:
        parser.error(f"--warmup is {args.warmup}; expected 0 to --steps - 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(args.config)))
    config._attn_implementation = "sdpa"
    model = AutoModelForCausalLM.from_config(config).float()
    model.train()
    step_model = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(0, config.vocab_size, (args.batch, args.seq))

    def step():
        optimizer.zero_grad(set_to_none=True)
        # bf16: PyTorch's CPU autocast (float32 parameters and optimizer; the products in bf16).
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = step_model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times[args.warmup:])
    activations = None
    if not args.compile:
        activations = saved_bytes(step) // args.batch
    print(json.dumps({
        "peer": "transformers" + (" compiled" if args.compile else "") +
                (" autocast-bf16" if args.bf16 else ""),
        "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "tokens_per_s": args.batch * args.seq / seconds, "seconds_per_step": seconds,
        "activation_bytes_per_sequence": activations,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main()
