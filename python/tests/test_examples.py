"""The examples in python/examples run against the daemon with the offline directive model."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import OFFLINE_TOOLS, Daemon, HarnessProcess

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
