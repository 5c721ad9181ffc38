#!/usr/bin/env bash
# The Python package's checks: a virtual environment made from requirements.lock (kept at
# $AGENTSESSIONS_PY_VENV, default python/.venv, and remade only when the lock changes), the stubs
# checked against crates/wire/proto, mypy --strict, then pytest against the daemon built by cargo
# ($AGENTSESSIONS_BIN_DIR, default target/debug).
set -euo pipefail
cd "$(dirname "$0")"
venv="${AGENTSESSIONS_PY_VENV:-$(pwd)/.venv}"
stamp="$venv/.lock-sha256"
want="$(sha256sum requirements.lock | cut -c1-64)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.lock
  echo "$want" > "$stamp"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
"$venv/bin/python" tools/gen_protos.py --check
"$venv/bin/python" -m mypy
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests
