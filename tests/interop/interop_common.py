"""What the interop tests share: running shardwise, and a causal LM's mean loss over a file's
windows as `shardwise ckpt loss` takes them (consecutive windows of seq + 1 byte tokens)."""
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
