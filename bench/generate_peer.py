#!/usr/bin/env python3
"""transformers' generate() at batch 1 on a Hugging Face folder, greedy, fp32, as a peer of
`shardwise generate`: the seconds of a continuation of NEW tokens and of one token (the prefill),
the median of ROUNDS after a warm-up, and the ids. Prints one JSON object."""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", required=True)
    parser.add_argument("--prompt-ids", required=True)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.folder, dtype=torch.float32).eval()
    ids = torch.tensor([[int(i) for i in args.prompt_ids.split(",")]])

    def seconds(new):
        with torch.no_grad():
            start = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=new, min_new_tokens=new, pad_token_id=0)
            return time.perf_counter() - start, out[0, ids.shape[1]:].tolist()

    seconds(args.new)  # warm-up
    whole = [seconds(args.new) for _ in range(args.rounds)]
    first = [seconds(1)[0] for _ in range(args.rounds)]
    total = statistics.median(t for t, _ in whole)
    prefill = statistics.median(first)
    print(json.dumps({"seconds": total, "prefill_seconds": prefill,
                      "tokens_per_s": args.new / total,
                      "decode_tokens_per_s": (args.new - 1) / max(total - prefill, 1e-9),
                      "ids": whole[0][1], "torch": torch.__version__}))


if __name__ == "__main__":
    main()
