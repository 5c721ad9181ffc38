"""The package installs and imports where it says it does: the declared bounds are the ones the
committed stubs check at import, the floor-pins environment installs exactly those floors, and the
distributions carry the version, the license and a real description (and no tests)."""

from __future__ import annotations

import email
import importlib.metadata
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import agentsessions

PYTHON_DIR = Path(__file__).resolve().parent.parent
PB_DIR = PYTHON_DIR / "agentsessions" / "_pb"


def project() -> dict[str, object]:
    data = tomllib.loads((PYTHON_DIR / "pyproject.toml").read_text())
    project = data["project"]
    assert isinstance(project, dict)
    return project


def requirement(specs: list[str], name: str) -> str:
    (found,) = [s for s in specs if re.match(rf"{re.escape(name)}\s*[<>=!~]", s)]
    return found.removeprefix(name)


def floors() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (PYTHON_DIR / "floor-pins.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    return pins


def stub_grpc_version() -> str:
    text = (PB_DIR / "session_pb2_grpc.py").read_text()
    match = re.search(r"GRPC_GENERATED_VERSION = '([\d.]+)'", text)
    assert match
    return match.group(1)


def stub_protobuf_version() -> tuple[int, int, int]:
    text = (PB_DIR / "session_pb2.py").read_text()
    match = re.search(r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),", text)
    assert match
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def test_declared_bounds_are_what_the_stubs_check_at_import() -> None:
    dependencies = project()["dependencies"]
    assert isinstance(dependencies, list)
    assert requirement(dependencies, "grpcio") == f">={stub_grpc_version()}"
    major, minor, patch = stub_protobuf_version()
    assert requirement(dependencies, "protobuf") == f">={major}.{minor}.{patch},<{major + 1}"


def test_every_extra_has_an_upper_bound_and_its_floor_is_tested() -> None:
    extras = project()["optional-dependencies"]
    assert isinstance(extras, dict)
    pins = floors()
    dependencies = project()["dependencies"]
    assert isinstance(dependencies, list)
    adapters = [*extras["langgraph"], *extras["openai-agents"]]
    for spec in [*dependencies, *adapters]:
        name = re.split(r"[<>=!~]", spec, maxsplit=1)[0]
        bounds = spec.removeprefix(name)
        # grpcio's generated code checks only a floor; protobuf's and the frameworks' majors break.
        assert name == "grpcio" or "<" in bounds, f"{spec} has no upper bound"
        floor = re.search(r">=([\w.]+)", bounds)
        assert floor, spec
        assert pins[name] == floor.group(1), f"floor-pins.txt tests {name}=={pins.get(name)}, pyproject says {spec}"


def test_the_installed_versions_are_inside_the_declared_bounds() -> None:
    # The environment the tests run in (requirements.lock or floor-pins.txt) is one pyproject allows.
    assert importlib.metadata.version("grpcio") >= stub_grpc_version()
    import google.protobuf

    major, minor, _ = stub_protobuf_version()
    installed = tuple(int(p) for p in google.protobuf.__version__.split(".")[:2])
    assert installed[0] == major and installed >= (major, minor)


def test_version_is_the_distributions() -> None:
    assert agentsessions.__version__ == importlib.metadata.version("agentsessions")


def test_distributions_carry_license_description_and_no_tests(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    build = (
        "import sys; from setuptools import build_meta as b; "
        "out = sys.argv[1]; s = b.build_sdist(out); w = b.build_wheel(out); print('built', s, w)"
    )
    done = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=PYTHON_DIR, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    _, sdist_name, wheel_name = done.stdout.strip().splitlines()[-1].split()
    license_text = (PYTHON_DIR.parent / "LICENSE").read_text()
    assert "MIT License" in license_text and (PYTHON_DIR / "LICENSE").read_text() == license_text

    with zipfile.ZipFile(tmp_path / wheel_name) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_string(wheel.read(metadata_name).decode())
        licenses = [n for n in names if n.endswith("/LICENSE")]
        assert licenses and wheel.read(licenses[0]).decode() == license_text
    assert metadata["Version"] == agentsessions.__version__
    assert metadata["License-Expression"] == "MIT"
    description = metadata.get_payload()
    assert isinstance(description, str) and "harness" in description and len(description) > 1000

    with tarfile.open(tmp_path / sdist_name) as sdist:
        members = [m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name]
    assert "LICENSE" in members and "README.md" in members
    assert not [m for m in members if m.startswith(("tests/", "bench/", "tools/"))], members
