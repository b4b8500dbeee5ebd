"""What the interop tests share: running shardwise, and a causal LM's mean loss over a file's
windows as `shardwise ckpt loss` takes them (consecutive windows of seq + 1 byte tokens)."""
import json
import os
import subprocess
import sys


def run(*args):
    """The command's standard output; exits the test naming the command where it fails."""
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result.stdout


def windows_loss(model, data, seq, windows):
    """The mean next-token cross-entropy of a transformers causal LM over the file's windows."""
    import torch
    import torch.nn.functional as F

    model.eval()
    tokens = torch.tensor(list(open(data, "rb").read()), dtype=torch.long)
    losses = []
    with torch.no_grad():
        for w in range(windows):
            window = tokens[w * seq: w * seq + seq + 1]
            logits = model(window[:-1].unsqueeze(0)).logits[0]
            losses.append(F.cross_entropy(logits, window[1:]).item())
    return sum(losses) / len(losses)


def compare_loss(shardwise, ckpt, hf, hf_class, data, what):
    """`shardwise ckpt loss` of `ckpt` against transformers' `hf_class` loading `hf` in float32
    over the same windows: within 1e-4, else the test exits naming `what`. Returns the loss."""
    import torch

    ours = json.loads(run(shardwise, "ckpt", "loss", ckpt, "--data", data, "--json"))
    model = hf_class.from_pretrained(hf, dtype=torch.float32, attn_implementation="sdpa")
    theirs = windows_loss(model, data, ours["seq"], ours["windows"])
    print(f"{what}: shardwise loss {ours['loss']:.7f}, transformers loss {theirs:.7f}")
    if abs(theirs - ours["loss"]) > 1e-4:
        sys.exit(f"{what}: losses differ by {abs(theirs - ours['loss'])}")
    return ours["loss"]


def expect_round_trip(shardwise, hf, fmt, what):
    """Importing the export `hf` (on 3 ranks) and exporting it again gives the same file."""
    imported = hf + "_imported"
    run(shardwise, "ckpt", "import", hf, "--format", fmt, "--out", imported, "--ranks", "3")
    again = hf + "_again"
    run(shardwise, "ckpt", "export", imported, "--format", fmt, "--out", again)
    with open(os.path.join(hf, "model.safetensors"), "rb") as first, \
            open(os.path.join(again, "model.safetensors"), "rb") as second:
        if first.read() != second.read():
            sys.exit(f"{what}: export, import, export does not give back the same file")


def expect_greedy_tokens(shardwise, model, hf, prompt, prompt_ids, end, new_tokens, meshes, what):
    """`shardwise generate` of the folder `hf` (whose tokenizer.json encodes `prompt` as
    `prompt_ids`) on each of `meshes` writes transformers' greedy continuation by `model`."""
    import torch

    model.eval()
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=end, pad_token_id=end)
    want = out[0, len(prompt_ids):].tolist()
    for mesh in meshes:
        got = json.loads(run(shardwise, "generate", hf, "--json", "--prompt", prompt,
                             "--max-new-tokens", str(new_tokens), "--mesh", mesh))
        if got["prompt_ids"] != prompt_ids:
            sys.exit(f"{what}: prompt ids {got['prompt_ids']}, tokenizers {prompt_ids}")
        print(f"{what} generate on {mesh}: {got['ids']}")
        if got["ids"] != want:
            sys.exit(f"{what} on {mesh}: shardwise {got['ids']}, transformers {want}")
