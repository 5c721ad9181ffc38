"""The Python examples of the README, python/README.md and docs/python.md type-check with
``mypy --strict`` as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "python" / "README.md", REPO / "docs" / "python.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for i, match in enumerate(BLOCK.finditer(doc.read_text())):
            found.append((f"{doc.relative_to(REPO)}#{i}", match.group(1)))
    return found


def test_examples_pass_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    found = blocks()
    assert len(found) >= 4
    # As a user sees the installed package: mypy reports no errors inside site-packages (the
    # package is checked on its own by python/ci.sh).
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n[mypy-agentsessions.*]\nignore_errors = True\n")
    files = []
    for i, (_, code) in enumerate(found):
        files.append(tmp_path / f"example_{i}.py")
        files[-1].write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--config-file", str(config), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(REPO / "python")},
    )
    failing = {found[int(m)][0] for m in re.findall(r"example_(\d+)\.py:\d+: error", done.stdout)}
    assert done.returncode == 0, f"{sorted(failing)}\n{done.stdout}"
