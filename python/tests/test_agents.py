"""A LangGraph ReAct agent and an OpenAI Agents SDK agent as harnesses of the real daemon, with a
counting OpenAI-wire model: a turn with a tool call; the harness process killed mid-turn then
resumed (the provider is asked at most once more); a replay of a recorded turn with zero provider
calls; a fork whose children diverge. One agent is attached statically (``--harness``), the
other through the HarnessRegistry."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import STUB_KEY_VARIABLE, Daemon, HarnessProcess, StubModel

from agentsessions import Client, RegistryClient, errors, pb_common

AGENTS = Path(__file__).resolve().parent / "agents"
SCRIPTS = {"langgraph": AGENTS / "langgraph_agent.py", "openai_agents": AGENTS / "openai_agents_agent.py"}


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def kinds(records: list[pb_common.LogRecord]) -> list[str]:
    return [pb_common.EventKind.Name(r.event.kind).removeprefix("EVENT_") for r in records]


def wait_for(path: Path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize(("agent", "placement"), [("langgraph", "static"), ("openai_agents", "registered")])
def test_agent_as_a_harness(
    agent: str,
    placement: str,
    tmp_path: Path,
    start_daemon: Callable[..., Daemon],
    start_harness: Callable[..., HarnessProcess],
    stub_model: StubModel,
) -> None:
    script = SCRIPTS[agent]
    address = free_address()
    gate = tmp_path / "gate"
    process = start_harness(script, address, {"AGENT_GATE": str(gate)})
    env = {STUB_KEY_VARIABLE: "stub-key"}
    if placement == "static":
        daemon = start_daemon(*stub_model.model_flags(), f"--harness=agent={address}", env=env)
    else:
        daemon = start_daemon(*stub_model.model_flags(), registry=True, env=env)
        with RegistryClient(daemon.registry) as registry:
            registered = registry.register("agent", address)
            assert registered.harness.metadata.name == "agent"
            observed = registry.get("agent", observe=True)
            assert observed.observed.tools[0].name == "lookup", observed.observe_error

    with Client(daemon.addr) as client:
        # 1. A turn with a tool call: model → tool (run by the agent, reported) → model.
        first = client.run('/tool lookup {"key": "k1"}', harness="agent")
        uid = first.session.metadata.uid
        assert kinds(first.records) == [
            "EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "USAGE", "TOOL_RESULT", "MODEL_CALL", "OUTPUT", "USAGE",
            "END",
        ]  # fmt: skip
        # Each call's usage, as the provider counted it, is the session's.
        assert client.get_session(uid).usage.input_tokens == 10
        assert first.output == "the tool said: value-of-k1"
        assert stub_model.calls == 2

        # 2. Killed in the middle of a turn (inside the tool), then resumed: the recorded model
        # call is served from the journal, the provider is asked only for the call that was cut.
        gate.write_text("hold")
        turn = client.exec('/tool lookup {"key": "k2"}', session=uid)
        outcome: dict[str, object] = {}

        def drain() -> None:
            try:
                outcome["result"] = turn.result()
            except errors.AgentSessionsError as err:
                outcome["error"] = err

        reader = threading.Thread(target=drain)
        reader.start()
        wait_for(gate.with_suffix(".started"))
        process.kill()
        reader.join(30)
        assert isinstance(outcome.get("error"), errors.AgentSessionsError), outcome
        assert stub_model.calls == 3
        cut = client.read_records(uid)
        assert "END" not in kinds(cut[first.last_seq :])
        gate.unlink()
        start_harness(script, address, {"AGENT_GATE": str(gate)})
        redriven = client.resume(uid).result()  # the re-driven turn, streamed as it commits
        assert redriven.output == "the tool said: value-of-k2"
        redone = [k for k in kinds(redriven.records) if k != "LIFECYCLE"]
        assert redone[-5:] == ["TOOL_RESULT", "MODEL_CALL", "OUTPUT", "USAGE", "END"], redone
        assert stub_model.calls == 4, "the provider is asked at most once more"
        resumed = client.read_records(uid)
        outputs = [r for r in resumed if r.event.kind == pb_common.EVENT_OUTPUT]
        assert outputs[-1].event.message.parts[0].text.text == "the tool said: value-of-k2"
        second_turn = [k for k in kinds(resumed[first.last_seq :]) if k != "LIFECYCLE"]
        assert second_turn[-5:] == ["TOOL_RESULT", "MODEL_CALL", "OUTPUT", "USAGE", "END"], second_turn
        assert second_turn.count("MODEL_CALL") == 2, "the cut call was not recorded twice"
        assert client.verify(uid).ok

        # 3. Replay: a fork taken inside the finished first turn (before its END) re-drives
        # that turn from the journal; every model call is served from the record.
        before = stub_model.calls
        end_seq = next(r.seq for r in first.records if r.event.kind == pb_common.EVENT_END)
        (replayed,) = client.fork(uid, at_seq=end_seq - 1)
        client.resume(replayed.metadata.uid).result()
        assert stub_model.calls == before, "replay asks the provider nothing"
        child = client.read_records(replayed.metadata.uid)
        assert "END" in kinds(child[end_seq - 1 :])
        assert client.verify(replayed.metadata.uid).ok

        # 4. A fork whose children diverge.
        left, right = client.fork(uid, count=2, names=["left", "right"])
        one = client.run('/tool lookup {"key": "left"}', session=left.metadata.uid)
        two = client.run("just talk", session=right.metadata.uid)
        assert one.output == "the tool said: value-of-left"
        assert two.output == "stub:just talk"
        parent = client.read_records(uid)
        for branch in (left, right):
            records = client.read_records(branch.metadata.uid)
            assert records[: len(parent)] == parent
            assert client.verify(branch.metadata.uid).ok
