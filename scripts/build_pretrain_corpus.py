#!/usr/bin/env python3
"""Builds a pre-training corpus (tens of millions of tokens) from real prose and technical text that ships
in Debian packages; scripts/setup_pretrain_corpus.sh installs them. Nothing here is written by us.

  linux         the kernel's Documentation/ (reStructuredText sources, linux-doc-6.1)
  python        the Python 3.11 documentation (its reStructuredText sources, python3.11-doc)
  cmake         CMake's manual (reStructuredText sources, cmake-doc)
  info          GNU Info manuals: coreutils, gettext, Octave, Maxima, Debian Policy, ...
  man           English manual pages of a fixed list of packages (Linux man-pages, Perl, git, gcc, ...)
  html          HTML manuals as text: PostgreSQL, Django, the Debian Administrator's Handbook, the Debian
                Reference, the Rust books, Apache httpd, SQLite
  plain         plain text and Markdown: Vim's help, Node.js API docs, git's guides, the Jargon File

Each source document is cleaned (markup stripped, whitespace normalised), then cut at paragraph boundaries
into documents of at most MAX_CHARS characters, so that nearly all fit 2048 tokens and `packtrain prepare`'s
default truncation loses little. Short pieces and pieces that are mostly not prose (tables of numbers,
indexes, boilerplate) are dropped; exact duplicates (after whitespace normalisation) are dropped.
Standard library only; deterministic for a given set of installed packages (sorted inputs, fixed seed).

Usage: build_pretrain_corpus.py OUTPUT.jsonl [--max-mb N]
"""
import argparse
import concurrent.futures
import glob
import gzip
import hashlib
import html.parser
import json
import os
import random
import re
import subprocess
import sys
import time

SEED = 20240601
MAX_CHARS = 5000  # ~1500 tokens with packtrain's 8k-vocabulary tokenizer (3.3 chars a token)
MIN_CHARS = 600
# Manual pages and Info manuals come from these packages only (not from whatever else is installed), so
# the corpus is the same on every machine where scripts/setup_pretrain_corpus.sh installed them.
MAN_PACKAGES = [
    "manpages", "manpages-dev", "perl-doc", "perl", "git-man", "openssl", "iproute2", "util-linux",
    "coreutils", "binutils-common", "dpkg-dev", "dpkg", "apt", "bash", "procps", "e2fsprogs",
    "openssh-client", "passwd", "curl", "wget", "tmux", "gpg", "findutils", "grep", "sed", "tar", "gzip",
    "diffutils", "man-db", "make", "less", "rsync", "zsh-common", "gawk", "gcc-12", "cpp-12", "groff-base",
    "ncurses-bin", "libpam-modules", "lsof", "strace", "valgrind", "xz-utils", "zstd", "mount",
    "bind9-dnsutils", "tcpdump", "btrfs-progs", "openmpi-bin",
]
INFO_PACKAGES = [
    "coreutils", "findutils", "grep", "sed", "gzip", "diffutils", "gettext", "automake", "m4", "bc", "ed",
    "time", "wget", "gnupg", "nettle-dev", "libtasn1-doc", "bzip2-doc", "readline-common", "info",
    "octave-doc", "maxima-doc", "debian-policy", "developers-reference",
]


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def files(patterns, exclude=None):
    patterns = [patterns] if isinstance(patterns, str) else patterns
    return sorted({p for pattern in patterns for p in glob.glob(pattern, recursive=True)
                   if os.path.isfile(p) and not (exclude and re.search(exclude, p))})


# ---------------------------------------------------------------------------------------------- HTML to text
SKIP_TAGS = {"script", "style", "nav", "head", "noscript", "button", "form", "svg", "select", "textarea",
             "footer"}
SKIP_CLASSES = {"sphinxsidebar", "sphinxsidebarwrapper", "related", "footer", "navheader", "navfooter",
                "headerlink", "sidebar", "sidebar-scrollbox", "menu-bar", "breadcrumb", "breadcrumbs",
                "nav-wrapper", "nav-wide-wrapper", "boring", "toc", "navigation", "top", "up", "copyright",
                "searchbox", "rst-footer-buttons", "topbar", "menu", "nav", "doc-nav", "search-form",
                "lastmod", "docnav", "nosearch", "tagline", "toplang", "bottomlang", "searchmenu"}
SKIP_IDS = {"sidebar", "sidebar-wrapper", "menu-bar", "searchbar", "footer", "page-footer", "quickbar", "hd",
            "ft", "breadcrumbs", "search", "top", "navigation", "page-toc", "rtd-footer-container", "banner",
            "page-header", "path"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
             "track", "wbr"}
BLOCK_TAGS = {"p", "div", "section", "article", "main", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl",
              "dt", "dd", "table", "tr", "blockquote", "pre", "figure", "figcaption", "caption", "hr",
              "details", "summary", "tbody", "thead"}


class HtmlText(html.parser.HTMLParser):
    """Visible text of a page without navigation, with paragraphs, list items and preformatted blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out, self.skip_tag, self.skip_depth, self.pre, self.lang = [], None, 0, 0, ""

    def emit(self, s):
        if s:
            self.out.append(s)

    def handle_starttag(self, tag, attrs):
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth += 1
            return
        a = dict(attrs)
        if tag == "html":
            self.lang = (a.get("lang") or a.get("xml:lang") or "").lower()
        classes = set((a.get("class") or "").split())
        if tag not in VOID_TAGS and (tag in SKIP_TAGS or classes & SKIP_CLASSES or a.get("id") in SKIP_IDS
                                     or a.get("role") == "navigation" or a.get("aria-hidden") == "true"):
            self.skip_tag, self.skip_depth = tag, 1
            return
        if tag == "pre":
            self.pre += 1
        if tag == "br":
            self.emit("\n")
        elif tag == "li":
            self.emit("\n- ")
        elif tag in ("td", "th"):
            self.emit(" ")
        elif tag in BLOCK_TAGS:
            self.emit("\n\n")

    def handle_endtag(self, tag):
        if self.skip_tag:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if not self.skip_depth:
                    self.skip_tag = None
            return
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag in BLOCK_TAGS or tag == "li":
            self.emit("\n\n" if tag != "li" else "\n")

    def handle_data(self, data):
        if self.skip_tag:
            return
        if not self.pre:  # outside <pre> whitespace is layout: one space, none at a line start
            data = re.sub(r"\s+", " ", data)
            if not self.out or self.out[-1].endswith("\n"):
                data = data.lstrip(" ")
        self.emit(data)

    def text(self):
        return "".join(self.out)


def html_text(path):
    """The page's text, or "" for a page in another language than English (a manual's untranslated rest)."""
    parser = HtmlText()
    parser.feed(read(path))
    parser.close()
    return parser.text() if parser.lang[:2] in ("", "en") else ""


# ----------------------------------------------------------------------------------------------- man / info
# Left-aligned and unhyphenated: justification pads lines with spaces and hyphenation splits words, both
# artefacts of the terminal. man(7) macros call .ad again at every paragraph, so .ad itself becomes a no-op.
MAN_PRELUDE = b".ad l\n.rn ad ad_orig\n.de ad\n..\n"


def man_text(path):
    with gzip.open(path) as f:
        src = f.read()
    # A first line '\" names the preprocessors (tbl, eqn) man must run: it stays first.
    first, _, rest = src.partition(b"\n") if src.startswith(b"'\\\"") else (b"", b"", src)
    src = (first + b"\n" if first else b"") + MAN_PRELUDE + rest
    env = dict(os.environ, MANWIDTH="80", LANG="C.UTF-8", MANROFFOPT="-rHY=0")
    env.pop("MAN_KEEP_FORMATTING", None)
    out = subprocess.run(["man", "-P", "cat", "-l", "-"], input=src, capture_output=True, env=env,
                         cwd="/usr/share/man").stdout
    lines = out.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[1:-1])  # page header and footer


def package_files(packages, pattern):
    """Installed regular files of the packages whose paths match pattern, sorted."""
    paths = set()
    for pkg in packages:
        lists = glob.glob(f"/var/lib/dpkg/info/{pkg}.list") + glob.glob(f"/var/lib/dpkg/info/{pkg}:*.list")
        for lst in lists:
            with open(lst) as f:
                paths.update(p for p in f.read().split("\n") if re.match(pattern, p))
    return sorted(p for p in paths if os.path.isfile(p) and not os.path.islink(p))


def man_pages():
    # English pages only (translations live in /usr/share/man/LANG/). Alternative names of one page (links
    # and .so stubs) give duplicates, dropped by content hash later.
    paths = package_files(MAN_PACKAGES, r"/usr/share/man/man[1-8]/[^/]+\.gz$")
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for path, text in zip(paths, pool.map(man_text, paths)):
            yield path, text


def info_manuals():
    """One document per Info manual: its nodes without headers, menus or indexes, in file order."""
    by_manual = {}
    for path in package_files(INFO_PACKAGES, r"/usr/share/info/[^/]+\.info(-\d+)?(\.gz)?$"):
        name = re.sub(r"\.info(-\d+)?(\.gz)?$", "", os.path.basename(path))
        part = re.search(r"\.info-(\d+)", path)
        by_manual.setdefault(name, []).append((int(part.group(1)) if part else 0, path))
    for name in sorted(by_manual):
        nodes = []
        for _, path in sorted(by_manual[name]):
            for node in read(path).split("\x1f")[1:]:
                node = node.lstrip("\x0c\n")
                if not node.startswith("File:") or re.match(r"File:.*Node: [^,]*Index", node):
                    continue  # tag tables, indirect tables, indexes
                body = node.split("\n", 1)[1] if "\n" in node else ""
                body = re.sub(r"\n\* Menu:.*?(?=\n\n[^*\n]|\Z)", "\n", body, flags=re.S)
                nodes.append(body.replace("\x00\x08[index\x00\x08]", "").replace("\x7f", ""))
        yield f"/usr/share/info/{name}", "\n\n".join(nodes)


# ------------------------------------------------------------------------------------------------- sources
def html_source(pattern, exclude=None):
    """Pages as text, without the lines that recur on many pages of the manual (headers, banners)."""
    def gen():
        pages = [(path, clean(html_text(path))) for path in files(pattern, exclude)]
        counts = {}
        for _, text in pages:
            for line in set(text.split("\n")):
                counts[line] = counts.get(line, 0) + 1
        frequent = {l for l, n in counts.items() if l.strip() and n >= max(5, 0.2 * len(pages))}
        for path, text in pages:
            yield path, "\n".join(l for l in text.split("\n") if l not in frequent)
    return gen


def text_source(pattern, exclude=None):
    def gen():
        for path in files(pattern, exclude):
            yield path, read(path)
    return gen


GIT = "/usr/share/doc/git-doc/"
RUST = "/usr/share/doc/rust-doc/html/"
RUST_BOOKS = ["book", "reference", "nomicon", "rust-by-example", "edition-guide", "embedded-book", "rustc",
              "rustdoc", "unstable-book"]
SOURCES = [
    ("linux", text_source("/usr/share/doc/linux-doc-6.1/Documentation/**/*.*.gz",
                          r"/translations/|\.(yaml|svg|dot|py|sh|pl)\.gz$")),
    ("python", text_source("/usr/share/doc/python3.11/html/_sources/**/*.txt")),
    ("cmake", text_source("/usr/share/doc/cmake-data/html/_sources/**/*.txt")),
    ("info", info_manuals),
    ("man", man_pages),
    ("postgresql", html_source("/usr/share/doc/postgresql-doc-15/html/*.html")),
    ("django", html_source("/usr/share/doc/python-django-doc/html/**/*.html", r"/_modules/|genindex|search")),
    ("debian-handbook", html_source("/usr/share/doc/debian-handbook/html/en-US/*.html")),
    ("debian-reference", html_source("/usr/share/debian-reference/*.en.html")),
    ("rust-books", html_source([f"{RUST}{book}/**/*.html" for book in RUST_BOOKS])),
    ("apache", html_source("/usr/share/doc/apache2-doc/manual/en/**/*.html")),
    ("sqlite", html_source("/usr/share/doc/sqlite3/**/*.html")),
    ("vim", text_source("/usr/share/vim/vim90/doc/*.txt")),
    ("nodejs", text_source("/usr/share/doc/nodejs/api/*.md.gz", r"/all\.md")),
    # git's guides; the rest of git-doc is the source of git's manual pages
    ("git", text_source([GIT + "[A-Z]*.txt", GIT + "user-manual.txt", GIT + "technical/*.txt",
                         GIT + "howto/*.txt"])),
    ("jargon", text_source("/usr/share/doc/jargon-text/jargon.txt.gz")),
]


# ------------------------------------------------------------------------------------------ cleaning, cuts
def clean(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f\u00ad\ufeff]", "", text)
    text = re.sub(r"[ \u00a0]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def cut(text):
    """Pieces of at most MAX_CHARS, cut at blank lines (or line ends, for very long paragraphs)."""
    pieces, cur = [], ""
    for para in re.split(r"\n\n+", text):
        while len(para) > MAX_CHARS:  # a huge block: cut at the last line end that fits
            at = para.rfind("\n", 0, MAX_CHARS)
            at = at if at > MAX_CHARS // 4 else MAX_CHARS
            if cur:
                pieces.append(cur)
                cur = ""
            pieces.append(para[:at])
            para = para[at:].lstrip("\n")
        if cur and len(cur) + 2 + len(para) > MAX_CHARS:
            pieces.append(cur)
            cur = ""
        cur = cur + "\n\n" + para if cur else para
    if cur:
        if pieces and len(cur) < MIN_CHARS and len(pieces[-1]) + len(cur) + 2 <= MAX_CHARS * 1.2:
            pieces[-1] += "\n\n" + cur
        else:
            pieces.append(cur)
    return pieces


FUNCTION_WORDS = set("the of and to a in is that for it with as be on by this are or an".split())


def is_prose(doc):
    """Rejects pieces that are mostly not English sentences: tables of numbers, symbol lists, indexes,
    link farms, text in other languages."""
    if len(doc) < MIN_CHARS:
        return False
    letters = sum(c.isalpha() for c in doc)
    visible = len(doc) - sum(c.isspace() for c in doc)  # indentation says nothing about prose
    words = re.findall(r"[A-Za-z]+", doc)
    lines = [l for l in doc.split("\n") if l.strip()]
    return (letters >= 0.6 * visible and len(words) >= 80 and
            sum(w.lower() in FUNCTION_WORDS for w in words) >= 0.04 * len(words) and
            len(set(lines)) >= 0.6 * len(lines) and sum(len(l) < 25 for l in lines) <= 0.7 * len(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output")
    ap.add_argument("--max-mb", type=float, default=0, help="cap the text at this many MB (0: no cap)")
    args = ap.parse_args()
    start = time.time()
    seen, docs = set(), []
    for name, source in SOURCES:
        t0, n_in, n_out, chars = time.time(), 0, 0, 0
        for _, text in source():
            n_in += 1
            for doc in cut(clean(text)):
                key = hashlib.sha1(re.sub(r"\s+", " ", doc).strip().encode()).digest()
                if key in seen or not is_prose(doc):
                    continue
                seen.add(key)
                docs.append(doc)
                n_out += 1
                chars += len(doc)
        print(f"  {name:17s} {n_in:6d} inputs -> {n_out:6d} documents, {chars / 1e6:7.1f} M chars "
              f"({time.time() - t0:.0f} s)", file=sys.stderr)
    random.Random(SEED).shuffle(docs)
    if args.max_mb:
        budget, kept = args.max_mb * 1e6, []
        for doc in docs:
            budget -= len(doc.encode())
            if budget < 0:
                break
            kept.append(doc)
        docs = kept
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    os.replace(tmp, args.output)
    mb = sum(len(d.encode()) for d in docs) / 1e6
    print(f"pretrain corpus: {len(docs)} documents, {mb:.1f} MB of text -> {args.output} "
          f"({time.time() - start:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
