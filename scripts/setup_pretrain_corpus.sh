#!/usr/bin/env bash
# Builds data/pretrain/corpus.jsonl (~125 MB of text, ~36M train tokens with the default tokenizer) for runs
# that must stay within one epoch, such as bench/sparse_convergence.py. Installs the Debian packages whose
# documentation scripts/build_pretrain_corpus.py reads (idempotent: a second run installs nothing), then
# runs it (about 2-3 minutes on 2 cores). Usage: setup_pretrain_corpus.sh [OUTPUT.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-data/pretrain/corpus.jsonl}"

DEB_PACKAGES=(
  python3 man-db groff-base
  # manuals read as text (reST, HTML, Markdown, plain text)
  linux-doc-6.1 python3.11-doc cmake-doc postgresql-doc-15 python-django-doc debian-handbook
  debian-reference-en rust-doc apache2-doc sqlite3-doc vim-runtime nodejs-doc git-doc jargon-text
  # Info manuals (build_pretrain_corpus.py's INFO_PACKAGES)
  coreutils findutils grep sed gzip diffutils gettext automake m4 bc ed time wget gnupg nettle-dev
  libtasn1-doc bzip2-doc readline-common info octave-doc maxima-doc debian-policy developers-reference
  # manual pages (build_pretrain_corpus.py's MAN_PACKAGES): tools and libraries, no services
  manpages manpages-dev perl-doc perl git-man openssl iproute2 util-linux binutils-common dpkg-dev dpkg apt
  bash procps e2fsprogs openssh-client passwd curl tmux gpg tar make less rsync zsh-common gawk gcc-12
  cpp-12 ncurses-bin libpam-modules lsof strace valgrind xz-utils zstd mount bind9-dnsutils tcpdump
  btrfs-progs openmpi-bin
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup_pretrain_corpus: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
fi

python3 scripts/build_pretrain_corpus.py "$OUT"
