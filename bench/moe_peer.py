#!/usr/bin/env python3
"""transformers' eager MixtralSparseMoeBlock (its loop over the experts) forward and backward:
   moe_peer.py TOKENS HIDDEN EXPERT_WIDTH EXPERTS K THREADS
One JSON line: the median milliseconds over 7 timed calls after 2 warm ones, float32, the block's
input and parameters' gradients computed as the layer's backward computes them."""
import json
import sys
import time

import torch
from transformers import MixtralConfig
from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock


def main():
    tokens, hidden, width, experts, k, threads = (int(a) for a in sys.argv[1:7])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = MixtralConfig(hidden_size=hidden, intermediate_size=width,
                           num_local_experts=experts, num_experts_per_tok=k)
    block = MixtralSparseMoeBlock(config)
    with torch.no_grad():
        for parameter in block.parameters():
            parameter.normal_(0.0, 0.02)
    x = torch.randn(1, tokens, hidden, requires_grad=True)
    dout = torch.randn(1, tokens, hidden)
    times = []
    for call in range(9):
        block.zero_grad()
        x.grad = None
        start = time.perf_counter()
        out = block(x)
        out.backward(dout)
        took = (time.perf_counter() - start) * 1000
        if call >= 2:
            times.append(took)
    times.sort()
    print(json.dumps({"tokens": tokens, "hidden": hidden, "expert_width": width,
                      "experts": experts, "k": k, "threads": threads,
                      "transformers_ms": round(times[len(times) // 2], 3),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
