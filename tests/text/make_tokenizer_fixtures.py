#!/usr/bin/env python3
"""Writes tests/text/fixtures/: small tokenizers made with Hugging Face's `tokenizers` (and
SentencePiece, and transformers' converter) on the licence texts every Debian machine has
(/usr/share/common-licenses/), and for each what the library computes: the ids of hard strings
(with and without the special tokens the post-processor adds), decoded id sequences, the
vocabulary size, a few token ids. tests/text/tokenizer_fixture_test.cpp holds shardwise's
tokenizer to them, without Python.

  python tests/text/make_tokenizer_fixtures.py [--keep-tokenizers] [OUT_DIR [STYLE ...]]

Without styles it writes them all. With --keep-tokenizers the styles' tokenizer.json files in
OUT_DIR are kept and only their expectations written anew, by the running `tokenizers` (the spm
styles are converted under transformers 4.x, whose environment holds an older `tokenizers`:
their expectations then come from the newer one):

  python-with-transformers-4 tests/text/make_tokenizer_fixtures.py tests/text/fixtures spm_legacy \
      spm spm_legacy_added spm_legacy_normalized_specials
  python tests/text/make_tokenizer_fixtures.py --keep-tokenizers tests/text/fixtures spm_legacy \
      spm spm_legacy_added spm_legacy_normalized_specials

The styles are those of the tokenizers shardwise reads:
  gpt2     ByteLevel with GPT-2's regular expression, <|endoftext|>; merges in the old "a b" form
  llama3   Split on Llama 3's expression + ByteLevel without it, <|begin_of_text|> added by a
           TemplateProcessing, special tokens past the model's vocabulary, ignore_merges
  smollm2  Digits (individual) + ByteLevel, <|endoftext|>, <|im_start|>, <|im_end|>
  added    gpt2's model with a prefix space and added tokens of every option (lstrip, rstrip,
           single_word, normalized or not, special or not, one already in the vocabulary)
  empty_affixes
           a byte-level BPE as the library writes one given "" for continuing_subword_prefix and
           end_of_word_suffix (as transformers' converters give it), with ignore_merges
  handmade tiny vocabularies written here: ignore_merges that changes the ids, unknown
           characters with and without fuse_unk, no pre-tokenizer or decoder at all
  spm_legacy, spm
           a SentencePiece BPE model with byte fallback (trained by the `sentencepiece` package)
           converted by transformers' LlamaTokenizerFast, as Llama 2's, TinyLlama's and
           Mistral's tokenizer.json were: legacy, normalizer [Prepend "▁", Replace " " -> "▁"]
           and no pre-tokenizer (its merges in the old "a b" form, as those files keep them);
           not legacy, a Metaspace pre-tokenizer (prepend_scheme "first", split false). Both
           decode with [Replace "▁" -> " ", ByteFallback, Fuse, Strip] and add <s>. The spm
           styles need transformers 4.x (5.x no longer writes the legacy form), sentencepiece
           and protobuf.
  spm_legacy_added
           spm_legacy with the `added` style's tokens: normalized ones are found as the
           normalizer spells them ("hello" as "▁hello")
  spm_legacy_normalized_specials
           spm_legacy with <unk>, <s> and </s> normalized, as some published files have them:
           "<s>" is then found as "▁<s>", after a space or at a piece's start alone
  metaspace, metaspace_always_split, metaspace_never
           a BPE with byte fallback trained by `tokenizers` under a Metaspace pre-tokenizer, byte
           tokens <0x00>..<0xFF> in its vocabulary: prepend_scheme "first" without split and
           the Metaspace decoder; "always" with split; "never" with the Replace chain
"""
import glob
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from tokenizers import processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB_SIZE = 600

# A few sentences beyond the licences' English, so that merges join the bytes of multi-byte
# characters too (the licences hold almost none).
MULTILINGUAL = [
    "Les données sont réparties entre les rangs; chaque rang garde sa part.",
    "Die Größe des Modells hängt von der Anzahl der Schichten ab.",
    "数据并行把批次分给每个设备，模型并行把权重分开。",
    "データ並列はバッチを分け、モデル並列は重みを分ける。",
    "Каждый ранг хранит свою часть параметров.",
    "كل جهاز يحفظ جزءا من المعاملات",
    "😀 emoji 👍🏽 and 12345 digits, ½ and ٣٤٥",
]

HARD_STRINGS = [
    "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "x", "Hello world",
    "hello  world", " leading space", "trailing space ", "trailing spaces   ",
    "multiple     spaces between words", "tab\tseparated\tvalues\t", "\t\tindented",
    "line one\nline two\n", "crlf line\r\nnext line\r\n", "\r\n\r\n\r\n", "mixed \t \n \r\n  end",
    "  \n  \n  ", "spaces before newline   \nnext", "\n  leading newline", "a\rb", "a \r\n b",
    "1234567", "12345678901234567890", "3.14159", "year 2024 and 1,000,000", "v1.2.3-rc4",
    "٣٤٥ arabic digits", "Ⅻ roman numeral", "½ fraction ¾", "²³ superscripts", "①②③",
    "I'm", "you're", "they'll", "she'd", "it's", "we've", "IT'S", "WE'LL", "I'M", "'S", "'ll",
    "don't", "O'Neil's", "'ſ long s", "'", "''", "rock 'n' roll", "it’s curly",
    "café", "naïve résumé", "e\u0301 combining acute", "Z\u0351\u0352\u0353algo",
    "a\u0308\u0304 stacked marks", "日本語のテキスト", "中文测试，标点。", "한국어 문장",
    "emoji 😀👍🏽", "👨\u200d👩\u200d👧\u200d👦 family", "flag 🇩🇪🇫🇷", "مرحبا بالعالم", "שלום עולם",
    "abc\u200fdef rlm", "\u00a0nbsp\u00a0", "\u3000ideographic\u3000space", "line\u2028separator",
    "next\u0085line", "\x0b\x0c vertical", "zero\u200bwidth", "nul\u0000byte", "\x01\x02\x7f",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "ǅ titlecase", "ＡＢＣ fullwidth １２３", "ﬁ ligature",
    "Hello<|endoftext|>world", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "<|endoftext",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|begin_of_text|>x",
    "a<|end_of_text|>b", "<|begin_of_text|><|end_of_text|>", "<|endoftext|>", "<<|endoftext|>>",
    "!!!???...", "(hello) [world] {x}", "C++ and C# code: x = y + 1;", "snake_case camelCase",
    "https://example.com/path?q=1&r=2", "supercalifragilisticexpialidocious",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "    def f(x):\n        return x\n",
    "the The THE tHe", "License, Version 2.0 (the \"License\")", "Copyright (C) 2007 Free",
]

# The `added` style's tokens and the strings that exercise them.
ADDED_TOKENS = [
    AddedToken("<sep>", special=True, lstrip=True, rstrip=True, normalized=False),
    AddedToken("hello", single_word=True, normalized=True),
    AddedToken("wor", normalized=False),
    AddedToken("world", normalized=True),
    AddedToken("ab", single_word=True, normalized=False),
    AddedToken("the", normalized=False),
    AddedToken(" lic", lstrip=True, normalized=True),
]
ADDED_STRINGS = [
    "say hello there", "sayhello", "hello", "helloworld", "hello_", "(hello)", "héllo hello",
    "  <sep>  x", "a<sep>b", "<sep><sep>", " \t<sep>\n ", "world wor", "worldwide", "the other",
    "ab cab ab abc", "ab", " ab ", "x  lic licence", "lic", "  license", "hello\u00a0world",
]


def corpus():
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    return texts + MULTILINGUAL * 200


def train(model, pre_tokenizer, special_tokens):
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizer
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    return tokenizer


def gpt2():
    tokenizer = train(models.BPE(),
                      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                      ["<|endoftext|>"])
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def legacy_merges(text):
    """GPT-2's own file keeps its merges as "a b" strings (byte-level tokens hold no space)."""
    document = json.loads(text)
    document["model"]["merges"] = [" ".join(pair) for pair in document["model"]["merges"]]
    return json.dumps(document, ensure_ascii=False, indent=2)


def llama3():
    tokenizer = train(models.BPE(ignore_merges=True), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ]), [])
    tokenizer.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>"])
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def smollm2():
    tokenizer = train(models.BPE(), pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ]), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def added(base):
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tokenizer.add_tokens(ADDED_TOKENS)
    return tokenizer


def empty_affixes():
    tokenizer = Tokenizer(models.BPE(ignore_merges=True, continuing_subword_prefix="",
                                     end_of_word_suffix=""))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  continuing_subword_prefix="", end_of_word_suffix="",
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    model = json.loads(tokenizer.to_str())["model"]
    assert model["continuing_subword_prefix"] == "" and model["end_of_word_suffix"] == "", model
    return tokenizer


def handmade(name):
    """Tiny tokenizers whose ids a trained one would not show."""
    vocab = {"a": 0, "b": 1, "c": 2, "\u0120": 3, "ab": 4, "bc": 5, "abc": 6, "\u0120a": 7,
             "<unk>": 8}
    model = {"type": "BPE", "dropout": None, "unk_token": None,
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
             "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
             "merges": [["b", "c"], ["a", "b"], ["\u0120", "a"]]}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    document = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
                "decoder": byte_level, "model": model}
    if name == "handmade_ignore_merges":  # "abc" is in the vocabulary, merges give a + bc
        model["ignore_merges"] = True
    elif name == "handmade_unk":
        model["unk_token"] = "<unk>"
    elif name == "handmade_fuse_unk":
        model["unk_token"] = "<unk>"
        model["fuse_unk"] = True
    elif name == "handmade_bare":  # no pre-tokenizer, no decoder: raw text into the model
        document["pre_tokenizer"] = None
        document["decoder"] = None
    return Tokenizer.from_str(json.dumps(document))


HANDMADE_STRINGS = ["abc", "abc abc", "xyz abc", "cab", "ab", "a b c", "abcabc", "zzz", "a z a",
                    "bcx", "", " abc", "aé"]


SPM_VOCAB_SIZE = 1000
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]
SPM_SPECIALS = ["<unk>", "<s>", "</s>"]

# What SentencePiece-style tokenizers make hard: spaces that the normalizer or Metaspace respells,
# a "▁" already in the text, characters outside the vocabulary (byte fallback), the special
# tokens <s>, </s>, <unk> and text that spells a byte token.
SPM_STRINGS = [
    "<s>", "</s>", "<unk>", "<s>Hello", "Hello</s>", "a<s>b", "<s> x", " <s>", "x <s> y",
    "<s><s>", "</s>world", "<unk>x<unk>", "<0x41>", "<0x0A> newline token", "▁", "▁▁x",
    "▁leading meta", "a▁b", " ▁ ", "𝔘 and 𐍈 out of vocabulary", "́", "🤗", "ÿ",
    "􏿿", "�", "😀😀", "x y",
]


def train_sentencepiece(model_path):
    import io
    import sentencepiece

    lines = [line for text in corpus() for line in text.splitlines() if line.strip()]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, model_type="bpe",
        vocab_size=SPM_VOCAB_SIZE, byte_fallback=True, character_coverage=0.9995,
        split_digits=True, allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", add_dummy_prefix=True, unk_id=0, bos_id=1,
        eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
    with open(model_path, "wb") as f:
        f.write(model.getvalue())


def spm_converted(legacy):
    """LlamaTokenizerFast's conversion of a SentencePiece model, as the published files hold."""
    import tempfile

    import transformers
    from transformers import LlamaTokenizerFast

    if int(transformers.__version__.split(".")[0]) >= 5:
        sys.exit(f"the spm styles need transformers 4.x, not {transformers.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        model_path = os.path.join(folder, "tokenizer.model")
        train_sentencepiece(model_path)
        converted = LlamaTokenizerFast(vocab_file=model_path, legacy=legacy, from_slow=True,
                                       add_prefix_space=True)
        return Tokenizer.from_str(converted.backend_tokenizer.to_str())


def with_added_tokens(base):
    tokenizer = Tokenizer.from_str(base.to_str())
    tokenizer.add_tokens(ADDED_TOKENS)
    return tokenizer


def with_normalized_specials(base):
    document = json.loads(base.to_str())
    for token in document["added_tokens"]:
        token["normalized"] = True
    return Tokenizer.from_str(json.dumps(document))


def metaspace_model():
    """A BPE with byte fallback trained under Metaspace, <unk> <s> </s> and the byte tokens
    first in its vocabulary, as SentencePiece orders them."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=SPM_VOCAB_SIZE - len(BYTE_TOKENS),
                                  special_tokens=SPM_SPECIALS, limit_alphabet=150,
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    model = json.loads(tokenizer.to_str())["model"]
    learnt = sorted((token for token in model["vocab"] if token not in SPM_SPECIALS),
                    key=model["vocab"].get)
    vocab = {token: i for i, token in enumerate(SPM_SPECIALS + BYTE_TOKENS + learnt)}
    merges = [tuple(pair) for pair in model["merges"]]
    return models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True,
                      fuse_unk=True)


def sentencepiece_style(model, pre_tokenizer, decoder):
    tokenizer = Tokenizer(model)
    tokenizer.add_special_tokens([AddedToken(token, normalized=False) for token in SPM_SPECIALS])
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoder
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B:1", special_tokens=[("<s>", 1)])
    return tokenizer


def metaspace(model, name):
    sentencepiece_decoders = decoders.Sequence([decoders.Replace("▁", " "),
                                                decoders.ByteFallback(), decoders.Fuse()])
    if name == "metaspace":
        return sentencepiece_style(
            model, pre_tokenizers.Metaspace(prepend_scheme="first", split=False),
            decoders.Metaspace(prepend_scheme="first", split=False))
    if name == "metaspace_always_split":
        return sentencepiece_style(
            model, pre_tokenizers.Metaspace(prepend_scheme="always", split=True),
            decoders.Metaspace(prepend_scheme="always", split=True))
    return sentencepiece_style(
        model, pre_tokenizers.Metaspace(prepend_scheme="never", split=False),
        sentencepiece_decoders)


def decode_cases(tokenizer, strings, rng):
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    sequences = [[i] for i in range(size)]
    for text in strings:
        ids = tokenizer.encode(text).ids
        sequences.append(ids)
        if any(ord(c) > 127 for c in text):  # prefixes that cut multi-byte characters
            sequences += [ids[:k] for k in range(1, len(ids))][:8]
    sequences += [[rng.randrange(size) for _ in range(rng.randint(1, 12))] for _ in range(150)]
    return [{"ids": ids, "text": tokenizer.decode(ids, skip_special_tokens=False),
             "text_skipping_special": tokenizer.decode(ids, skip_special_tokens=True)}
            for ids in sequences]


def expectations(tokenizer, strings, rng):
    probes = ["<|endoftext|>", "<|begin_of_text|>", "<|im_end|>", "<sep>", "the", "\u0120the",
              "abc", "not a token", "", "<s>", "</s>", "<unk>", "<0x0A>", "\u2581the", "\u2581"]
    return {
        "library": f"tokenizers {tokenizers.__version__}",
        "vocab_size": tokenizer.get_vocab_size(with_added_tokens=True),
        "token_to_id": {token: tokenizer.token_to_id(token) for token in probes},
        "encode": [{"text": text, "ids": tokenizer.encode(text).ids,
                    "ids_without_special": tokenizer.encode(text, add_special_tokens=False).ids}
                   for text in strings],
        "decode": decode_cases(tokenizer, strings, rng),
    }


def one_entry_a_line(document):
    """JSON with each list entry on a line of its own: small, and diffs show the cases."""
    dump = lambda value: json.dumps(value, ensure_ascii=False)
    lines = []
    for key, value in document.items():
        if isinstance(value, list):
            entries = ",\n".join("  " + dump(entry) for entry in value)
            lines.append(f"{dump(key)}: [\n{entries}\n]")
        else:
            lines.append(f"{dump(key)}: {dump(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write(out_dir, name, make, strings, rewrite=lambda text: text, keep=False):
    """Writes `name`'s tokenizer.json (`make()` makes the tokenizer; with `keep`, the file there
    is kept) and its expectations."""
    rng = random.Random(name)
    if not keep:
        with open(os.path.join(out_dir, name + ".tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(rewrite(make().to_str(pretty=True)))
    # The file as written is what the test reads: expectations come from reading it back.
    with open(os.path.join(out_dir, name + ".tokenizer.json"), encoding="utf-8") as f:
        tokenizer = Tokenizer.from_str(f.read())
    with open(os.path.join(out_dir, name + ".expected.json"), "w", encoding="utf-8") as f:
        f.write(one_entry_a_line(expectations(tokenizer, strings, rng)))


def main():
    arguments = sys.argv[1:]
    keep = "--keep-tokenizers" in arguments
    arguments = [argument for argument in arguments if argument != "--keep-tokenizers"]
    out_dir = arguments[0] if arguments else os.path.join(os.path.dirname(__file__), "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    wanted = set(arguments[1:])
    made = {}  # tokenizers that several styles start from, made once

    def once(name, make):
        return lambda: made[name] if name in made else made.setdefault(name, make())

    base = once("gpt2", gpt2)
    spm_legacy = once("spm_legacy", lambda: spm_converted(legacy=True))
    metaspace_base = once("metaspace", metaspace_model)
    spm_strings = HARD_STRINGS + SPM_STRINGS
    styles = [
        ("gpt2", base, HARD_STRINGS, legacy_merges),
        ("llama3", llama3, HARD_STRINGS, None),
        ("smollm2", smollm2, HARD_STRINGS, None),
        ("added", lambda: added(base()), HARD_STRINGS + ADDED_STRINGS, None),
        ("empty_affixes", empty_affixes, HARD_STRINGS, None),
    ] + [(name, lambda name=name: handmade(name), HANDMADE_STRINGS, None)
         for name in ["handmade_ignore_merges", "handmade_merges", "handmade_unk",
                      "handmade_fuse_unk", "handmade_bare"]] + [
        ("spm_legacy", spm_legacy, spm_strings, legacy_merges),
        ("spm", lambda: spm_converted(legacy=False), spm_strings, None),
        ("spm_legacy_added", lambda: with_added_tokens(spm_legacy()),
         spm_strings + ADDED_STRINGS, None),
        ("spm_legacy_normalized_specials", lambda: with_normalized_specials(spm_legacy()),
         spm_strings, legacy_merges),
    ] + [(name, lambda name=name: metaspace(metaspace_base(), name), spm_strings, None)
         for name in ["metaspace", "metaspace_always_split", "metaspace_never"]]
    unknown = wanted - {name for name, *_ in styles}
    if unknown:
        sys.exit(f"unknown styles: {sorted(unknown)}")
    for name, make, strings, rewrite in styles:
        if not wanted or name in wanted:
            write(out_dir, name, make, strings, rewrite or (lambda text: text), keep)
    print(f"wrote {out_dir}")


if __name__ == "__main__":
    main()
