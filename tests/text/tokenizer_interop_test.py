#!/usr/bin/env python3
"""shardwise's tokenizer against Hugging Face's `tokenizers` itself on thousands of random
strings (random code points of every plane mixed with words, digit runs, contractions, runs of
every kind of space, the special tokens of byte-level and SentencePiece-style tokenizers, "▁"
and byte tokens' names), long runs of one kind of character (20,000 digits, spaces, line
breaks, ...), long texts of random strings and random id sequences, for each tokenizer.json of
tests/text/fixtures/, through tests/text/tokenizer_driver.cpp.

  tokenizer_interop_test.py DRIVER FIXTURES_DIR [CASES_PER_FILE]

Exits 77 (skipped) where `tokenizers` is missing; where the running Python lacks it, the
benchmarks' build/peer-venv is used if it has it.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer
except ImportError as missing:  # optional: the suite passes without it
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                        "peer-venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("SHARDWISE_TOKENIZER_VENV"):
        os.environ["SHARDWISE_TOKENIZER_VENV"] = "1"
        os.execv(venv, [venv] + sys.argv)
    print(f"skipped: {missing}")
    sys.exit(1 if os.environ.get("SHARDWISE_REQUIRE_COMPARISONS") else 77)

WORDS = ["the", "The", "license", "GNU", "software", "Hello", "world", "naïve", "café", "über",
         "日本", "数据", "данные", "مرحبا", "שלום", "😀", "👍🏽", "x", "ab", "abc", "hello", "wor"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000",
          "\u2028", "\x0b", "\x0c", "\x85", "\u200b", "\u1680", "\u202f"]
CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'m", "'M", "'ll", "'LL",
                "'lL", "'d", "'D", "'\u017f", "'", "''", "'x", "'l", "'r"]
SPECIALS = ["<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>",
            "<|im_end|>", "<sep>", "<|endoftext", "<|", "<s>", "</s>", "<unk>", "<s", "</s",
            "\u2581", "\u2581\u2581", "<0x41>", "<0xE2>", "<0x0A>"]
# Runs that a scanner or a merge loop handles as one piece: each run and its prefix of 1,000.
LONG_RUN_UNITS = ["1", "123", " ", "\n", " \n", "\r\n", "\t", "!", "a", "'", "'s", "\u2581",
                  "\u00e9", "\U0001f600", "a ", "1 "]
LONG_RUN_LENGTH = 20000
PUNCTUATION = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»“”‘’…—–·•"


def random_code_point(rng):
    while True:
        block = rng.random()
        if block < 0.3:
            c = rng.randint(0x20, 0x7e)
        elif block < 0.45:
            c = rng.randint(0xa0, 0x2fff)
        elif block < 0.55:
            c = rng.choice([rng.randint(0x300, 0x36f), rng.randint(0x4e00, 0x9fff),
                            rng.randint(0x1f300, 0x1faff), rng.randint(0xac00, 0xd7a3)])
        elif block < 0.8:
            c = rng.randint(0, 0xffff)
        else:
            c = rng.randint(0x10000, 0x10ffff)
        if not 0xd800 <= c <= 0xdfff:
            return chr(c)


def random_text(rng):
    parts = []
    for _ in range(rng.randint(0, 14)):
        kind = rng.random()
        if kind < 0.2:
            parts.append(rng.choice(WORDS))
        elif kind < 0.38:
            parts.append(rng.choice(SPACES) * rng.randint(1, 3))
        elif kind < 0.46:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        elif kind < 0.54:
            parts.append(rng.choice(CONTRACTIONS))
        elif kind < 0.6:
            parts.append(rng.choice(SPECIALS))
        elif kind < 0.68:
            parts.append("".join(rng.choice(PUNCTUATION) for _ in range(rng.randint(1, 4))))
        else:
            parts.append("".join(random_code_point(rng) for _ in range(rng.randint(1, 6))))
    return "".join(parts)


def check(driver, path, count, rng):
    tokenizer = Tokenizer.from_file(path)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    texts = [random_text(rng) for _ in range(count)]
    # ... and long texts of random strings: a SentencePiece-style tokenizer merges each as one
    # word, with merges of every rank in it.
    runs = [unit * (length // len(unit)) for unit in LONG_RUN_UNITS
            for length in (1000, LONG_RUN_LENGTH)]
    runs += ["".join(random_text(rng) for _ in range(200)) for _ in range(max(1, count // 50))]
    texts += runs
    sequences = [[rng.randrange(size) for _ in range(rng.randint(1, 16))] for _ in range(count)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8", delete=False) as f:
        json.dump({"texts": texts, "decode": sequences}, f)
        cases = f.name
    try:
        result = subprocess.run([driver, path, cases], capture_output=True, text=True)
    finally:
        os.unlink(cases)
    if result.returncode != 0:
        sys.exit(f"{driver} {path} failed ({result.returncode}): {result.stderr}")
    ours = json.loads(result.stdout)
    failures = []
    for i, text in enumerate(texts):
        for key, special in (("encode", True), ("encode_without_special", False)):
            theirs = tokenizer.encode(text, add_special_tokens=special).ids
            if ours[key][i] != theirs:
                failures.append(f"{key}({text[:200]!r}): shardwise {ours[key][i][:50]}, "
                                f"tokenizers {theirs[:50]}")
    for i, ids in enumerate(sequences):
        for key, skip in (("decode", False), ("decode_skipping_special", True)):
            theirs = tokenizer.decode(ids, skip_special_tokens=skip)
            if ours[key][i] != theirs:
                failures.append(f"{key}({ids}): shardwise {ours[key][i]!r}, "
                                f"tokenizers {theirs!r}")
    name = os.path.basename(path)
    print(f"{name}: {count} strings, {len(runs)} long runs and texts, {count} id sequences, "
          f"{len(failures)} differences")
    for failure in failures[:10]:
        print("  " + failure)
    return not failures


def main():
    driver, fixtures = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    rng = random.Random(int(os.environ.get("SHARDWISE_TOKENIZER_SEED", "20240601")))
    files = sorted(f for f in os.listdir(fixtures) if f.endswith(".tokenizer.json"))
    ok = [check(driver, os.path.join(fixtures, f), count, rng) for f in files]
    if not all(ok):
        sys.exit("shardwise's tokenizer differs from the tokenizers library")


if __name__ == "__main__":
    main()
