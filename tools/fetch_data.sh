#!/bin/sh
# Fetches the default training corpus, Moby Dick as Debian ships it in golang-github-colinmarc-hdfs-dev,
# without installing anything (apt-get download + dpkg -x), into DIR (default: data/).
set -eu
dir=${1:-data}
out="$dir/mobydick.txt"
if [ -s "$out" ]; then
    echo "data: $out present"
    exit 0
fi
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
if ! apt-get download golang-github-colinmarc-hdfs-dev >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -q >/dev/null
    apt-get download golang-github-colinmarc-hdfs-dev >/dev/null
fi
dpkg -x golang-github-colinmarc-hdfs-dev_*.deb pkg
cd - >/dev/null
cp "$work/pkg/usr/share/gocode/src/github.com/colinmarc/hdfs/testdata/mobydick.txt" "$out.tmp"
mv "$out.tmp" "$out"
echo "data: $out ($(wc -c <"$out") bytes)"
