#!/usr/bin/env python3
"""Golden vectors for SentencePiece-style BPE tokenizers: trains small SentencePiece BPE models on text
installed on this machine, writes them as tokenizer.json files in the exact configurations real models
ship (Llama-2/TinyLlama, Mistral v0.3, Gemma, an older Metaspace file, and what transformers' generic
SentencePiece conversion writes), and records HF `tokenizers`' ids and decoded text for tricky strings.
Re-runnable: the output depends only on the inputs.

Usage: pip install tokenizers sentencepiece; python3 scripts/make_sp_tokenizer_fixtures.py
Writes tests/fixtures/tokenizer/<name>.tokenizer.json and <name>.cases.json.
"""
import glob
import io
import json
import os
import random

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
SPACE = "\u2581"  # "▁"

# Words of other scripts mixed into the corpus so that their characters get pieces of their own; rarer
# characters (emoji, most CJK) are left out and take the byte fallback or <unk>.
FOREIGN = ["日本語", "テキスト", "です", "東京", "中文", "文本", "你好", "世界", "学生", "한국어", "привет", "мир",
           "слово", "café", "naïve", "résumé", "über", "straße", "español", "Ελληνικά", "ñandú", "Å"]


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


def train_sp(vocab_size, byte_fallback, add_dummy_prefix=True, coverage=0.9995, ids=(0, 1, 2, -1),
             names=("<unk>", "<s>", "</s>", "<pad>"), control=(), user_defined=()):
    """A SentencePiece BPE model trained as Llama-2's was (identity normalisation, digits split,
    whitespace-only pieces allowed); ids and names of (unk, bos, eos, pad)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus_lines()), model_writer=model, model_type="bpe", vocab_size=vocab_size,
        byte_fallback=byte_fallback, character_coverage=coverage, split_digits=True,
        allow_whitespace_only_pieces=True, remove_extra_whitespaces=False, normalization_rule_name="identity",
        add_dummy_prefix=add_dummy_prefix, unk_id=ids[0], bos_id=ids[1], eos_id=ids[2], pad_id=ids[3],
        unk_piece=names[0], bos_piece=names[1], eos_piece=names[2], pad_piece=names[3],
        control_symbols=list(control), user_defined_symbols=list(user_defined), num_threads=1,
        minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def bpe_model(sp, user_defined=(), **options):
    """HF BPE from a SentencePiece model: every piece keeps its id; merges join two normal pieces into a
    third, ranked by the merged piece (SentencePiece BPE scores fall with the id), then by the halves."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    normal = {p for p, i in vocab.items()
              if not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))
              and p not in user_defined}
    ranked = []
    for piece in normal:
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in normal and right in normal:
                ranked.append((vocab[piece], vocab[left], vocab[right], left, right))
    merges = [(left, right) for *_, left, right in sorted(ranked)]
    return models.BPE(vocab=vocab, merges=merges, dropout=None, **options)


def specials(tok, names):
    tok.add_special_tokens([AddedToken(n, normalized=False, special=True) for n in names])


def llama2():
    # meta-llama/Llama-2-7b-hf, TinyLlama, Mistral v0.1: the "legacy" conversion.
    sp = train_sp(800, byte_fallback=True)
    tok = Tokenizer(bpe_model(sp, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    specials(tok, ["<unk>", "<s>", "</s>"])
    return json.loads(tok.to_str())


def mistral():
    # mistralai/Mistral-7B-v0.3: no normalizer, Metaspace prefixing only the start of the text.
    sp = train_sp(800, byte_fallback=True, control=["[INST]", "[/INST]"])
    tok = Tokenizer(bpe_model(sp, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    specials(tok, ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"])
    return json.loads(tok.to_str())


def gemma():
    # google/gemma-7b: no dummy prefix, spaces replaced by the normalizer, a Split on " " that finds none.
    sp = train_sp(800, byte_fallback=True, add_dummy_prefix=False, ids=(3, 2, 1, 0),
                  names=("<unk>", "<bos>", "<eos>", "<pad>"), control=["<start_of_turn>", "<end_of_turn>"])
    tok = Tokenizer(bpe_model(sp, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                       special_tokens=[("<bos>", 2)])
    specials(tok, ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"])
    # A plain added token matched after normalisation (as "hello▁world").
    tok.add_tokens([AddedToken("hello world", normalized=True, special=False)])
    return json.loads(tok.to_str())


def metaspace_legacy():
    # Files written by tokenizers < 0.14: Metaspace with add_prefix_space (prepend always, split on
    # every "▁"); no byte fallback, so unknown characters give one <unk> each.
    sp = train_sp(500, byte_fallback=False, coverage=0.995)
    tok = Tokenizer(bpe_model(sp, unk_token="<unk>", fuse_unk=False))
    specials(tok, ["<unk>", "<s>", "</s>"])
    data = json.loads(tok.to_str())
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True}
    data["decoder"] = {"type": "Metaspace", "replacement": SPACE, "add_prefix_space": True}
    return data


def sp_converted():
    # What transformers' generic SentencePiece conversion writes for a model with user-defined symbols
    # and SentencePiece's default normalisation (NFKC here where it writes a Precompiled charsmap):
    # whitespace trimmed and collapsed, Metaspace prefixing the start only, the user symbols isolated,
    # unknown characters fused into one <unk>.
    user = ["<sep>", "@@"]
    sp = train_sp(500, byte_fallback=False, coverage=0.995, user_defined=user)
    tok = Tokenizer(bpe_model(sp, user_defined=user, unk_token="<unk>", fuse_unk=True, ignore_merges=True))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Replace(Regex(r"\A +| +\z"), ""), normalizers.Replace(Regex(" {2,}"), " "),
        normalizers.Replace(" ", SPACE)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first", split=False),
        pre_tokenizers.Split(Regex("<sep>|@@"), behavior="isolated")])
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    specials(tok, ["<unk>", "<s>", "</s>"])
    tok.add_tokens([AddedToken(n, normalized=False, special=False) for n in user])
    return json.loads(tok.to_str())


HAND_PICKED = [
    "", " ", "  ", "   ", "a", "Hello world", " Hello  world ", "hello\nworld", "tab\there", "\t\t\tx",
    "line1\r\nline2\r\n\r\n", " \n \n", "trailing spaces    ", "\n", "\n\n", SPACE, SPACE * 2, SPACE + "hello",
    "a" + SPACE + "b", " " + SPACE + " ", "x " + SPACE + SPACE + " y", "日本語のテキストです。", "中文文本，标点符号！",
    "한국어 텍스트", "Привет, мир!", "café naïve résumé", "e\u0301 a\u0300", "Å vs A\u030a", "ﬁ ligature",
    "x² ½ Ⅻ ٣ ０１２", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "emoji 😀😃 👍🏽 👩‍💻", "🇯🇵🇺🇸", "ᚠᛇᚻ ꙮ 𓀀", "\U0001F9FF\U0001FA00x",
    "<s>", "</s>", "<unk>", "<s>hello", "hello</s>", " <s> hi", "a<s>b</s>c", "<s><s>", "<s> </s>",
    "text <unk> here", "[INST] hi [/INST]", "[INST]hi[/INST] answer</s>", " [INST] x",
    "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad>", "hello world",
    "say hello world twice: hello world", "Hello world hello  world", "<sep>", "a<sep>b", " <sep> ", "a@@b",
    "@@@", "12345678901234567890", "3.14 and 2,718", "def f(x):\n    return x ** 2\n", "\u00a0nbsp\u00a0x",
    "ideographic\u3000space", "zero\u200bwidth", "nul\u0000x", "ctl\x01\x7f\x1b", "<0x41>", "<0xE6>x",
    "a" * 60, " " * 20, "ab" * 30, "😀" * 8, "word " * 12, " " * 5 + "x" + " " * 5,
]


def random_string(rng):
    def rand_range(lo, hi, n):
        return "".join(chr(rng.randint(lo, hi)) for _ in range(n))
    makers = [
        lambda: rng.choice(["the", "The", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "world"]),
        lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randint(1, 8))),
        lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6))),
        lambda: "".join(rng.choice(" \t\n") for _ in range(rng.randint(1, 4))),
        lambda: rng.choice([" ", "  ", "\r\n", SPACE, " " + SPACE, "\u00a0", "\u3000"]),
        lambda: "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(rng.randint(1, 3))),
        lambda: rng.choice(FOREIGN),
        lambda: rand_range(0x4E00, 0x9FFF, rng.randint(1, 3)),
        lambda: rand_range(0x0410, 0x044F, rng.randint(1, 5)),
        lambda: rand_range(0x1F600, 0x1F64F, rng.randint(1, 2)),
        lambda: rng.choice("aeiou") + rand_range(0x0300, 0x036F, 1),
        lambda: rng.choice(["\u00b2", "\u00bd", "\u2167", "\uff11", "\ufb01", "\U0001D518"]),
        lambda: rng.choice(["<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<start_of_turn>", "<end_of_turn>",
                            "<bos>", "<eos>", "hello world", "<sep>", "@@"]),
    ]
    return "".join(rng.choice(makers)() for _ in range(rng.randint(1, 8)))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(20240612)
    texts = HAND_PICKED + [random_string(rng) for _ in range(150)]
    builders = {"sp_llama2": llama2, "sp_mistral": mistral, "sp_gemma": gemma,
                "sp_metaspace_legacy": metaspace_legacy, "sp_converted": sp_converted}
    for name, build in builders.items():
        data = build()
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
