#!/usr/bin/env python3
"""`shardwise generate` held against transformers' generate(do_sample=False), token for token.

  hf_generate_test.py SHARDWISE FIXTURES

1. Exported models: a GPT and a Llama trained by shardwise, exported with `ckpt export`;
   transformers' greedy continuation of a byte prompt equals shardwise's, generated from the
   checkpoint and from the exported folder, on model=1 and model=2.
2. bf16: `generate --precision bf16` against transformers under torch.autocast(bfloat16) (the
   products in bf16, the rest in float32, as shardwise's bf16), from the checkpoint and from a
   `ckpt export --dtype bfloat16` folder, on model=1 and model=2: the same tokens up to the first
   place where transformers' two most likely tokens are within 0.05 of each other (a near-tie
   that the two sums may order either way), and no such place in a token they disagree on
   before it.
3. Hugging Face folders transformers makes (random weights, a GPT-2 and a Llama with grouped-query
   attention) beside a byte-level BPE tokenizer.json of tests/text/fixtures: shardwise encodes the
   prompt as the tokenizers library does, continues it as transformers does on model=1, 2 and 4
   (the Llama's key/value heads replicated there), and decodes the text as the library does.
Exits 77 (skipped) where PyTorch, transformers or tokenizers is missing.
"""
import json
import os
import shutil
import sys
import tempfile

from interop_common import run

try:
    import torch
    from tokenizers import Tokenizer
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM)
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

NEW_TOKENS = 24


def transformers_greedy(model, prompt_ids, new_tokens, eos):
    model.eval()
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=eos, pad_token_id=eos or 0)
    return out[0, len(prompt_ids):].tolist()


def ours(shardwise, source, *flags):
    return json.loads(run(shardwise, "generate", source, "--json", *flags))


def expect_equal(what, got, want):
    print(f"{what}: {got}")
    if got != want:
        sys.exit(f"{what}: shardwise {got}, transformers {want}")


def exported(shardwise, folder, family, model_file, hf_class):
    data = os.path.join(folder, "text.txt")
    with open(data, "w") as f:
        f.write("The quick brown fox jumps over the lazy dog; pack my box with jugs. " * 60)
    ckpt = os.path.join(folder, family + "-ckpt")
    run(shardwise, "train", "--model", model_file, "--steps", "60", "--data", data, "--lr",
        "1e-2", "--save", ckpt)
    hf = os.path.join(folder, family + "-hf")
    run(shardwise, "ckpt", "export", ckpt, "--format", "hf-" + family, "--out", hf)
    prompt = "The quick"
    model = hf_class.from_pretrained(hf, dtype=torch.float32)
    context = json.load(open(os.path.join(hf, "config.json"))).get(
        "n_positions", json.load(open(os.path.join(hf, "config.json"))).get(
            "max_position_embeddings"))
    new = min(NEW_TOKENS, context - len(prompt))
    want = transformers_greedy(model, list(prompt.encode()), new, None)
    for source in (ckpt, hf):
        for mesh in ("model=1", "model=2"):
            got = ours(shardwise, source, "--prompt", prompt, "--max-new-tokens", str(new),
                       "--mesh", mesh)
            expect_equal(f"exported {family} from {os.path.basename(source)} on {mesh}",
                         got["ids"], want)
            if got["text"] != bytes(want).decode("utf-8", "replace"):
                sys.exit(f"{family}: text {got['text']!r}")
    exported_in_bf16(shardwise, folder, family, ckpt, hf_class, prompt, new)


def autocast_greedy(model, prompt_ids, new_tokens):
    """transformers' greedy tokens under autocast(bfloat16), and each step's top-two logit gap."""
    model.eval()
    ids = list(prompt_ids)
    tokens, gaps = [], []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(new_tokens):
            logits = model(torch.tensor([ids])).logits[0, -1].float()
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            ids.append(tokens[-1])
    return tokens, gaps


def expect_bf16_agreement(what, got, want, gaps):
    """The same tokens up to the first near-tie (a gap under 0.05) of transformers' logits."""
    for i, (a, b) in enumerate(zip(got, want)):
        if gaps[i] < 0.05:
            print(f"{what}: the same {i} tokens, then a near-tie ({gaps[i]:.4f})")
            return
        if a != b:
            sys.exit(f"{what}: token {i} is {a}, transformers' {b} (its lead {gaps[i]:.4f})")
    print(f"{what}: the same {len(want)} tokens")


def exported_in_bf16(shardwise, folder, family, ckpt, hf_class, prompt, new):
    hf16 = os.path.join(folder, family + "-hf-bf16")
    run(shardwise, "ckpt", "export", ckpt, "--format", "hf-" + family, "--out", hf16, "--dtype",
        "bfloat16")
    if json.load(open(os.path.join(hf16, "config.json"))).get("torch_dtype") != "bfloat16":
        sys.exit(f"{family}: the bf16 export's config.json does not say bfloat16")
    # transformers reads the bf16 export in bf16 (its torch_dtype); the float32 masters' copy
    # under autocast computes what shardwise's bf16 computes.
    loaded = hf_class.from_pretrained(hf16, dtype="auto")
    if next(loaded.parameters()).dtype != torch.bfloat16:
        sys.exit(f"{family}: transformers loaded the bf16 export as {next(loaded.parameters()).dtype}")
    model = hf_class.from_pretrained(os.path.join(folder, family + "-hf"), dtype=torch.float32)
    want, gaps = autocast_greedy(model, list(prompt.encode()), new)
    for source in (ckpt, hf16):
        for mesh in ("model=1", "model=2"):
            got = ours(shardwise, source, "--prompt", prompt, "--max-new-tokens", str(new),
                       "--mesh", mesh, "--precision", "bf16")
            expect_bf16_agreement(f"bf16 {family} from {os.path.basename(source)} on {mesh}",
                                  got["ids"], want, gaps)


def hugging_face_folder(shardwise, folder, name, model, tokenizer_file, prompt, meshes):
    hf = os.path.join(folder, name)
    model.save_pretrained(hf)
    shutil.copy(tokenizer_file, os.path.join(hf, "tokenizer.json"))
    tokenizer = Tokenizer.from_file(tokenizer_file)
    prompt_ids = tokenizer.encode(prompt).ids
    eos = model.config.eos_token_id
    want = transformers_greedy(model, prompt_ids, NEW_TOKENS, eos)
    for mesh in meshes:
        got = ours(shardwise, hf, "--prompt", prompt, "--max-new-tokens", str(NEW_TOKENS),
                   "--mesh", mesh)
        if got["prompt_ids"] != prompt_ids:
            sys.exit(f"{name}: prompt ids {got['prompt_ids']}, tokenizers {prompt_ids}")
        expect_equal(f"{name} on {mesh}", got["ids"], want)
        shown = want[:-1] if want and want[-1] == eos else want
        if got["text"] != tokenizer.decode(shown, skip_special_tokens=False):
            sys.exit(f"{name}: text {got['text']!r}, tokenizers "
                     f"{tokenizer.decode(shown, skip_special_tokens=False)!r}")


def main():
    shardwise, fixtures = sys.argv[1], sys.argv[2]
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        exported(shardwise, folder, "gpt2", os.path.join(source, "examples/models/gpt_micro.json"),
                 GPT2LMHeadModel)
        exported(shardwise, folder, "llama",
                 os.path.join(source, "examples/models/llama_micro.json"), LlamaForCausalLM)

        gpt2_tokens = os.path.join(fixtures, "gpt2.tokenizer.json")
        vocab = Tokenizer.from_file(gpt2_tokens).get_vocab_size()
        end = Tokenizer.from_file(gpt2_tokens).token_to_id("<|endoftext|>")
        gpt2 = GPT2LMHeadModel(GPT2Config(
            vocab_size=vocab + vocab % 4, n_positions=64, n_embd=64, n_layer=2, n_head=4,
            initializer_range=0.2, bos_token_id=end, eos_token_id=end))
        hugging_face_folder(shardwise, folder, "gpt2-bpe", gpt2, gpt2_tokens,
                            "The licensee shall   keep 1234567 copies, café 東京!",
                            ("model=1", "model=2", "model=4"))

        llama_tokens = os.path.join(fixtures, "llama3.tokenizer.json")
        vocab = Tokenizer.from_file(llama_tokens).get_vocab_size()
        end = Tokenizer.from_file(llama_tokens).token_to_id("<|end_of_text|>")
        begin = Tokenizer.from_file(llama_tokens).token_to_id("<|begin_of_text|>")
        llama = LlamaForCausalLM(LlamaConfig(
            vocab_size=vocab + vocab % 4, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=64, initializer_range=0.2, tie_word_embeddings=False,
            rope_theta=500000.0, bos_token_id=begin, eos_token_id=end))
        hugging_face_folder(shardwise, folder, "llama-bpe", llama, llama_tokens,
                            "The Licensee's   rights\n\n under 2024 terms: naïve 😀",
                            ("model=1", "model=2", "model=4"))
    print("generate: transformers' greedy tokens on every layout")


if __name__ == "__main__":
    main()
