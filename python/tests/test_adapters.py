"""The adapters run the frameworks' agents whole, against the real daemon and a counting
OpenAI-wire model: a turn that ends on a tool (LangGraph ``return_direct``, Agents SDK
``stop_on_first_tool``) records the tool's result and the final output, and the next turn runs on
a valid history; the host's usage reaches the session and the framework."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import PYTHON_DIR, STUB_KEY_VARIABLE, Daemon, StubModel

from agentsessions import Client, pb_common
from agentsessions import harness as h

pytest.importorskip("langgraph")
pytest.importorskip("agents")

from agents import Agent, ModelSettings, RunContextWrapper, RunHooks, function_tool  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

from agentsessions.adapters.langchain import HostChatModel, LangGraphHarness  # noqa: E402
from agentsessions.adapters.openai_agents import AgentsHarness, HostModel  # noqa: E402

# create_react_agent moved to the langchain package; langgraph keeps it until 2.0.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
TOOLS = Path(__file__).resolve().parent / "tools"


def kinds(records: list[pb_common.LogRecord]) -> list[str]:
    return [pb_common.EventKind.Name(r.event.kind).removeprefix("EVENT_") for r in records]


@tool(return_direct=True)
def lookup_direct(key: str) -> str:
    """Looks a key up; its answer ends the turn."""
    return f"value-of-{key}"


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value-of-{key}"


class UsageSeen(RunHooks[Any]):
    """What the Agents SDK counted for the run."""

    def __init__(self) -> None:
        self.usage: list[tuple[int, int, int]] = []

    async def on_agent_end(self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> None:
        u = context.usage
        self.usage.append((u.requests, u.input_tokens, u.output_tokens))


def langgraph_direct(model: HostChatModel) -> Any:
    return create_react_agent(model, [lookup_direct])


def agents_stop_on_first_tool(model: HostModel) -> Agent[Any]:
    return Agent(name="stopper", tools=[lookup], model=model, tool_use_behavior="stop_on_first_tool")


@pytest.fixture
def serve_on_daemon(
    start_daemon: Callable[..., Daemon], stub_model: StubModel
) -> Iterator[Callable[[h.Harness], Daemon]]:
    servers: list[h.HarnessServer] = []

    def serve(harness: h.Harness) -> Daemon:
        servers.append(h.start_server(harness))
        flags = [f"--harness=agent={servers[-1].address}"]
        return start_daemon(*stub_model.model_flags(), *flags, env={STUB_KEY_VARIABLE: "stub-key"})

    yield serve
    for server in servers:
        server.stop(0)


@pytest.mark.parametrize(
    "harness",
    [
        LangGraphHarness("direct", langgraph_direct, tools=["lookup_direct"]),
        AgentsHarness("stopper", agents_stop_on_first_tool, tools=["lookup"]),
    ],
    ids=["langgraph-return-direct", "agents-stop-on-first-tool"],
)
def test_a_turn_that_ends_on_a_tool_records_it_and_the_next_turn_runs(
    harness: h.Harness, serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel
) -> None:
    daemon = serve_on_daemon(harness)
    tool_name = "lookup_direct" if isinstance(harness, LangGraphHarness) else "lookup"
    with Client(daemon.addr) as client:
        first = client.run(f'/tool {tool_name} {{"key": "k1"}}', harness="agent")
        assert kinds(first.records)[-4:] == ["USAGE", "TOOL_RESULT", "OUTPUT", "END"], kinds(first.records)
        assert first.output == "value-of-k1"
        uid = first.session.metadata.uid
        second = client.run("and now?", session=uid)
        assert second.output == "stub:and now?"
        assert stub_model.calls == 2
        assert client.verify(uid).ok


def test_usage_reaches_the_session_and_the_agents_sdk(
    serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel
) -> None:
    seen = UsageSeen()

    def build(model: HostModel) -> Agent[Any]:
        return Agent(name="counted", tools=[lookup], model=model)

    daemon = serve_on_daemon(AgentsHarness("counted", build, tools=["lookup"], hooks=seen))
    with Client(daemon.addr) as client:
        result = client.run('/tool lookup {"key": "k"}', harness="agent")
        usages = [r.event.usage for r in result.records if r.event.kind == pb_common.EVENT_USAGE]
        # The stub answers each call with 5 prompt and 3 completion tokens.
        assert [(u.input_tokens, u.output_tokens) for u in usages] == [(5, 3), (5, 3)]
        totals = client.get_session(result.session.metadata.uid).usage
        assert (totals.input_tokens, totals.output_tokens) == (10, 6)
    assert seen.usage == [(2, 10, 6)]


class Answer(BaseModel):
    answer: str


def test_agents_sdk_handoffs_output_type_and_settings(
    serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel
) -> None:
    outcome: list[Any] = []

    class Finals(RunHooks[Any]):
        async def on_agent_end(self, context: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> None:
            outcome.append((agent.name, output))

    def build(model: HostModel) -> Agent[Any]:
        # The sub-agent has no model of its own: it runs on the host's, never on OpenAI.
        billing = Agent(name="billing", instructions="You do billing.", output_type=Answer)
        return Agent(
            name="triage",
            instructions="You route.",
            handoffs=[billing],
            model=model,
            model_settings=ModelSettings(temperature=0.25, max_tokens=64, tool_choice="auto", parallel_tool_calls=False),
        )

    daemon = serve_on_daemon(AgentsHarness("triage", build, hooks=Finals()))
    with Client(daemon.addr) as client:
        result = client.run("/tool transfer_to_billing {}", harness="agent")
        assert kinds(result.records).count("MODEL_CALL") == 2
    first, second = stub_model.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["transfer_to_billing"]
    assert (first["temperature"], first["max_tokens"], first["tool_choice"], first["parallel_tool_calls"]) == (
        0.25, 64, "auto", False,
    )  # fmt: skip
    assert second["messages"][0] == {"role": "system", "content": "You do billing."}
    schema = second["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["type"] == "string"
    assert outcome == [("billing", Answer(answer=json_answer(second)))]


def json_answer(request: dict[str, Any]) -> str:
    """The answer the stub gave ``request``."""
    return str(json.loads(StubModel.answer(request)["choices"][0]["message"]["content"])["answer"])


def test_langgraph_model_kwargs_usage_and_a_nodes_own_message(
    serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel
) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    seen: list[Any] = []

    def build(model: HostChatModel) -> Any:
        def ask(state: MessagesState) -> dict[str, Any]:
            reply = model.bind(temperature=0.5, max_tokens=32).invoke(state["messages"])
            seen.append(reply.usage_metadata)
            return {"messages": [reply]}

        def sign(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(content="signed by a node")]}

        graph = StateGraph(MessagesState)
        graph.add_node("ask", ask)
        graph.add_node("sign", sign)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", "sign")
        graph.add_edge("sign", END)
        return graph.compile()

    daemon = serve_on_daemon(LangGraphHarness("signed", build))
    with Client(daemon.addr) as client:
        result = client.run("hi", harness="agent")
        assert result.outputs == ["stub:hi", "signed by a node"]
        again = client.run("more", session=result.session.metadata.uid)
        assert again.outputs == ["stub:more", "signed by a node"]
    request = stub_model.requests[0]
    assert (request["temperature"], request["max_tokens"]) == (0.5, 32)
    assert seen[0]["input_tokens"] == 5 and seen[0]["output_tokens"] == 3


def test_langgraph_async_nodes(serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph

    def build(model: HostChatModel) -> Any:
        async def ask(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node("ask", ask)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", END)
        return graph.compile()

    daemon = serve_on_daemon(LangGraphHarness("async", build))
    with Client(daemon.addr) as client:
        assert client.run("hi", harness="agent").output == "stub:hi"


def test_agents_sdk_run_streamed(serve_on_daemon: Callable[[h.Harness], Daemon]) -> None:
    def build(model: HostModel) -> Agent[Any]:
        return Agent(name="streamed", tools=[lookup], model=model)

    daemon = serve_on_daemon(AgentsHarness("streamed", build, tools=["lookup"], streamed=True))
    with Client(daemon.addr) as client:
        result = client.run('/tool lookup {"key": "s"}', harness="agent")
        assert result.output == "the tool said: value-of-s"
        assert kinds(result.records).count("USAGE") == 2


BUMP_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}


def agents_bumper(model: HostModel) -> Agent[Any]:
    return Agent(name="bumper", tools=[model.host_tool("counter__bump", params_json_schema=BUMP_SCHEMA)], model=model)


def langgraph_bumper(model: HostChatModel) -> Any:
    return create_react_agent(model, [model.host_tool("counter__bump", args_schema=BUMP_SCHEMA)])


@pytest.mark.parametrize(
    "harness",
    [AgentsHarness("bumper", agents_bumper), LangGraphHarness("bumper", langgraph_bumper)],
    ids=["agents-sdk", "langgraph"],
)
def test_a_host_run_tool_runs_at_most_once(
    harness: h.Harness, tmp_path: Path, start_daemon: Callable[..., Daemon], stub_model: StubModel
) -> None:
    counter = tmp_path / "bumps"
    config = tmp_path / "daemon.toml"
    config.write_text(
        "[[mcp_servers]]\n"
        'name = "counter"\n'
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(TOOLS / 'mcp_counter.py'))}]\n"
        f"env = {{ COUNTER_FILE = {json.dumps(str(counter))}, PYTHONPATH = {json.dumps(str(PYTHON_DIR))} }}\n"
    )

    server = h.start_server(harness)
    try:
        flags = ["--config", str(config), *stub_model.model_flags(), f"--harness=agent={server.address}"]
        daemon = start_daemon(*flags, env={STUB_KEY_VARIABLE: "stub-key"})
        wait_until(lambda: "MCP server up" in daemon.log.read_text())  # tools are listed in the background
        with Client(daemon.addr) as client:
            first = client.run('/tool counter__bump {"key": "a"}', harness="agent")
            assert first.output == "the tool said: bumped a", daemon.log.read_text()[-2000:]
            calls = [r.event.tool for r in first.records if r.event.kind == pb_common.EVENT_TOOL_CALL]
            assert [(c.tool, c.mediation) for c in calls] == [("counter__bump", pb_common.MEDIATION_CONTROLLER_MEDIATED)]
            assert counter.read_text() == "a\n"
            # Replayed from the journal (a fork inside the turn, resumed): the tool is not run again.
            end_seq = next(r.seq for r in first.records if r.event.kind == pb_common.EVENT_END)
            (child,) = client.fork(first.session.metadata.uid, at_seq=end_seq - 1)
            replayed = client.resume(child.metadata.uid).result()
            assert [k for k in kinds(replayed.records) if k != "LIFECYCLE"] == ["END"]
            assert counter.read_text() == "a\n"
    finally:
        server.stop(0)


def wait_until(ready: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, "never ready"
        time.sleep(0.05)


def test_langgraph_state_beyond_messages_survives_turns_and_replay(
    serve_on_daemon: Callable[[h.Harness], Daemon], stub_model: StubModel
) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    class Counted(MessagesState):
        count: int
        seen: list[str]

    def build(model: HostChatModel) -> Any:
        def ask(state: Counted) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        def count(state: Counted) -> dict[str, Any]:
            n = state.get("count", 0) + 1
            said = [*state.get("seen", []), str(state["messages"][-2].content)]
            return {"count": n, "seen": said, "messages": [AIMessage(content=f"turn {n}")]}

        graph = StateGraph(Counted)
        graph.add_node("ask", ask)
        graph.add_node("count", count)
        graph.add_edge(START, "ask")
        graph.add_edge("ask", "count")
        graph.add_edge("count", END)
        return graph.compile()

    daemon = serve_on_daemon(LangGraphHarness("counted", build))
    with Client(daemon.addr) as client:
        first = client.run("a", harness="agent")
        uid = first.session.metadata.uid
        assert first.outputs == ["stub:a", "turn 1"]
        second = client.run("b", session=uid)
        assert second.outputs == ["stub:b", "turn 2"]
        # The model never saw the recorded state: its second request is the conversation only.
        assert [m["role"] for m in stub_model.requests[-1]["messages"]] == ["user", "assistant", "assistant", "user"]
        # A fork inside the second turn replays it from the journal, state included.
        end_seq = next(r.seq for r in second.records if r.event.kind == pb_common.EVENT_END)
        (child,) = client.fork(uid, at_seq=end_seq - 1)
        replayed = client.resume(child.metadata.uid).result()
        assert [k for k in kinds(replayed.records) if k != "LIFECYCLE"] == ["END"]
        third = client.run("c", session=uid)
        assert third.outputs == ["stub:c", "turn 3"]
        assert client.verify(uid).ok
