#!/usr/bin/env bash
# The Python package's checks: a virtual environment made from requirements.lock (kept at
# $AGENTSESSIONS_PY_VENV, default python/.venv, and remade only when the lock changes), the stubs
# checked against crates/wire/proto, mypy --strict, then pytest against the daemon built by cargo
# ($AGENTSESSIONS_BIN_DIR, default target/debug). Then the tests again in a second environment
# made from floor-pins.txt, the lowest versions pyproject.toml declares (at $venv-floor).
set -euo pipefail
cd "$(dirname "$0")"
venv="${AGENTSESSIONS_PY_VENV:-$(pwd)/.venv}"

# make_venv DIR PINS: DIR holds exactly PINS (remade when PINS changes) and this package.
make_venv() {
  local dir="$1" pins="$2"
  local stamp="$dir/.lock-sha256"
  local want
  want="$(sha256sum "$pins" | cut -c1-64)"
  if [[ ! -x "$dir/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$pins"
    echo "$want" > "$stamp"
  fi
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
}

make_venv "$venv" requirements.lock
"$venv/bin/python" tools/gen_protos.py --check
"$venv/bin/python" -m mypy
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests

floor="$venv-floor"
make_venv "$floor" floor-pins.txt
"$floor/bin/python" -m pip check
"$floor/bin/python" -m pytest -q -p no:cacheprovider tests
