#!/usr/bin/env python3
"""Builds packtrain's default corpus from real text that ships with Debian packages (none of it written here).

  text          fortunes (fortune-mod's databases): short to medium documents
  messages      fortunes written as "Q: ... A: ..." become one-turn chats
  prompt/compl. WordNet (wordnet-base): "Define \"x\"." -> all senses of x, numbered
  prompt/compl. manual pages of core packages, one example per section ("NAME", "OPTIONS", ...):
                the long tail, up to tens of thousands of characters

The mix is long-tailed like SFT data: the median example is far shorter than the longest. Standard library
only; deterministic for a given set of installed packages. Usage: build_corpus.py OUTPUT.jsonl
"""
import hashlib
import json
import os
import random
import re
import subprocess
import sys

FORTUNE_DIR = "/usr/share/games/fortunes"
WORDNET_DIR = "/usr/share/wordnet"
MAN_PACKAGES = ["coreutils", "findutils", "grep", "sed", "tar", "gzip", "util-linux", "procps", "diffutils",
                "man-db", "dpkg", "apt", "bash", "make", "openssh-client"]
WORDNET_SAMPLE = 12000
SEED = 1234
POS_NAMES = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}


def fortunes():
    for name in sorted(os.listdir(FORTUNE_DIR)):
        path = os.path.join(FORTUNE_DIR, name)
        if "." in name or not os.path.isfile(path):
            continue  # skip the .dat indexes and .u8 links
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                entry = entry.strip("\n%")
                if entry.strip():
                    yield entry


def fortune_record(entry):
    m = re.match(r"^Q:\s*(.+?)\nA:\s*(.+)$", entry, re.S)
    if m:
        clean = lambda s: re.sub(r"\s*\n\s*", " ", s).strip()
        return {"messages": [{"role": "user", "content": clean(m.group(1))},
                             {"role": "assistant", "content": clean(m.group(2))}]}
    return {"text": entry}


def wordnet_entries():
    # One dictionary entry per word: all its senses, numbered, so common words give long entries.
    senses = {}
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(WORDNET_DIR, "data." + pos), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(" ") or "|" not in line:
                    continue  # licence header
                fields, gloss = line.split("|", 1)
                parts = fields.split()
                for i in range(int(parts[3], 16)):
                    word = re.sub(r"\(.*\)$", "", parts[4 + 2 * i]).replace("_", " ")
                    senses.setdefault(word, []).append(f"({POS_NAMES[pos]}) {gloss.strip()}")
    words = sorted(senses)
    random.Random(SEED).shuffle(words)
    return [{"prompt": f"Define \"{w}\".\n",
             "completion": "\n".join(f"{i + 1}. {g}" for i, g in enumerate(senses[w]))}
            for w in words[:WORDNET_SAMPLE]]


def man_pages():
    pages = set()
    for pkg in MAN_PACKAGES:
        listing = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True).stdout
        pages.update(p for p in listing.split() if re.search(r"/usr/share/man/man[18]/[^/]+\.[18]\.gz$", p))
    seen = set()
    env = dict(os.environ, MANWIDTH="80", LANG="C.UTF-8")
    for path in sorted(pages):
        if not os.path.exists(path):
            continue
        text = subprocess.run(["man", "-P", "cat", "-l", path], capture_output=True, text=True, env=env,
                              errors="replace").stdout
        digest = hashlib.sha1(text.encode()).hexdigest()
        if not text.strip() or digest in seen:
            continue  # several names can share one page
        seen.add(digest)
        yield os.path.basename(path).rsplit(".", 2)[0], text


def man_sections(page, text):
    # Section headings start in column 0 in upper case; the first and last lines are page headers/footers.
    lines = text.splitlines()[1:-1]
    sections, title, body = [], None, []
    for line in lines:
        if re.match(r"^[A-Z][A-Z0-9 ,/&-]+$", line):
            if title and "\n".join(body).strip():
                sections.append((title, "\n".join(body).strip("\n")))
            title, body = line.strip(), []
        elif title:
            body.append(line)
    if title and "\n".join(body).strip():
        sections.append((title, "\n".join(body).strip("\n")))
    for title, body in sections:
        yield {"prompt": f"From the manual page of {page}, section {title}:\n", "completion": body}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    records = [fortune_record(e) for e in fortunes()]
    records += wordnet_entries()
    for page, text in man_pages():
        records.extend(man_sections(page, text))
    random.Random(SEED).shuffle(records)
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, sys.argv[1])
    kinds = {k: sum(1 for r in records if k in r) for k in ("text", "prompt", "messages")}
    print(f"corpus: {len(records)} records ({kinds}) -> {sys.argv[1]}", file=sys.stderr)


if __name__ == "__main__":
    main()
