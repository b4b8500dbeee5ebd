#!/usr/bin/env python3
"""Qwen2 and Qwen3 in and out of Hugging Face, held against transformers' Qwen2ForCausalLM and
Qwen3ForCausalLM.

  hf_qwen_test.py SHARDWISE FIXTURES

For each family:
1. Models transformers makes and saves (random weights; Qwen2's biases on q, k and v; Qwen3's
   norms of queries and keys, with and without attention_bias, a head_dim other than
   hidden / heads; grouped-query attention, tied and untied heads; float32 and bfloat16 files)
   import with `ckpt import --format hf-qwen2|hf-qwen3` and give transformers' loss (1e-4).
2. A model shardwise trains on a tensor-parallel layout whose key/value heads are replicated
   (model=4 of 2) is exported; transformers computes the loss shardwise reports, and importing
   the export and exporting it again gives the same file byte for byte.
3. `shardwise generate` continues a prompt, encoded by a byte-level BPE tokenizer.json, with
   transformers' greedy tokens on model=1, 2 and 4.
Exits 77 (skipped) where PyTorch, transformers or tokenizers is missing.
"""
import json
import os
import shutil
import sys
import tempfile

from interop_common import compare_loss, expect_greedy_tokens, expect_round_trip, run

try:
    import torch
    from tokenizers import Tokenizer
    from transformers import (Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

FAMILIES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
NEW_TOKENS = 24


def made_by_transformers(shardwise, folder, family, data):
    config_class, model_class = FAMILIES[family]
    shapes = [dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
              dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True)]
    if family == "qwen3":
        shapes.append(dict(num_attention_heads=6, num_key_value_heads=2, head_dim=12,
                           attention_bias=True, tie_word_embeddings=False))
    for i, shape in enumerate(shapes):
        for dtype in (torch.float32, torch.bfloat16):
            config = config_class(vocab_size=256, hidden_size=48, intermediate_size=96,
                                  num_hidden_layers=2, max_position_embeddings=64,
                                  rms_norm_eps=1e-6, rope_theta=1000000.0,
                                  initializer_range=0.2, **shape)
            model = model_class(config)
            # Biases start at zero and norms at one: give them values of their own, so that a
            # bias or a norm read wrongly changes the loss.
            with torch.no_grad():
                for name, parameter in model.named_parameters():
                    if name.endswith(".bias") or "q_norm" in name or "k_norm" in name:
                        parameter.add_(0.3 * torch.randn_like(parameter))
            made = os.path.join(folder, f"{family}_made_{i}_{str(dtype)[6:]}")
            model.to(dtype).save_pretrained(made)
            converted = made + "_ckpt"
            run(shardwise, "ckpt", "import", made, "--format", "hf-" + family, "--out", converted)
            loss = compare_loss(shardwise, converted, made, model_class, data,
                           f"transformers' {family} {i} {dtype}")
            if abs(loss - 5.545) < 0.5:
                sys.exit(f"{family} {i}'s loss {loss} is too close to the uniform guess")


def trained_by_shardwise(shardwise, folder, family, data):
    _, model_class = FAMILIES[family]
    ckpt = os.path.join(folder, family + "_trained")
    run(shardwise, "train", "--model", family + "-tiny", "--steps", "30", "--data", data,
        "--mesh", "data=2,model=4", "--zero", "1", "--lr", "3e-3", "--save", ckpt)
    hf = os.path.join(folder, family + "_exported")
    run(shardwise, "ckpt", "export", ckpt, "--format", "hf-" + family, "--out", hf)
    config = json.load(open(os.path.join(hf, "config.json")))
    if config["model_type"] != family:
        sys.exit(f"the export says model_type {config['model_type']}")
    loss = compare_loss(shardwise, ckpt, hf, model_class, data, f"{family} trained on data=2,model=4")
    if loss > 4.0:
        sys.exit(f"the trained {family}'s loss {loss} is no better than chance")
    expect_round_trip(shardwise, hf, "hf-" + family, family)


def generated(shardwise, folder, family, tokenizer_file):
    config_class, model_class = FAMILIES[family]
    tokenizer = Tokenizer.from_file(tokenizer_file)
    vocab = tokenizer.get_vocab_size()
    end = tokenizer.token_to_id("<|endoftext|>")
    extra = dict(head_dim=24) if family == "qwen3" else {}
    model = model_class(config_class(
        vocab_size=vocab + vocab % 4, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        initializer_range=0.2, tie_word_embeddings=family == "qwen2", rope_theta=1000000.0,
        bos_token_id=end, eos_token_id=end, **extra))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".bias") or "q_norm" in name or "k_norm" in name:
                parameter.add_(0.3 * torch.randn_like(parameter))
    hf = os.path.join(folder, family + "_bpe")
    model.save_pretrained(hf)
    shutil.copy(tokenizer_file, os.path.join(hf, "tokenizer.json"))
    prompt = "The licensee shall   keep 1234567 copies, café 東京!"
    prompt_ids = tokenizer.encode(prompt).ids
    expect_greedy_tokens(shardwise, model, hf, prompt, prompt_ids, end, NEW_TOKENS,
                         ("model=1", "model=2", "model=4"), family)


def main():
    shardwise, fixtures = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "text.txt")
        with open(data, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog; pack my box. " * 40)
        for family in FAMILIES:
            made_by_transformers(shardwise, folder, family, data)
            trained_by_shardwise(shardwise, folder, family, data)
            generated(shardwise, folder, family, os.path.join(fixtures, "gpt2.tokenizer.json"))
    print("ok")


if __name__ == "__main__":
    main()
