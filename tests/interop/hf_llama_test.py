#!/usr/bin/env python3
"""The Llama family in and out of Hugging Face, held against transformers' LlamaForCausalLM.

  hf_llama_test.py SHARDWISE MODEL_FILE

1. A model trained on a tensor-parallel layout whose key/value heads are replicated (model=4 of
   2 key/value heads) is exported with `ckpt export --format hf-llama`; transformers loads the
   folder and computes the loss `shardwise ckpt loss` reports, within 1e-4; importing the export
   and exporting it again gives the same file byte for byte.
2. Models transformers itself makes and saves (random weights; with and without grouped-query
   attention, tied and untied heads, Llama 3's rope scaling; float32, float16 and bfloat16
   files, and a sharded save) import with `ckpt import --format hf-llama` and give
   transformers' loss.
3. One of those folders fine-tuned with `train --init-from` on model=2 and exported: transformers
   computes the lower loss shardwise reports.
Exits 77 (skipped) where PyTorch or transformers is missing.
"""
import json
import os
import sys
import tempfile

from interop_common import run, windows_loss

try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)


def transformers_loss(folder, data, seq, windows):
    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                             attn_implementation="sdpa")
    return windows_loss(model, data, seq, windows)


def compare(shardwise, ckpt, hf, data, what):
    ours = json.loads(run(shardwise, "ckpt", "loss", ckpt, "--data", data, "--json"))
    theirs = transformers_loss(hf, data, ours["seq"], ours["windows"])
    print(f"{what}: shardwise loss {ours['loss']:.7f}, transformers loss {theirs:.7f}")
    if abs(theirs - ours["loss"]) > 1e-4:
        sys.exit(f"{what}: losses differ by {abs(theirs - ours['loss'])}")
    return ours


def main():
    shardwise, model_file = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "text.txt")
        with open(data, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog; pack my box. " * 40)
        ckpt = os.path.join(folder, "ckpt")
        run(shardwise, "train", "--model", model_file, "--steps", "30", "--data", data,
            "--mesh", "data=2,model=4", "--zero", "1", "--lr", "3e-3", "--save", ckpt)
        hf = os.path.join(folder, "hf")
        run(shardwise, "ckpt", "export", ckpt, "--format", "hf-llama", "--out", hf)
        ours = compare(shardwise, ckpt, hf, data, "trained on data=2,model=4")
        if ours["loss"] > 4.0:
            sys.exit(f"the trained model's loss {ours['loss']} is no better than chance")
        imported = os.path.join(folder, "imported")
        run(shardwise, "ckpt", "import", hf, "--format", "hf-llama", "--out", imported,
            "--ranks", "3")
        again = os.path.join(folder, "again")
        run(shardwise, "ckpt", "export", imported, "--format", "hf-llama", "--out", again)
        if open(os.path.join(hf, "model.safetensors"), "rb").read() != \
                open(os.path.join(again, "model.safetensors"), "rb").read():
            sys.exit("export, import, export does not give back the same file")

        shapes = [
            dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False),
            dict(num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True),
            dict(num_attention_heads=6, num_key_value_heads=1, tie_word_embeddings=True,
                 head_dim=8, rope_theta=500000.0,
                 rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                   high_freq_factor=4.0, original_max_position_embeddings=8)),
        ]
        for i, shape in enumerate(shapes):
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                config = LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
                                     num_hidden_layers=2, max_position_embeddings=64,
                                     rms_norm_eps=1e-5, initializer_range=0.2, **shape)
                model = LlamaForCausalLM(config).to(dtype)
                made = os.path.join(folder, f"made_{i}_{str(dtype)[6:]}")
                model.save_pretrained(made)
                converted = os.path.join(folder, f"converted_{i}_{str(dtype)[6:]}")
                run(shardwise, "ckpt", "import", made, "--format", "hf-llama", "--out",
                    converted)
                loss = compare(shardwise, converted, made, data,
                               f"transformers' model {i} {dtype}")["loss"]
                # Weights large enough that attention, rotation and norms change the loss: a
                # model near the uniform guess (ln 256 = 5.545) would hide a wrong detail.
                if abs(loss - 5.545) < 0.5:
                    sys.exit(f"model {i}'s loss {loss} is too close to the uniform guess")
        # transformers' sharded save (model.safetensors.index.json and its parts) of the last
        # model imports with the same loss.
        sharded = os.path.join(folder, "sharded")
        model.save_pretrained(sharded, max_shard_size="100KB")
        if not os.path.exists(os.path.join(sharded, "model.safetensors.index.json")):
            sys.exit("transformers did not shard the model: the test would not test sharding")
        sharded_ckpt = os.path.join(folder, "sharded_ckpt")
        run(shardwise, "ckpt", "import", sharded, "--format", "hf-llama", "--out", sharded_ckpt)
        compare(shardwise, sharded_ckpt, sharded, data, "transformers' sharded save")
        # Fine-tuning in one command: transformers' model trained on model=2 from its folder,
        # exported, and transformers computes the fine-tuned loss as shardwise does.
        tuned = os.path.join(folder, "tuned")
        run(shardwise, "train", "--init-from", made, "--steps", "10", "--data", data,
            "--mesh", "model=2", "--lr", "1e-3", "--save", tuned)
        tuned_hf = os.path.join(folder, "tuned_hf")
        run(shardwise, "ckpt", "export", tuned, "--format", "hf-llama", "--out", tuned_hf)
        before = compare(shardwise, converted, made, data, "before fine-tuning")["loss"]
        after = compare(shardwise, tuned, tuned_hf, data, "fine-tuned with --init-from")["loss"]
        if not after < before:
            sys.exit(f"fine-tuning did not lower the loss: {before} to {after}")
    print("ok")


if __name__ == "__main__":
    main()
