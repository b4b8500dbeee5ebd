#!/usr/bin/env python3
"""Fine-tuning examples as shardwise encodes them, held against transformers, token for token.

  fine_tuning_interop_test.py SHARDWISE EXAMPLES_DRIVER FIXTURES

Seeded random conversations (an optional system message, one to four turns, now and then a last
user message with no answer; contents of words, digits, punctuation, é, 中文, emoji, spaces (no-break
and ideographic ones too), tabs and line breaks), prompt/completion pairs (strings, and lists of
messages) and texts are written as JSON Lines into Hugging Face folders (a tokenizer.json of
FIXTURES and a tokenizer_config.json holding a chat template of FIXTURES/chat and its special
tokens), and tests/train/examples_driver.cpp's ids and counted marks are compared with what
transformers' PreTrainedTokenizerFast, loaded from the same folder, gives:

1. {"messages"}: the ids of apply_chat_template(messages, tokenize=True). Counted: for a template
   with {% generation %} blocks, its assistant_masks; for any other, each assistant message's
   characters [len(render(messages[:i], add_generation_prompt=True)),
   len(render(messages[:i + 1]))) of the whole rendering, marked from char_to_token of the first
   character to char_to_token of the last (TRL's assistant mask).
2. {"prompt", "completion"}: strings as TRL encodes them (the end-of-sequence token appended to the
   completion, tokenizer(prompt + completion) with its special tokens, the prompt's own length
   not counted); lists of messages as apply_chat_template renders the prompt with its generation
   prompt and the whole.
3. {"text"}: tokenizer(text + eos), every token counted but the first.

Templates and tokenizers: chatml_generation (generation blocks), smollm2_135m_instruct and
qwen2_5_instruct with the smollm2 fixture (it has <|endoftext|>, <|im_start|> and <|im_end|>);
tinyllama_chat and mistral_7b_instruct_v0_2 with the SentencePiece-style spm fixture (<unk>, <s>,
</s>); llama3_instruct with the llama3 fixture. That fixture has <|begin_of_text|> and
<|end_of_text|> but not the template's <|start_header_id|>, <|end_header_id|> and <|eot_id|>:
both sides encode those as plain text, and the folder's eos_token is <|end_of_text|> (an
eos_token missing from the vocabulary would be added to it by transformers). Left out: gemma_it
(no fixture has <bos>, <eos>, <start_of_turn>), llama3_1/llama3_2 (their strftime_now date),
mistral v0.1 (no system role) and v0.3 (it moves the system message to the last user turn).

Where a conversation up to an assistant's turn does not begin the whole, shardwise refuses it
naming that message: Qwen3's template drops the reasoning of earlier assistant turns, and Phi-3's
ends every rendering with eos_token (here </s>, the spm fixture lacking <|endoftext|>).

Then a small random LlamaForCausalLM saved by transformers beside the smollm2 tokenizer:
`shardwise ckpt loss FOLDER --data FILE.jsonl --json` on a chat file, prompt/completion files
(strings and messages) and a text file equals the sum over examples of transformers'
cross-entropy over the counted targets (the other labels -100, each example cut to seq + 1
tokens) over the counted targets, within 1e-4 relative; and `shardwise train --init-from FOLDER`
on a chat file lowers the loss of held-out conversations' assistant turns.

Exits 77 (skipped) where PyTorch or transformers is missing (1 with SHARDWISE_REQUIRE_COMPARISONS).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
    import transformers
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
except ImportError as missing:  # optional: the suite passes without them
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

SEED = 20240726
CONVERSATIONS = 200        # per template
PROMPT_COMPLETIONS = 80    # per folder, of each kind
TEXTS = 40                 # per folder
RELATIVE = 1e-4

WORDS = ["the", "The", "a", "model", "shards", "tokens", "Hello", "world", "learning", "rate",
         "café", "naïve", "résumé", "élève", "über", "中文", "数据", "训练", "日本語", "данные",
         "😀", "👍", "🚀", "🤖", "x", "ab", "it's", "don't", "I'll", "GPU", "fine-tuning",
         "e.g.", "https://example.org/a?b=1", "foo_bar", "CamelCase", "α", "β", "∑"]
PUNCTUATION = list(".,;:!?-()[]{}'\"/\\@#$%&*+=<>|~`^") + ["...", "--", "«", "»", "“", "”", "…"]
SPACES = [" ", " ", " ", " ", "  ", "   ", "\u00a0", "\u3000", "\n", "\n\n", "\r\n", "\t", " \n",
          "\n "]

# Each folder: name, tokenizer fixture, chat template fixture, overrides of its special tokens.
FOLDERS = [
    ("chatml_generation", "smollm2", "chatml_generation", {}),
    ("smollm2_135m_instruct", "smollm2", "smollm2_135m_instruct", {}),
    ("qwen2_5_instruct", "smollm2", "qwen2_5_instruct", {}),
    ("tinyllama_chat", "spm", "tinyllama_chat", {}),
    ("mistral_7b_instruct_v0_2", "spm", "mistral_7b_instruct_v0_2", {}),
    ("llama3_instruct", "llama3", "llama3_instruct", {"eos_token": "<|end_of_text|>"}),
]


def run(*args):
    """The command's standard output; exits the test naming the command where it fails."""
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result.stdout


# --- random examples -------------------------------------------------------------------------

def random_content(rng, most_pieces=24):
    pieces = []
    for _ in range(rng.randint(1, most_pieces)):
        kind = rng.random()
        if kind < 0.55:
            pieces.append(rng.choice(WORDS))
        elif kind < 0.7:
            pieces.append(str(rng.randint(0, 10 ** rng.randint(1, 7))))
        elif kind < 0.85:
            pieces.append(rng.choice(PUNCTUATION))
        else:
            pieces.append(rng.choice(SPACES))
        pieces.append(rng.choice(SPACES) if rng.random() < 0.8 else "")
    text = "".join(pieces)
    if rng.random() < 0.15:
        text = rng.choice(SPACES) + text
    if rng.random() < 0.85:
        text = text.strip(" ") or "ok"
    return text


def random_conversation(rng, turns=None):
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": random_content(rng, 10)})
    for _ in range(turns or rng.randint(1, 4)):
        messages.append({"role": "user", "content": random_content(rng)})
        messages.append({"role": "assistant", "content": random_content(rng)})
    if rng.random() < 0.1:
        messages.append({"role": "user", "content": random_content(rng)})
    return messages


def random_prompt_completion(rng, conversational):
    if not conversational:
        prompt = random_content(rng)
        completion = random_content(rng)
        if rng.random() < 0.3:
            completion = " " + completion
        return {"prompt": prompt, "completion": completion}
    conversation = random_conversation(rng, rng.randint(1, 3))
    while conversation[-1]["role"] != "assistant":
        conversation.pop()
    return {"prompt": conversation[:-1], "completion": conversation[-1:]}


def random_text(rng):
    return {"text": random_content(rng, 60)}


def write_jsonl(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path


# --- folders ---------------------------------------------------------------------------------

def make_folder(folder, fixtures, tokenizer, chat, overrides):
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(fixtures, f"{tokenizer}.tokenizer.json"),
                os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(fixtures, "chat", f"{chat}.json"), encoding="utf-8") as f:
        fixture = json.load(f)
    config = dict(fixture["special_tokens"])
    config.update(overrides)
    with open(os.path.join(fixtures, f"{tokenizer}.tokenizer.json"), encoding="utf-8") as f:
        known = {token["content"] for token in json.load(f).get("added_tokens", [])}
    missing = [token for token in config.values() if token not in known]
    if missing:
        sys.exit(f"{chat}: special tokens {missing} are not in {tokenizer}.tokenizer.json")
    config.update({"tokenizer_class": "PreTrainedTokenizerFast",
                   "chat_template": fixture["template"], "model_max_length": 1 << 30,
                   "clean_up_tokenization_spaces": False})
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    return folder


def load_tokenizer(folder):
    return AutoTokenizer.from_pretrained(folder)


# --- the reference ---------------------------------------------------------------------------

class Refused(Exception):
    """Where shardwise must refuse a conversation: `index` is the message to name."""

    def __init__(self, index):
        super().__init__(f"message {index}")
        self.index = index


def chat_ids(tok, messages, **kwargs):
    return list(tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                        **kwargs)["input_ids"])


def render(tok, messages, add_generation_prompt):
    return tok.apply_chat_template(messages, tokenize=False,
                                   add_generation_prompt=add_generation_prompt)


def first_uncounted(counted):
    counted = list(counted)
    if counted:
        counted[0] = 0  # the first token is nobody's target
    return counted


def reference_messages(tok, messages, generation_blocks):
    ids = chat_ids(tok, messages)
    if generation_blocks:
        out = tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        if list(out["input_ids"]) != ids:
            raise AssertionError("assistant-mask encoding differs from the plain one")
        return ids, first_uncounted(out["assistant_masks"])
    text = render(tok, messages, False)
    encoding = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoding["input_ids"]) != ids:
        raise AssertionError("tokenizer(render) differs from apply_chat_template's ids")
    counted = [0] * len(ids)
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render(tok, messages[:i], True)
        through = text if i + 1 == len(messages) else render(tok, messages[:i + 1], False)
        if not through.startswith(prompt) or not text.startswith(through):
            raise Refused(i)
        start, end = len(prompt), len(through)
        if start >= end:
            continue
        first = encoding.char_to_token(start)
        last = encoding.char_to_token(end - 1)
        if first is None or last is None:
            raise AssertionError(f"message {i}: characters {start}..{end} of {text!r} have no "
                                 f"token ({first}, {last})")
        for t in range(first, last + 1):
            counted[t] = 1
    return ids, first_uncounted(counted)


def with_eos(text, eos):
    return text if not eos or text.endswith(eos) else text + eos


def reference_example(tok, line, generation_blocks):
    eos = tok.eos_token
    if "messages" in line:
        return reference_messages(tok, line["messages"], generation_blocks)
    if "prompt" in line:
        prompt, completion = line["prompt"], line["completion"]
        if isinstance(prompt, str):
            whole = with_eos(prompt + completion, eos)
            ids = list(tok(whole, add_special_tokens=True)["input_ids"])
            head = len(tok(prompt)["input_ids"])
        else:
            ids = chat_ids(tok, prompt + completion)
            head = len(chat_ids(tok, prompt, add_generation_prompt=True))
        return ids, first_uncounted([0] * min(head, len(ids)) + [1] * max(0, len(ids) - head))
    ids = list(tok(with_eos(line["text"], eos), add_special_tokens=True)["input_ids"])
    return ids, first_uncounted([1] * len(ids))


# --- comparing -------------------------------------------------------------------------------

def show_tokens(tok, ids, counted, around):
    lo, hi = max(0, around - 6), min(len(ids), around + 7)
    return " ".join(f"{t}:{ids[t]}{'*' if counted[t] else ''}={tok.convert_ids_to_tokens(ids[t])!r}"
                    for t in range(lo, hi))


def compare_file(driver, tok, folder, name, lines, generation_blocks):
    """Ids and counted marks of every line, the driver's against the reference's; the count."""
    path = write_jsonl(os.path.join(folder, f"{name}.jsonl"), lines)
    expected = []
    for number, line in enumerate(lines, 1):
        try:
            expected.append(reference_example(tok, line, generation_blocks))
        except Refused as refused:
            sys.exit(f"{name} line {number}: the template renders the conversation up to "
                     f"{refused} differently from the beginning of the whole "
                     f"({json.dumps(line, ensure_ascii=False)})")
    out = run(driver, os.path.join(folder, "tokenizer.json"), path).splitlines()
    if len(out) != len(lines):
        sys.exit(f"{name}: the driver gave {len(out)} examples for {len(lines)} lines")
    counted_tokens = 0
    for number, (line, got, (ids, counted)) in enumerate(zip(lines, out, expected), 1):
        got = json.loads(got)
        if got["ids"] == ids and got["counted"] == counted:
            counted_tokens += sum(counted)
            continue
        at = next((t for t in range(max(len(ids), len(got["ids"])))
                   if t >= len(ids) or t >= len(got["ids"]) or ids[t] != got["ids"][t]
                   or counted[t] != got["counted"][t]), 0)
        print(f"{name} line {number} differs first at token {at}:\n"
              f"  example: {json.dumps(line, ensure_ascii=False)}\n"
              f"  shardwise ids     {got['ids']}\n"
              f"  transformers ids  {ids}\n"
              f"  shardwise counted     {got['counted']}\n"
              f"  transformers counted  {counted}\n"
              f"  shardwise near it:    {show_tokens(tok, got['ids'], got['counted'], at)}\n"
              f"  transformers near it: {show_tokens(tok, ids, counted, at)}")
        if "messages" in line:
            print(f"  rendered: {render(tok, line['messages'], False)!r}")
        sys.exit(1)
    return counted_tokens


def expect_refused(driver, tok, folder, name, line, generation_blocks):
    """A conversation the reference finds no prefix for: shardwise refuses naming the message."""
    try:
        reference_example(tok, line, generation_blocks)
        sys.exit(f"{name}: the reference finds every assistant's prefix; expected a refusal")
    except Refused as refused:
        index = refused.index
    path = write_jsonl(os.path.join(folder, f"{name}.jsonl"), [line])
    result = subprocess.run([driver, os.path.join(folder, "tokenizer.json"), path],
                            capture_output=True, text=True)
    if result.returncode != 1 or f"message {index} " not in result.stderr:
        sys.exit(f"{name}: expected a refusal naming message {index}; status "
                 f"{result.returncode}, stdout {result.stdout!r}, stderr {result.stderr!r}")
    print(f"{name}: refused: {result.stderr.strip()[:160]}")


def encodings_agree(driver, fixtures, root, rng):
    examples = tokens = 0
    for name, tokenizer, chat, overrides in FOLDERS:
        folder = make_folder(os.path.join(root, name), fixtures, tokenizer, chat, overrides)
        tok = load_tokenizer(folder)
        generation_blocks = re.search(r"{%-?\s*generation\s*-?%}", tok.chat_template) is not None
        files = {
            "messages": [{"messages": random_conversation(rng)} for _ in range(CONVERSATIONS)],
            "prompt_completion": [random_prompt_completion(rng, False)
                                  for _ in range(PROMPT_COMPLETIONS)],
            "conversational_prompt_completion": [random_prompt_completion(rng, True)
                                                 for _ in range(PROMPT_COMPLETIONS)],
            "text": [random_text(rng) for _ in range(TEXTS)],
        }
        # A few edges: an assistant turn of spaces only, and a completion ending in eos already.
        files["messages"].append({"messages": [{"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": " \n "}]})
        files["prompt_completion"].append({"prompt": "Q: 1 + 1?",
                                           "completion": " 2" + tok.eos_token})
        files["text"].append({"text": "ends with eos" + tok.eos_token})
        for kind, lines in files.items():
            counted = compare_file(driver, tok, folder, f"{name}.{kind}", lines, generation_blocks)
            examples += len(lines)
            tokens += counted
            print(f"{name} ({tokenizer} tokenizer) {kind}: {len(lines)} examples, "
                  f"{counted} counted tokens agree")
    return examples, tokens


def prefixes_refused(driver, fixtures, root):
    """Templates that render a turn differently once others follow: refused naming the turn."""
    folder = make_folder(os.path.join(root, "qwen3"), fixtures, "smollm2", "qwen3", {})
    line = {"messages": [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "<think>\nAdding: 2 + 2 = 4.\n</think>\n\nIt is 4."},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "<think>\n3 + 3 = 6.\n</think>\n\n6."}]}
    expect_refused(driver, load_tokenizer(folder), folder, "qwen3.dropped_reasoning", line, False)
    folder = make_folder(os.path.join(root, "phi3"), fixtures, "spm", "phi3_mini_instruct",
                         {"eos_token": "</s>", "pad_token": "</s>"})
    line = {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi é"},
        {"role": "assistant", "content": "Hello 中文"},
        {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Bye 😀"}]}
    expect_refused(driver, load_tokenizer(folder), folder, "phi3.eos_after_the_last", line, False)
    return 2


# --- the model -------------------------------------------------------------------------------

def make_model(folder, fixtures):
    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=640, hidden_size=48, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.05,
                         tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    make_folder(folder, fixtures, "smollm2", "smollm2_135m_instruct", {})
    return folder


def transformers_loss(model, examples, seq):
    """Summed cross-entropy over the counted targets of every example (cut to seq + 1 tokens) over
    their count, as transformers' loss with the other labels -100 gives it."""
    total, counted_total, used = 0.0, 0, 0
    model.eval()
    with torch.no_grad():
        for ids, counted in examples:
            ids, counted = ids[:seq + 1], counted[:seq + 1]
            labels = torch.tensor([t if c else -100 for t, c in zip(ids, counted)])
            here = int((labels[1:] != -100).sum())
            if len(ids) < 2 or here == 0:
                continue
            logits = model(torch.tensor([ids])).logits[0].double()
            total += F.cross_entropy(logits[:-1], labels[1:], ignore_index=-100,
                                     reduction="sum").item()
            counted_total += here
            used += 1
    return total / counted_total, used, counted_total


def losses_agree(shardwise, folder, rng):
    tok = load_tokenizer(folder)
    model = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32)
    files = [
        ("chat", [{"messages": random_conversation(rng)} for _ in range(40)], 96),
        ("prompt_completion", [random_prompt_completion(rng, False) for _ in range(40)], None),
        ("conversational_prompt_completion",
         [random_prompt_completion(rng, True) for _ in range(30)], None),
        ("text", [random_text(rng) for _ in range(20)], 48),
    ]
    compared = 0
    for name, lines, seq in files:
        path = write_jsonl(os.path.join(folder, f"loss_{name}.jsonl"), lines)
        args = [shardwise, "ckpt", "loss", folder, "--data", path, "--json"]
        if seq:
            args += ["--seq", str(seq)]
        ours = json.loads(run(*args))
        examples = [reference_example(tok, line, False) for line in lines]
        theirs, used, counted = transformers_loss(model, examples, ours["seq"])
        print(f"ckpt loss {name} (seq {ours['seq']}): shardwise {ours['loss']:.7f} over "
              f"{ours['examples']} examples and {ours['counted_tokens']} tokens, transformers "
              f"{theirs:.7f} over {used} and {counted}")
        if (ours["examples"], ours["counted_tokens"]) != (used, counted):
            sys.exit(f"ckpt loss {name}: shardwise counts {ours['examples']} examples and "
                     f"{ours['counted_tokens']} tokens, transformers {used} and {counted}")
        if abs(ours["loss"] - theirs) > RELATIVE * abs(theirs):
            sys.exit(f"ckpt loss {name}: losses differ by {abs(ours['loss'] - theirs)}")
        compared += 1
    return compared


def fine_tune(shardwise, folder, rng):
    """A short fine-tune on conversations lowers the held-out assistant loss."""
    train = write_jsonl(os.path.join(folder, "train.jsonl"),
                        [{"messages": random_conversation(rng)} for _ in range(200)])
    val = write_jsonl(os.path.join(folder, "val.jsonl"),
                      [{"messages": random_conversation(rng)} for _ in range(30)])
    out = run(shardwise, "train", "--init-from", folder, "--data", train, "--val-data", val,
              "--steps", "80", "--batch", "8", "--seq", "128", "--eval-every", "20",
              "--lr", "1e-3", "--warmup", "5", "--threads", "1", "--json")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    val_losses = [line["val_loss"] for line in lines if "val_loss" in line]
    if len(val_losses) < 2:
        sys.exit(f"fine-tune: fewer than two validation losses in {out[-2000:]}")
    print(f"fine-tune: held-out loss {' -> '.join(f'{v:.4f}' for v in val_losses)}")
    if not val_losses[-1] < val_losses[0] - 0.3:
        sys.exit(f"fine-tune: the held-out loss went {val_losses[0]} -> {val_losses[-1]}")
    return val_losses[0], val_losses[-1]


def main():
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} SHARDWISE EXAMPLES_DRIVER FIXTURES")
    shardwise, driver, fixtures = sys.argv[1:]
    began = time.time()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as root:
        examples, tokens = encodings_agree(driver, fixtures, root, rng)
        refusals = prefixes_refused(driver, fixtures, root)
        folder = make_model(os.path.join(root, "model"), fixtures)
        losses = losses_agree(shardwise, folder, rng)
        first, last = fine_tune(shardwise, folder, rng)
    print(f"ok: {examples} examples ({tokens} counted tokens) over {len(FOLDERS)} templates agree "
          f"with transformers, {refusals} prefix refusals, {losses} ckpt losses within "
          f"{RELATIVE} relative, held-out loss {first:.3f} -> {last:.3f} ({time.time() - began:.0f} s)")


if __name__ == "__main__":
    main()
