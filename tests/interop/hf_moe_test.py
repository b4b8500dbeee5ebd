#!/usr/bin/env python3
"""Mixtral and Qwen3-MoE in and out of Hugging Face, held against transformers'
MixtralForCausalLM and Qwen3MoeForCausalLM.

  hf_moe_test.py SHARDWISE FIXTURES

For each family:
1. Models transformers makes and saves with save_pretrained (random weights; each expert's
   matrices their own tensors, as transformers writes them; top 1, 2 and 3 of 4 experts, Qwen3-MoE
   with and without norm_topk_prob; float32 and bfloat16 files) import with `ckpt import --format
   hf-mixtral|hf-qwen3_moe` and give transformers' loss (1e-4): the router's choices included,
   since a token sent to another expert moves the loss by far more.
2. A model shardwise trains on ZeRO-3 over two ranks is exported; transformers computes the
   loss shardwise reports, and importing the export and exporting it again gives the same file
   byte for byte.
3. A config asking for the auxiliary load-balancing loss (output_router_logits) gives
   transformers' language-model loss plus router_aux_loss_coef times its aux_loss.
4. `shardwise generate` continues a prompt, encoded by a byte-level BPE tokenizer.json, with
   transformers' greedy tokens.
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
    from transformers import (MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig,
                              Qwen3MoeForCausalLM)
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

FAMILIES = {"mixtral": (MixtralConfig, MixtralForCausalLM),
            "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM)}
NEW_TOKENS = 24


def config_of(family, **fields):
    config_class, _ = FAMILIES[family]
    base = dict(hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                rms_norm_eps=1e-6, rope_theta=1000000.0, initializer_range=0.2,
                num_local_experts=4)
    if family == "qwen3_moe":
        base.update(moe_intermediate_size=32, head_dim=16)
    base.update(fields)
    return config_class(**base)


def made_by_transformers(shardwise, folder, family, data):
    _, model_class = FAMILIES[family]
    shapes = [dict(num_experts_per_tok=2, tie_word_embeddings=False),
              dict(num_experts_per_tok=1, tie_word_embeddings=True),
              dict(num_experts_per_tok=3, tie_word_embeddings=False)]
    if family == "qwen3_moe":
        shapes[0]["norm_topk_prob"] = True
        shapes[2]["norm_topk_prob"] = False
        # Dense layers among the routed ones: layers 1 and 3 route, 3 is listed dense.
        shapes.append(dict(num_experts_per_tok=2, tie_word_embeddings=False, num_hidden_layers=4,
                           decoder_sparse_step=2, mlp_only_layers=[3], norm_topk_prob=True))
    for i, shape in enumerate(shapes):
        for dtype in (torch.float32, torch.bfloat16):
            model = model_class(config_of(family, vocab_size=256, **shape))
            with torch.no_grad():
                for name, parameter in model.named_parameters():
                    if "q_norm" in name or "k_norm" in name:
                        parameter.add_(0.3 * torch.randn_like(parameter))
            made = os.path.join(folder, f"{family}_made_{i}_{str(dtype)[6:]}")
            model.to(dtype).save_pretrained(made)
            converted = made + "_ckpt"
            run(shardwise, "ckpt", "import", made, "--format", "hf-" + family, "--out", converted)
            loss = compare_loss(shardwise, converted, made, model_class, data,
                           f"transformers' {family} {i} {dtype}")
            if abs(loss - 5.545) < 0.3:
                sys.exit(f"{family} {i}'s loss {loss} is too close to the uniform guess")
            if dtype == torch.float32 and "decoder_sparse_step" in shape:
                # The dense layers' gate_proj, up_proj and down_proj export as they came.
                exported = made + "_exported"
                run(shardwise, "ckpt", "export", converted, "--format", "hf-" + family,
                    "--out", exported)
                compare_loss(shardwise, converted, exported, model_class, data,
                             f"{family} {i} exported")
                expect_round_trip(shardwise, exported, "hf-" + family, f"{family} {i}")


def with_auxiliary_loss(shardwise, folder, family, data, **fields):
    """A model whose config asks for the auxiliary load-balancing loss (output_router_logits,
    router_aux_loss_coef): shardwise's loss is transformers' language-model loss plus the
    coefficient times its aux_loss, window by window."""
    _, model_class = FAMILIES[family]
    model = model_class(config_of(family, vocab_size=256, num_experts_per_tok=2,
                                  output_router_logits=True, router_aux_loss_coef=0.3, **fields))
    made = os.path.join(folder, f"{family}_aux{len(fields)}")
    model.save_pretrained(made)
    converted = made + "_ckpt"
    run(shardwise, "ckpt", "import", made, "--format", "hf-" + family, "--out", converted)
    ours = json.loads(run(shardwise, "ckpt", "loss", converted, "--data", data, "--json"))
    model = model_class.from_pretrained(made, dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    tokens = torch.tensor(list(open(data, "rb").read()), dtype=torch.long)
    seq, totals, auxes = ours["seq"], [], []
    with torch.no_grad():
        for w in range(ours["windows"]):
            window = tokens[w * seq: w * seq + seq + 1]
            out = model(window[:-1].unsqueeze(0), output_router_logits=True)
            lm = torch.nn.functional.cross_entropy(out.logits[0], window[1:]).item()
            auxes.append(out.aux_loss.item())
            totals.append(lm + 0.3 * out.aux_loss.item())
    theirs = sum(totals) / len(totals)
    print(f"{family} with its auxiliary loss (mean {sum(auxes) / len(auxes):.5f}): shardwise "
          f"loss {ours['loss']:.7f}, transformers {theirs:.7f}")
    if abs(theirs - ours["loss"]) > 1e-4:
        sys.exit(f"{family} with its auxiliary loss: losses differ by {abs(theirs - ours['loss'])}")
    if sum(auxes) / len(auxes) * 0.3 < 1e-3:
        sys.exit(f"{family}: the auxiliary loss is too small to tell")


def trained_by_shardwise(shardwise, folder, family, data):
    _, model_class = FAMILIES[family]
    ckpt = os.path.join(folder, family + "_trained")
    preset = "mixtral-tiny" if family == "mixtral" else "qwen3-moe-tiny"
    run(shardwise, "train", "--model", preset, "--steps", "30", "--data", data,
        "--mesh", "fsdp=2", "--zero", "3", "--lr", "3e-3", "--save", ckpt)
    hf = os.path.join(folder, family + "_exported")
    run(shardwise, "ckpt", "export", ckpt, "--format", "hf-" + family, "--out", hf)
    config = json.load(open(os.path.join(hf, "config.json")))
    if config["model_type"] != family:
        sys.exit(f"the export says model_type {config['model_type']}")
    loss = compare_loss(shardwise, ckpt, hf, model_class, data, f"{family} trained on fsdp=2")
    if loss > 4.0:
        sys.exit(f"the trained {family}'s loss {loss} is no better than chance")
    expect_round_trip(shardwise, hf, "hf-" + family, family)


def generated(shardwise, folder, family, tokenizer_file):
    _, model_class = FAMILIES[family]
    tokenizer = Tokenizer.from_file(tokenizer_file)
    vocab = tokenizer.get_vocab_size()
    end = tokenizer.token_to_id("<|endoftext|>")
    model = model_class(config_of(family, vocab_size=vocab + vocab % 4, num_experts_per_tok=2,
                                  bos_token_id=end, eos_token_id=end))
    hf = os.path.join(folder, family + "_bpe")
    model.save_pretrained(hf)
    shutil.copy(tokenizer_file, os.path.join(hf, "tokenizer.json"))
    prompt = "The licensee shall   keep 1234567 copies, café 東京!"
    prompt_ids = tokenizer.encode(prompt).ids
    expect_greedy_tokens(shardwise, model, hf, prompt, prompt_ids, end, NEW_TOKENS,
                         ("model=1", "model=2"), family)


def main():
    shardwise, fixtures = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "text.txt")
        with open(data, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog; pack my box. " * 40)
        for family in FAMILIES:
            made_by_transformers(shardwise, folder, family, data)
            with_auxiliary_loss(shardwise, folder, family, data)
            if family == "qwen3_moe":  # over the routed layers alone
                with_auxiliary_loss(shardwise, folder, family, data, num_hidden_layers=3,
                                    decoder_sparse_step=2)
            trained_by_shardwise(shardwise, folder, family, data)
            generated(shardwise, folder, family, os.path.join(fixtures, "gpt2.tokenizer.json"))
    print("ok")


if __name__ == "__main__":
    main()
