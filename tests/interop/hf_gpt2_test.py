#!/usr/bin/env python3
"""A trained checkpoint leaves as Hugging Face GPT-2 weights that transformers computes the same
loss with, and comes back in with the same values.

  hf_gpt2_test.py SHARDWISE

Trains the tiny GPT for a few steps on two tensor-parallel ranks (so that the export reads
sharded arrays), exports it, loads the export with transformers' GPT2LMHeadModel and compares
its loss on a file's tokens with `shardwise ckpt loss` (within 1e-4); imports the export on
three ranks and checks that exporting the import gives the same file, byte for byte, and the
same loss. A transposed square weight would change the loss, not a shape. Exits 77 (skipped)
where PyTorch or transformers is missing.
"""
import json
import os
import sys
import tempfile

from interop_common import run, windows_loss

try:
    import torch
    from transformers import GPT2LMHeadModel
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)


def main():
    shardwise = sys.argv[1]
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "text.txt")
        with open(data, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog; pack my box. " * 60)
        ckpt = os.path.join(folder, "ckpt")
        run(shardwise, "train", "--model", "tiny", "--steps", "30", "--data", data,
            "--mesh", "data=2,model=2", "--zero", "1", "--save", ckpt)
        hf = os.path.join(folder, "hf")
        run(shardwise, "ckpt", "export", ckpt, "--format", "hf-gpt2", "--out", hf)
        ours = json.loads(run(shardwise, "ckpt", "loss", ckpt, "--data", data, "--json"))

        model = GPT2LMHeadModel.from_pretrained(hf, torch_dtype=torch.float32)
        theirs = windows_loss(model, data, ours["seq"], ours["windows"])
        print(f"shardwise loss {ours['loss']:.7f}, transformers loss {theirs:.7f}")
        if abs(theirs - ours["loss"]) > 1e-4:
            sys.exit(f"losses differ by {abs(theirs - ours['loss'])}")
        if ours["loss"] > 4.0:
            sys.exit(f"the trained model's loss {ours['loss']} is no better than chance")

        imported = os.path.join(folder, "imported")
        run(shardwise, "ckpt", "import", hf, "--format", "hf-gpt2", "--out", imported,
            "--ranks", "3")
        again = os.path.join(folder, "again")
        run(shardwise, "ckpt", "export", imported, "--format", "hf-gpt2", "--out", again)
        first = open(os.path.join(hf, "model.safetensors"), "rb").read()
        second = open(os.path.join(again, "model.safetensors"), "rb").read()
        if first != second:
            sys.exit("export, import, export does not give back the same file")
        back = json.loads(run(shardwise, "ckpt", "loss", imported, "--data", data, "--json"))
        if back["loss"] != ours["loss"]:
            sys.exit(f"the imported checkpoint's loss {back['loss']} is not {ours['loss']}")
    print("ok")


if __name__ == "__main__":
    main()
