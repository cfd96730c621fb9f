#!/bin/sh
# Regenerates fixtures/weightwatcher: creates (once) a virtual environment at $VENV (default
# .venv-ww in the repository root) with python3 -m venv, installs the exact pins of
# tools/weightwatcher_ref/requirements.txt into it (no torch: weightwatcher reads its flat-file
# format without it), and runs the generator. Extra arguments go to generate.py (e.g. --out DIR).
set -eu
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv-ww}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r tools/weightwatcher_ref/requirements.txt
exec "$VENV/bin/python" tools/weightwatcher_ref/generate.py "$@"
