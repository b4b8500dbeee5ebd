#!/usr/bin/env python3
"""Writes src/text/unicode_tables.cpp: the character classes Hugging Face's `tokenizers`
computes with, read from the library itself, so that shardwise's tokenizer splits text where it
does whatever Unicode version the library was built with.

  build/peer-venv/bin/python tests/text/make_unicode_tables.py [OUT_FILE]

The library holds three Unicode versions at once (tokenizers 0.23.3: Oniguruma's \\p{L}, \\p{N}
and \\s are Unicode 16.0, Rust's char::is_numeric 17.0), none of them Debian 12's ICU 72 (15.0):
U+2EBF0 (CJK Extension I, 15.1) is a letter to the library and unassigned to ICU. Each class is
measured on a string holding every code point once:
  letters, numbers, spaces  the Split pre-tokenizer's regular expressions (Oniguruma)
  numerics                   the Digits pre-tokenizer (Rust's char::is_numeric)
  word characters            an added token with single_word (the regex crate's \\w)
  strip spaces               an added token with rstrip (the regex crate's \\s)
It also checks the case folding src/text/split_patterns.cpp assumes for (?i:'s|'t|...).
"""
import os
import shutil
import subprocess
import sys

from tokenizers import AddedToken, Regex, Tokenizer, __version__
from tokenizers import pre_tokenizers
from tokenizers.models import BPE

CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
EVERY_CHARACTER = "".join(map(chr, CODE_POINTS))


def regex_class(complement):
    """The code points a regular expression class matches, from the pieces that a Split on the
    class's complement leaves."""
    split = pre_tokenizers.Split(Regex(complement + "+"), behavior="removed")
    return {ord(c) for piece, _ in split.pre_tokenize_str(EVERY_CHARACTER) for c in piece}


def numerics():
    """The code points Digits isolates: each one between two 'a's stands alone."""
    text = "".join("a" + chr(c) for c in CODE_POINTS) + "a"
    pieces = pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str(text)
    return {ord(piece) for piece, _ in pieces if len(piece) == 1 and piece != "a"}


def added_token_matches(token, segment):
    """The code points whose segment (segment(c) for each code point, all of one length) has
    `token` matched, read from the matches' offsets in a tokenizer with no other vocabulary."""
    tokenizer = Tokenizer(BPE(vocab={}, merges=[]))
    tokenizer.add_tokens([token])
    length = len(segment("a"))
    text = "".join(segment(chr(c)) for c in CODE_POINTS)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    return {CODE_POINTS[start // length]: end - start for start, end in encoding.offsets}


def word_characters():
    # "c<w>#": the token matches unless the character before it is a word character.
    matched = added_token_matches(AddedToken("<w>", single_word=True, normalized=False),
                                  lambda c: c + "<w>#")
    return {c for c in CODE_POINTS if c not in matched}


def strip_spaces():
    # "<w>c#": rstrip takes c into the match where it is a space.
    lengths = added_token_matches(AddedToken("<w>", rstrip=True, normalized=False),
                                  lambda c: "<w>" + c + "#")
    return {c for c, length in lengths.items() if length == 4}


def check_case_folding():
    """split_patterns.cpp matches (?i:'s|'t|'re|'ve|'m|'ll|'d) with these foldings alone."""
    expected = {"s": {"S", "s", "\u017f"}}
    joined = "\x00".join(EVERY_CHARACTER)
    for letter in "strevmld":
        split = pre_tokenizers.Split(Regex("(?i:" + letter + ")"), behavior="removed")
        left = set("".join(piece for piece, _ in split.pre_tokenize_str(joined)))
        folded = set(EVERY_CHARACTER) - left
        if folded != expected.get(letter, {letter, letter.upper()}):
            sys.exit(f"(?i:{letter}) matches {sorted(folded)}: update split_patterns.cpp")


def ranges(code_points):
    out = []
    for c in sorted(code_points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def table(name, comment, code_points):
    lines = [f"// {comment}", f"constexpr CodePointRange k{name}[] = {{"]
    entries = [f"{{0x{a:04X}, 0x{b:04X}}}," for a, b in ranges(code_points)]
    for i in range(0, len(entries), 5):
        lines.append("    " + " ".join(entries[i:i + 5]))
    lines.append("};")
    return "\n".join(lines)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "src", "text", "unicode_tables.cpp")
    check_case_folding()
    tables = [
        ("Letters", "\\p{L} of the pre-tokenizers' regular expressions (Oniguruma).",
         regex_class(r"\P{L}"), "regex_letters"),
        ("Numbers", "\\p{N} of the pre-tokenizers' regular expressions (Oniguruma).",
         regex_class(r"\P{N}"), "regex_numbers"),
        ("Spaces", "\\s of the pre-tokenizers' regular expressions (Oniguruma).",
         regex_class(r"\S"), "regex_spaces"),
        ("Numerics", "What the Digits pre-tokenizer splits off (Rust's char::is_numeric).",
         numerics(), "digits_numerics"),
        ("WordCharacters", "\\w of an added token's single_word (the regex crate).",
         word_characters(), "added_token_word_characters"),
        ("StripSpaces", "\\s of an added token's lstrip and rstrip (the regex crate).",
         strip_spaces(), "added_token_spaces"),
    ]
    text = [
        f"// Generated by tests/text/make_unicode_tables.py from tokenizers {__version__}: do not",
        "// edit. The character classes the library computes with, measured on the library itself",
        "// (its Unicode versions are not the system's ICU's; see the script).",
        "",
        '#include "detail/unicode_classes.hpp"',
        "",
        "namespace shardwise::text::detail {",
        "namespace {",
        "",
    ]
    for name, comment, code_points, _ in tables:
        text += [table(name, comment, code_points), ""]
    text += ["}  // namespace", ""]
    for name, _, _, function in tables:
        text += [f"std::span<const CodePointRange> {function}() {{ return k{name}; }}"]
    text += ["", "}  // namespace shardwise::text::detail", ""]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(text))
    if shutil.which("clang-format"):  # the repository's style, which CI checks
        subprocess.run(["clang-format", "-i", out], check=True)
    print(f"wrote {out}: " + ", ".join(f"{n} {len(ranges(c))} ranges" for n, _, c, _ in tables))


if __name__ == "__main__":
    main()
