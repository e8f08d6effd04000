#!/usr/bin/env python3
"""Golden vectors for the tokenizer tests: builds small tokenizer.json files with exactly the GPT-2,
Llama-3 and Qwen2 pipelines using HF `tokenizers`, trains them on text installed on this machine, adds
the tokenizer `build/packtrain tokenizer train` writes, and records HF's ids and decoded text for
hand-picked edge cases and seeded random strings. Re-runnable: the output depends only on the inputs.

Usage: python3 scripts/make_tokenizer_fixtures.py   (after scripts/build.sh)
Writes tests/fixtures/tokenizer/<name>.tokenizer.json and <name>.cases.json.
"""
import glob
import json
import os
import random
import subprocess
import tempfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
PACKTRAIN = os.path.join(ROOT, "build", "packtrain")

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def corpus_files():
    fortunes = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                      if os.path.isfile(f) and not f.endswith((".dat", ".u8")))
    return fortunes


def corpus_lines():
    lines = []
    for f in corpus_files():
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines.extend(fh.read().splitlines(keepends=True))
    with open("/usr/share/wordnet/data.noun", encoding="utf-8", errors="replace") as fh:
        lines.extend(fh.read(1_500_000).splitlines(keepends=True))
    return lines


def train(pre_tokenizer, normalizer, vocab_size, specials, ignore_merges=False):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    data = json.loads(tok.to_str())
    data["model"]["ignore_merges"] = ignore_merges
    return data


def merges_as_strings(data):
    data["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in data["model"]["merges"]]
    return data


def build_tokenizers():
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    gpt2 = merges_as_strings(train(byte_level, None, 2000, ["<|endoftext|>"]))

    # The GPT-2 model again with the options real files use less often: a prefix space, added tokens
    # that strip whitespace, match single words only, or are matched after normalisation.
    options = json.loads(json.dumps(gpt2))
    options["pre_tokenizer"]["add_prefix_space"] = True
    options_tok = Tokenizer.from_str(json.dumps(options))
    options_tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=True, special=True, normalized=False)])
    options_tok.add_tokens([AddedToken("ab", single_word=True, normalized=False),
                            AddedToken("hello world", normalized=True)])
    options = json.loads(options_tok.to_str())

    llama_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    llama3 = train(llama_pre, None, 3000, ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                   ignore_merges=True)

    qwen_pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    qwen2 = train(qwen_pre, normalizers.NFC(), 2500, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])

    result = {"gpt2": gpt2, "gpt2_options": options, "llama3": llama3, "qwen2": qwen2}
    for pattern in ("llama3", "qwen2"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            subprocess.run([PACKTRAIN, "tokenizer", "train", "--input", *corpus_files(), "--vocab-size", "1500",
                            "--pattern", pattern, "--output", path, "--threads", "2"],
                           check=True, stderr=subprocess.DEVNULL)
            with open(path, encoding="utf-8") as fh:
                result["packtrain_" + pattern] = json.load(fh)
    return result


HAND_PICKED = [
    "", " ", "  ", "a", "Hello world", " Hello  world ", "hello\nworld", "tab\there", "\t\t\tx",
    "line1\r\nline2\r\n\r\n", "   \n\n   \t\r\n x", "trailing spaces    ", "\n", "\r\n", "\n\n\n",
    "it's we're they've I'm you'll he'd", "IT'S WE'RE THEY'VE I'M YOU'LL HE'D", "It'S dOn'T", "'ſ 'K",
    "12345678901234567890", "3.14159 and 2,718", "year 2024: 1,000,000 items", "x² ½ Ⅻ ٣٤ ０１２",
    "日本語のテキストです。", "中文文本，标点符号！", "한국어 텍스트", "Привет, мир!", "Ελληνικά κείμενα",
    "مرحبا بالعالم", "हिन्दी पाठ", "ภาษาไทย",
    "emoji 😀😃😄 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈", "🇯🇵🇺🇸", "e\u0301 a\u0300 n\u0303 \u1e9b\u0323",
    "Å vs A\u030a", "ﬁ ligature", "café naïve résumé", "mixed日本English123한국",
    "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "<|endoftext|",
    "<|begin_of_text|>Hi<|eot_id|>", "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
    "<mask> x <mask>", "a  <mask>  b", "ab xab ab_ _ab ab.", "hello world hello  world Hello world",
    "def f(x):\n    return x ** 2  # square\n", "if (a && b) { c[i] = d->e; }", "https://example.com/a?b=c&d=e",
    "!!!???...,,,;;;", "$100 #hash @user %50 ^_^ ~~~", "\u00a0nbsp\u00a0\u00a0x", "ideographic\u3000space",
    "nel\u0085x", "ls\u2028ps\u2029", "vt\x0bff\x0c", "zero\u200bwidth", "\u200d\u200c", "soft\u00adhyphen",
    "a" * 300, " " * 100, "\t \n" * 20, "ab" * 150, "😀" * 30, "1" * 50, "word " * 40,
]


def random_string(rng):
    def rand_range(lo, hi, n):
        return "".join(chr(rng.randint(lo, hi)) for _ in range(n))
    makers = [
        lambda: rng.choice(["the", "The", "THE", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]),
        lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(1, 12))),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 9))),
        lambda: "".join(rng.choice(" \t\n\r") for _ in range(rng.randint(1, 6))),
        lambda: rng.choice([" ", "  ", "\r\n", "\n\n", "\u00a0", "\u3000", "\u0085", "\u2028", "\x0b"]),
        lambda: "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(rng.randint(1, 4))),
        lambda: rng.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D"]),
        lambda: rand_range(0x4E00, 0x9FFF, rng.randint(1, 6)),
        lambda: rand_range(0x3041, 0x3093, rng.randint(1, 6)),
        lambda: rand_range(0xAC00, 0xD7A3, rng.randint(1, 4)),
        lambda: rand_range(0x0410, 0x044F, rng.randint(1, 8)),
        lambda: rand_range(0x03B1, 0x03C9, rng.randint(1, 8)),
        lambda: rand_range(0x0627, 0x063A, rng.randint(1, 6)),
        lambda: rand_range(0x0905, 0x0939, rng.randint(1, 6)),
        lambda: rand_range(0x0E01, 0x0E2E, rng.randint(1, 6)),
        lambda: rand_range(0x1F600, 0x1F64F, rng.randint(1, 3)),
        lambda: chr(rng.randint(0x1F466, 0x1F469)) + chr(rng.randint(0x1F3FB, 0x1F3FF)),
        lambda: "\U0001F469\u200d\U0001F4BB" if rng.random() < 0.5 else "\U0001F468\u200d\U0001F469\u200d\U0001F467",
        lambda: rng.choice("aeiouAEIOU") + rand_range(0x0300, 0x036F, rng.randint(1, 2)),
        lambda: rng.choice(["\u00b2", "\u00bd", "\u2167", "\u0663", "\uff11", "\u00e9", "\u00c5", "\ufb01"]),
        lambda: rng.choice(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>",
                            "<mask>", "hello world", "ab", "<|pad|>"]),
    ]
    return "".join(rng.choice(makers)() for _ in range(rng.randint(1, 25)))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20240611)
    texts = HAND_PICKED + [random_string(rng) for _ in range(300)]
    for name, data in build_tokenizers().items():
        tok_path = os.path.join(OUT, name + ".tokenizer.json")
        with open(tok_path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        tok = Tokenizer.from_file(tok_path)
        cases = []
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        with open(os.path.join(OUT, name + ".cases.json"), "w", encoding="utf-8") as fh:
            json.dump({"tokenizer": name + ".tokenizer.json", "cases": cases}, fh, ensure_ascii=False,
                      separators=(",", ":"))
            fh.write("\n")
        print(f"{name}: vocab {tok.get_vocab_size()}, {len(cases)} cases")


if __name__ == "__main__":
    main()
