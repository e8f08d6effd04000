#!/usr/bin/env python3
"""Golden vectors for WordPiece tokenizers: trains small WordPiece vocabularies with HF `tokenizers` on
text installed on this machine, writes them as tokenizer.json files in the configurations of
bert-base-uncased, bert-base-cased and one with every option off its default, and records HF's ids
(without and with special tokens) and decoded text for tricky strings. Also writes bert_chars.json: for
every code point, what HF's BertNormalizer and BertPreTokenizer do with it. Re-runnable: the output
depends only on the inputs.

Usage: pip install tokenizers; python3 scripts/make_wordpiece_fixtures.py
Writes tests/fixtures/tokenizer/<name>.tokenizer.json, <name>.cases.json and bert_chars.json.
"""
import glob
import json
import os
import random

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Words of other scripts mixed into the corpus so that some of their characters get tokens; rarer ones
# (emoji, most CJK) are left out and become [UNK].
FOREIGN = ["日本語", "テキスト", "です", "東京", "中文", "文本", "你好", "世界", "学生", "한국어", "привет", "мир",
           "слово", "café", "naïve", "résumé", "über", "straße", "español", "Ελληνικά", "ñandú", "Å", "don't",
           "it's", "I'm", "we've", "they're", "do not", "$100", "a+b=c", "x<y>z", "2^10", "`code`", "a|b", "~home"]


def corpus_lines():
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")))
    lines = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            lines.extend(line for line in fh.read().splitlines() if line.strip())
    rng = random.Random(7)
    for _ in range(3000):
        lines.append(" ".join(rng.choice(FOREIGN) for _ in range(rng.randint(2, 8))))
    return lines


def train(normalizer, vocab_size, prefix="##"):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=prefix))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
                                        continuing_subword_prefix=prefix)
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    return tok


def bert_uncased():
    # bert-base-uncased as transformers' BertTokenizerFast writes it.
    tok = train(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                           lowercase=True), 2000)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return json.loads(tok.to_str())


def bert_cased():
    # bert-base-cased: accents and case kept; the older BertProcessing post-processor.
    tok = train(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                           lowercase=False), 2000)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return json.loads(tok.to_str())


def wordpiece_options():
    # Every option off its default: accents stripped without lowercasing, no cleaning or CJK spacing,
    # another subword prefix, short words only, no decoder cleanup.
    tok = train(normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                                           lowercase=False), 1500, prefix="@@")
    data = json.loads(tok.to_str())
    data["model"]["max_input_chars_per_word"] = 12
    data["decoder"] = {"type": "WordPiece", "prefix": "@@", "cleanup": False}
    data["post_processor"] = None
    return data


HAND_PICKED = [
    "", " ", "   ", "a", "Hello world", " Hello  world ", "hello\nworld", "tab\there", "\t\t\tx", "line1\r\nline2\r\n",
    "\u00a0nbsp\u00a0x", "ideographic\u3000space", "en\u2003em\u2009thin\u202fnarrow", "nel\u0085x", "vt\x0bff\x0cx",
    "café naïve résumé", "CAFÉ NAÏVE", "e\u0301 a\u0300 o\u0308", "Å vs A\u030a", "\u0301leading mark", "İstanbul ıi",
    "Straße STRASSE", "ﬁ ligature", "Ωmega ὈΔΥΣΣΕΎΣ", "Ελληνικά", "Привет, мир!",
    "日本語のテキストです。", "中文文本，标点符号！", "你好世界", "東京は大きい", "한국어 텍스트", "𠀀𪜀 rare ideographs",
    "emoji 😀😃 👍🏽 👩‍💻", "🇯🇵🇺🇸", "\u2764\ufe0f love",
    "zero\u200bwidth", "zw\u200cnj\u200dj", "bom\ufeffx", "soft\u00adhyphen", "nul\u0000x", "ctl\x01\x7f\x1b",
    "ff\ufffdfd", "private\ue000use", "rtl\u202emark\u202c",
    "Hello, world! How are you?", "don't do not it's I'm we've they're", "he said \"hi\" (twice) [ok] {x}",
    "$100 + 5% = <x> ^y `z` |w| ~v", "a+b=c", "x<y>z", "2^10", "`code`", "a|b", "~home", "#hashtag @user",
    "3.14 and 2,718", "12345678901234567890", "٣٤٥ ０１２ ²½", "1st 2nd 3rd", "A-B_C/D\\E", "...!!!???",
    "«guillemets» „quotes“ ‘single’", "em—dash en–dash", "§¶†‡•", "¡Hola! ¿Qué?", "。、「」『』",
    "##", "##ing", "a ##b", "un##known", "[UNK]", "[CLS] hi [SEP]", "[MASK] is here", "a[SEP]b", "[cls]", "[PAD][PAD]",
    "x" * 99, "x" * 100, "x" * 101, "é" * 101, "abc" * 40, "supercalifragilisticexpialidocious",
    "pneumonoultramicroscopicsilicovolcanoconiosis", "word " * 12, " " * 20, "\n\n\n",
    "qzxj vwkq", "zzzzzzzz", "ǅ ǈ ǋ titlecase", "ΣΑΣ σας", "K Kelvin Å Angstrom",
]


def random_string(rng):
    def rand_range(lo, hi, n):
        return "".join(chr(rng.randint(lo, hi)) for _ in range(n))
    makers = [
        lambda: rng.choice(["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "world"]),
        lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(1, 14))),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6))),
        lambda: "".join(rng.choice(" \t\n") for _ in range(rng.randint(1, 4))),
        lambda: rng.choice([" ", "  ", "\r\n", "\u00a0", "\u3000", "\u200b", "\u2028", "\x0c"]),
        lambda: "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(rng.randint(1, 3))),
        lambda: rng.choice(FOREIGN),
        lambda: rand_range(0x4E00, 0x9FFF, rng.randint(1, 3)),
        lambda: rand_range(0x0410, 0x044F, rng.randint(1, 5)),
        lambda: rand_range(0x00C0, 0x017F, rng.randint(1, 4)),
        lambda: rand_range(0x1F600, 0x1F64F, rng.randint(1, 2)),
        lambda: rand_range(0x2000, 0x206F, 1),
        lambda: rng.choice("aeiouAEIOU") + rand_range(0x0300, 0x036F, rng.randint(1, 2)),
        lambda: rng.choice(["\u00b2", "\u00bd", "\u2167", "\uff11", "\ufb01", "\U0001D518", "\u0130", "\u00df"]),
        lambda: rng.choice(SPECIALS + ["##", "n't", " 's", " do not"]),
    ]
    return "".join(rng.choice(makers)() for _ in range(rng.randint(1, 8)))


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def bert_chars():
    """Per code point: deleted or made a space by clean_text, put between spaces by handle_chinese_chars,
    a pre-token of its own (punctuation) or a split (whitespace) for BertPreTokenizer, deleted after NFD
    by strip_accents (among characters NFD keeps), and its lowercase where it changes."""
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    cjk = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=True)
    nfd = normalizers.NFD()
    pre = pre_tokenizers.BertPreTokenizer()
    sets = {k: set() for k in ["removed", "space", "cjk", "punctuation", "whitespace", "accent"]}
    lowercase = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        s = "a" + c + "a"
        cleaned = clean.normalize_str(s)
        if cleaned == "aa":
            sets["removed"].add(cp)
        elif cleaned == "a a":
            sets["space"].add(cp)
        if cjk.normalize_str(s) == "a " + c + " a":
            sets["cjk"].add(cp)
        pieces = [p for p, _ in pre.pre_tokenize_str(s)]
        if pieces == ["a", c, "a"]:
            sets["punctuation"].add(cp)
        elif pieces == ["a", "a"]:
            sets["whitespace"].add(cp)
        if nfd.normalize_str(c) == c and strip.normalize_str(c) == "":
            sets["accent"].add(cp)
        lowered = lower.normalize_str(c)
        if lowered != c:
            lowercase.append([cp, lowered])
    data = {k: ranges(v) for k, v in sets.items()}
    data["lowercase"] = lowercase
    with open(os.path.join(OUT, "bert_chars.json"), "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, separators=(",", ":"))
        fh.write("\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20240927)
    texts = HAND_PICKED + [random_string(rng) for _ in range(200)]
    for name, build in {"wordpiece_bert_uncased": bert_uncased, "wordpiece_bert_cased": bert_cased,
                        "wordpiece_options": wordpiece_options}.items():
        tok_path = os.path.join(OUT, name + ".tokenizer.json")
        with open(tok_path, "w", encoding="utf-8") as fh:
            json.dump(build(), fh, ensure_ascii=False, separators=(",", ":"))
        tok = Tokenizer.from_file(tok_path)
        cases = []
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "ids_with_special_tokens": tok.encode(text).ids,
                          "decoded": tok.decode(ids, skip_special_tokens=False)})
        with open(os.path.join(OUT, name + ".cases.json"), "w", encoding="utf-8") as fh:
            json.dump({"tokenizer": name + ".tokenizer.json", "cases": cases}, fh, ensure_ascii=False,
                      separators=(",", ":"))
            fh.write("\n")
        print(f"{name}: vocab {tok.get_vocab_size()}, {len(cases)} cases")
    bert_chars()


if __name__ == "__main__":
    main()
