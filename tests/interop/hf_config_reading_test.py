#!/usr/bin/env python3
"""Folders transformers saves, read by `shardwise ckpt loss` as transformers reads them.

  hf_config_reading_test.py SHARDWISE

Small random Llama, Mistral and GPT-2 models saved by the installed transformers (its
config.json: rope_parameters in transformers 5, rope_scaling in 4), then their config.json
edited as published models' are (SmolLM2's is_llama_config and rope_interleaved, hidden_act
"swish", a "_"-key, token ids, a field no reader knows, rope_scaling holding both "type" and
"rope_type"), and the folder laid out as Hugging Face's cache keeps it (files linked into
../../blobs/): shardwise's loss must be transformers' within 1e-4. Configs asking for what
shardwise does not compute (a sliding window below the context, another activation) are refused
naming the field, status 2. Exits 77 (skipped) where PyTorch or transformers is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from interop_common import run, windows_loss

try:
    import torch
    import transformers
    from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                              LlamaForCausalLM, MistralConfig, MistralForCausalLM)
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

SHAPE = dict(vocab_size=256, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             rms_norm_eps=1e-5, initializer_range=0.2)
LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=16)


def edit_config(folder, change):
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        config = json.load(f)
    change(config)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def compare(shardwise, folder, data, what):
    ours = json.loads(run(shardwise, "ckpt", "loss", folder, "--data", data, "--json"))
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    theirs = windows_loss(model, data, ours["seq"], ours["windows"])
    print(f"{what}: shardwise loss {ours['loss']:.7f}, transformers loss {theirs:.7f}")
    if abs(theirs - ours["loss"]) > 1e-4:
        sys.exit(f"{what}: losses differ by {abs(theirs - ours['loss'])}")


def expect_refused(shardwise, folder, data, field):
    result = subprocess.run([shardwise, "ckpt", "loss", folder, "--data", data],
                            capture_output=True, text=True)
    if result.returncode != 2 or f'"{field}"' not in result.stderr:
        sys.exit(f"{field}: status {result.returncode}, {result.stderr!r}")
    print(f"{field}: refused: {result.stderr.strip()}")


def as_cache(folder, root):
    """The folder as huggingface_hub's cache keeps it: each file in blobs/, linked from a
    snapshot."""
    repo = os.path.join(root, "models--org--tiny")
    snapshot = os.path.join(repo, "snapshots", "f00d")
    os.makedirs(os.path.join(repo, "blobs"))
    os.makedirs(snapshot)
    for i, name in enumerate(sorted(os.listdir(folder))):
        blob = f"{i:040x}"
        shutil.copy(os.path.join(folder, name), os.path.join(repo, "blobs", blob))
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snapshot, name))
    return snapshot


def save(model, folder):
    model.save_pretrained(folder)
    return folder


def main():
    shardwise = sys.argv[1]
    print(f"transformers {transformers.__version__}")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        data = os.path.join(root, "text.txt")
        with open(data, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog; pack my box. " * 40)
        plain = save(LlamaForCausalLM(LlamaConfig(**SHAPE)), os.path.join(root, "llama"))
        compare(shardwise, plain, data, "Llama as transformers saves it")
        scaled = save(LlamaForCausalLM(LlamaConfig(**SHAPE, rope_theta=500000.0,
                                                   rope_scaling=LLAMA3)),
                      os.path.join(root, "llama3"))
        compare(shardwise, scaled, data, "Llama 3's rope scaling")

        # The older "type" beside "rope_type": transformers 5 reads rope_type.
        def both_types(config):
            rope = config.get("rope_parameters") or config.get("rope_scaling")
            rope["type"] = "default"
        if int(transformers.__version__.split(".")[0]) >= 5:
            edit_config(scaled, both_types)
            compare(shardwise, scaled, data, "rope_scaling with type and rope_type")

        # What SmolLM2's published config and later saves hold beside a Llama's fields.
        def smollm2(config):
            config.update({"is_llama_config": True, "rope_interleaved": False,
                           "hidden_act": "swish", "partial_rotary_factor": 1.0,
                           "_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
                           "_attn_implementation_autoset": True, "unk_token_id": 0,
                           "pad_token_id": 2, "transformers.js_config": {"dtype": "q4"}})
        edit_config(plain, smollm2)
        compare(shardwise, plain, data, "SmolLM2's extra fields")
        compare(shardwise, as_cache(plain, os.path.join(root, "cache")), data,
                "the same folder as the cache keeps it")

        window = save(MistralForCausalLM(MistralConfig(**SHAPE, sliding_window=64)),
                      os.path.join(root, "mistral"))
        compare(shardwise, window, data, "Mistral whose window spans the context")
        edit_config(window, lambda config: config.update(sliding_window=None))
        compare(shardwise, window, data, "Mistral without a window")
        edit_config(window, lambda config: config.update(sliding_window=32))
        expect_refused(shardwise, window, data, "sliding_window")
        edit_config(plain, lambda config: config.update(hidden_act="gelu"))
        expect_refused(shardwise, plain, data, "hidden_act")

        gpt2 = save(GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=48,
                                               n_layer=2, n_head=4, initializer_range=0.2)),
                    os.path.join(root, "gpt2"))
        compare(shardwise, gpt2, data, "GPT-2 as transformers saves it")
        edit_config(gpt2, lambda config: config.update(_name_or_path="gpt2", rotary_dim=8))
        compare(shardwise, gpt2, data, "GPT-2 with a field its reader does not know")
    print("ok")


if __name__ == "__main__":
    main()
