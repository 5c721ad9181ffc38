"""The examples in python/examples run against the daemon with the offline directive model."""

from __future__ import annotations

import ast
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import OFFLINE_TOOLS, Daemon, HarnessProcess, bin_dir

from agentsessions import Client, pb_common

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    ("script", "ask", "answer"),
    [
        ("langgraph_agent.py", '/tool get_weather {"city": "Paris"}', "get_weather: sunny, 21C"),
        ("openai_agents_agent.py", '/tool get_weather {"city": "Oslo"}', "get_weather: snow, -3C"),
        ("notes_harness.py", "remember the milk", "1 note(s) so far"),
    ],
)
def test_example(
    script: str,
    ask: str,
    answer: str,
    start_daemon: Callable[..., Daemon],
    start_harness: Callable[..., HarnessProcess],
) -> None:
    harness = start_harness(EXAMPLES / script)
    daemon = start_daemon(*OFFLINE_TOOLS, f"--harness=example={harness.address}")
    with Client(daemon.addr) as client:
        result = client.run(ask, harness="example")
        assert answer in result.output
        assert result.records[-1].event.kind == pb_common.EVENT_END
        assert client.verify(result.session.metadata.uid).ok


def docstring_commands(script: Path) -> list[str]:
    """The shell commands of a script's docstring (continuation lines joined)."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    joined = doc.replace("\\\n", " ")
    return [line.strip().rstrip("&").strip() for line in joined.splitlines() if line.startswith("    ")]


@pytest.mark.parametrize(
    ("script", "answer"),
    [
        ("langgraph_agent.py", "get_weather: sunny, 21C"),
        ("openai_agents_agent.py", "get_weather: snow, -3C"),
        ("notes_harness.py", "1 note(s) so far"),
    ],
)
def test_the_docstring_commands_work_as_written(script: str, answer: str, tmp_path: Path) -> None:
    """Run as the docstring says, on free ports instead of the written ones."""
    harness_cmd, daemon_cmd, client_cmd = docstring_commands(EXAMPLES / script)
    ports = {port: free_port() for port in set(re.findall(r"127\.0\.0\.1:(\d+)", " ".join([harness_cmd, daemon_cmd, client_cmd])))}

    def argv(command: str) -> list[str]:
        for written, free in ports.items():
            command = command.replace(f"127.0.0.1:{written}", f"127.0.0.1:{free}")
        words = shlex.split(command)
        if words[0] == "python":
            return [sys.executable, str(EXAMPLES.parent / words[1]), *words[2:]]
        return [str(bin_dir() / words[0]), *words[1:]]

    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent)}
    started = []
    try:
        started.append(subprocess.Popen(argv(harness_cmd), env=env, stdout=subprocess.PIPE, text=True))
        assert started[-1].stdout is not None and "listening" in started[-1].stdout.readline()
        started.append(subprocess.Popen(argv(daemon_cmd), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        assert started[-1].stdout is not None and "listening" in started[-1].stdout.readline()
        done = subprocess.run(argv(client_cmd), cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert answer in done.stdout
    finally:
        for process in started:
            process.kill()
            process.wait()


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])
