#!/bin/sh
# Regenerates fixtures/hf: creates (once) a virtual environment at $VENV (default .venv-ref in the
# repository root, git-ignored) with python3 -m venv, installs the exact pins of
# tools/hf_fixtures/requirements.txt into it, and runs the generator. Extra arguments go to
# generate.py (e.g. --out DIR). pip's own variables apply (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, e.g.
# a CPU-only torch index: the generator never uses a GPU).
set -eu
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv-ref}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r tools/hf_fixtures/requirements.txt
exec "$VENV/bin/python" tools/hf_fixtures/generate.py "$@"
