#!/usr/bin/env python3
"""`shardwise ckpt import` refuses a GPT-2 whose config.json, as transformers writes it, asks for
a computation shardwise's GPT does not do, naming the field; and imports one it does.

  hf_gpt2_config_test.py SHARDWISE MODEL

Trains MODEL (a trainer model file) for a step, exports it, then rewrites the export's
config.json with transformers' GPT2Config.save_pretrained for each setting below. Needs only
transformers (no PyTorch); exits 77 (skipped) where it is missing.
"""
import os
import subprocess
import sys
import tempfile

try:
    from transformers import GPT2Config
except ImportError as missing:  # optional: the suite passes without it
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)


def run(*args, check=True):
    result = subprocess.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result


def main():
    shardwise, model = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as folder:
        ckpt = os.path.join(folder, "ckpt")
        run(shardwise, "train", "--model", model, "--steps", "1", "--batch", "4", "--save", ckpt)
        hf = os.path.join(folder, "hf")
        run(shardwise, "ckpt", "export", ckpt, "--format", "hf-gpt2", "--out", hf)
        shape = dict(n_layer=2, n_head=2, n_embd=32, n_positions=16, vocab_size=256,
                     activation_function="gelu_new", layer_norm_epsilon=1e-5)
        refused = {
            "scale_attn_by_inverse_layer_idx": dict(scale_attn_by_inverse_layer_idx=True),
            "scale_attn_weights": dict(scale_attn_weights=False),
            "add_cross_attention": dict(add_cross_attention=True),
            "tie_word_embeddings": dict(tie_word_embeddings=False),
            "activation_function": dict(activation_function="relu"),
            "layer_norm_epsilon": dict(layer_norm_epsilon=1e-6),
            "n_inner": dict(n_inner=100),
        }
        for n, (field, setting) in enumerate(refused.items()):
            GPT2Config(**{**shape, **setting}).save_pretrained(hf)
            result = run(shardwise, "ckpt", "import", hf, "--format", "hf-gpt2", "--out",
                         os.path.join(folder, f"refused{n}"), check=False)
            if result.returncode != 2 or f'"{field}"' not in result.stderr:
                sys.exit(f"{setting}: status {result.returncode}, {result.stderr!r}")
            print(f"{setting}: refused: {result.stderr.strip()}")
        GPT2Config(**shape).save_pretrained(hf)
        result = run(shardwise, "ckpt", "import", hf, "--format", "hf-gpt2", "--out",
                     os.path.join(folder, "imported"), check=False)
        if result.returncode != 0:
            sys.exit(f"transformers' own config of this GPT-2 was refused: {result.stderr}")
        print("transformers' config of the same GPT-2: imported")
    print("ok")


if __name__ == "__main__":
    main()
