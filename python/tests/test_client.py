"""Every client call against the real daemon, and its errors (sync and asyncio)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import grpc
import pytest
from conftest import OFFLINE_TOOLS, Daemon
from harnesses import Conversational, Gated, Waiting

from agentsessions import AsyncClient, Client, Delta, errors, pb_common, pb_session
from agentsessions import harness as h


@pytest.fixture
def served() -> Iterator[dict[str, h.HarnessServer]]:
    servers = {
        "conversational": h.start_server(Conversational()),
        "gated": h.start_server(Gated()),
    }
    yield servers
    for server in servers.values():
        server.stop(0)


@pytest.fixture
def host(start_daemon: Callable[..., Daemon], served: dict[str, h.HarnessServer]) -> Daemon:
    flags = [f"--harness={name}={server.address}" for name, server in served.items()]
    return start_daemon(*OFFLINE_TOOLS, *flags)


def kinds(records: list[pb_common.LogRecord]) -> list[str]:
    return [pb_common.EventKind.Name(r.event.kind).removeprefix("EVENT_") for r in records]


def test_sessions_create_get_list_delete(daemon: Daemon) -> None:
    with Client(daemon.addr, project="py") as client:
        made = [client.create_session(harness="echo", name=f"s{i}", labels={"n": str(i)}) for i in range(5)]
        assert all(s.metadata.project == "py" for s in made)
        got = client.get_session(made[0].metadata.uid)
        assert got.metadata.name == "s0" and got.harness == "echo" and got.labels["n"] == "0"
        listed = [s.metadata.uid for s in client.list_sessions(page_size=2)]
        assert sorted(listed) == sorted(s.metadata.uid for s in made)
        deleted = client.delete_session(made[1].metadata.uid)
        assert deleted.deletion_state == pb_session.DELETION_PENDING
        with pytest.raises(errors.NotFound) as caught:
            client.get_session("sess-nope")
        assert caught.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(errors.AgentSessionsError) as bad:
            client.create_session(harness="no-such-harness")
        assert bad.value.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)


def test_exec_streams_records_and_deltas_then_the_result(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        turn = client.exec("hello", harness="echo")
        seen = list(turn)
        result = turn.result()
        assert isinstance(seen[0], pb_session.Session)
        records = [i for i in seen if isinstance(i, pb_common.LogRecord)]
        assert kinds(records) == ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "END"]
        assert any(isinstance(i, Delta) for i in seen)
        assert result.output == "echo:hello"
        assert result.last_seq == 5 and result.execution_id
        uid = result.session.metadata.uid
        again = client.run("again", session=uid)
        assert again.output == "echo:again" and again.records[0].seq == 6
        with pytest.raises(errors.Aborted):
            client.run("stale", session=uid, expected_last_seq=3)
        with pytest.raises(errors.NotFound):
            client.run("x", session="sess-missing")


def test_replay_read_records_and_python_verify_agree_with_the_server(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        uid = client.run("one", harness="echo").session.metadata.uid
        for text in ("two", "three"):
            client.run(text, session=uid)
        streamed = list(client.replay(uid))
        paged = client.read_records(uid)
        assert streamed == paged and len(paged) == 15
        assert [r.seq for r in client.records(uid, from_seq=4, to_seq=9, page_records=2)] == list(range(4, 10))
        report = client.verify(uid)
        assert report.ok and report.records == 15 and report.head_hash == paged[-1].content_hash
        # The same records, one tampered: the Python verifier names it.
        paged[6].event.message.parts[0].text.text = "forged"  # INPUT "two"
        from agentsessions import verify_records

        tampered = verify_records(paged)
        assert [f.seq for f in tampered.failures] == [7]
        with pytest.raises(errors.NotFound):
            list(client.replay("sess-unknown"))


def test_fork_children_diverge(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        parent = client.run("base", harness="echo")
        uid = parent.session.metadata.uid
        children = client.fork(uid, count=2, names=["left", "right"])
        assert [c.metadata.name for c in children] == ["left", "right"]
        assert all(c.parent_uid == uid and c.fork_seq == parent.last_seq for c in children)
        left = client.run("go left", session=children[0].metadata.uid)
        right = client.run("go right", session=children[1].metadata.uid)
        assert (left.output, right.output) == ("echo:go left", "echo:go right")
        for child in children:
            records = client.read_records(child.metadata.uid)
            assert records[: parent.last_seq] == client.read_records(uid)
            assert client.verify(child.metadata.uid).ok
        with pytest.raises(errors.InvalidArgument):
            client.fork(uid, count=500)


def test_suspend_and_resume(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        uid = client.run("hi", harness="echo").session.metadata.uid
        suspended = client.suspend(uid)
        assert suspended.compute_state == pb_session.COMPUTE_COLD
        resumed = client.resume(uid).result().session
        assert resumed.compute_state != pb_session.COMPUTE_COLD
        assert client.run("back", session=uid).output == "echo:back"
        with pytest.raises(errors.NotFound):
            client.suspend("sess-nope")


def test_a_python_harness_through_the_daemon(host: Daemon) -> None:
    with Client(host.addr) as client:
        first = client.run("hi", harness="conversational")
        assert kinds(first.records) == ["EXECUTION_START", "INPUT", "MODEL_CALL", "OUTPUT", "USAGE", "OUTPUT", "END"]
        assert first.output.endswith("python saw: hi")
        second = client.run("more", session=first.session.metadata.uid)
        assert second.output.endswith("python saw: more")
        # The model call's usage, as the host answered it, is recorded and counted by the session.
        usages = [r.event.usage for r in client.read_records(first.session.metadata.uid) if r.event.kind == pb_common.EVENT_USAGE]
        assert len(usages) == 2 and all(u.input_tokens > 0 for u in usages)
        totals = client.get_session(first.session.metadata.uid).usage
        assert totals.input_tokens == sum(u.input_tokens for u in usages) > 0
        assert totals.output_tokens == sum(u.output_tokens for u in usages)
        assert client.verify(first.session.metadata.uid).ok


def test_approvals_park_list_and_decide(host: Daemon) -> None:
    with Client(host.addr) as client:
        parked = client.run("charge me", harness="gated")
        uid = parked.session.metadata.uid
        assert "APPROVAL_REQUEST" in kinds(parked.records) and "END" not in kinds(parked.records)
        session = client.get_session(uid)
        assert session.exec_state == pb_session.EXEC_AWAITING
        pending = [p for p in client.pending_approvals() if p.session_uid == uid]
        assert [(p.tool, p.tool_call_id) for p in pending] == [("charge", "charge-1")]
        with pytest.raises(errors.FailedPrecondition):
            client.run("not now", session=uid)
        decided = client.deny(uid, reason="too much")  # decides and resumes the turn
        assert decided.decision is not None and decided.decision.event.approval_result.approved is False
        decided.result()  # the decided turn went on: the harness got the denial receipt
        with pytest.raises(errors.AgentSessionsError):
            client.approve(uid, execution_id=pending[0].execution_id, tool_call_id="charge-1", request_seq=pending[0].request_seq)
        records = client.read_records(uid)
        effects = [r for r in records if r.event.kind != pb_common.EVENT_LIFECYCLE]
        assert kinds(effects)[-4:] == ["APPROVAL_RESULT", "TOOL_RESULT", "OUTPUT", "END"]
        assert effects[-3].event.result.code == pb_common.ToolResult.APPROVAL_DENIED
        assert effects[-2].event.message.parts[0].text.text == "charge denied"
        assert [p for p in client.pending_approvals() if p.session_uid == uid] == []


def test_cancel_stops_a_running_turn(start_daemon: Callable[..., Daemon]) -> None:
    waiting = Waiting()
    server = h.start_server(waiting)
    try:
        daemon = start_daemon(*OFFLINE_TOOLS, f"--harness=waiting={server.address}")
        with Client(daemon.addr) as client:
            uid = client.create_session(harness="waiting").metadata.uid
            turn = client.exec("wait", session=uid)
            outcome: dict[str, object] = {}

            def drain() -> None:
                try:
                    outcome["result"] = turn.result()
                except errors.AgentSessionsError as err:
                    outcome["error"] = err

            reader = threading.Thread(target=drain)
            reader.start()
            assert waiting.started.wait(10)
            execution = client.read_records(uid)[0].event.execution_id
            client.cancel(uid, execution, "USER")
            reader.join(20)
            assert not reader.is_alive()
            records = client.read_records(uid)
            assert "still here" not in str(records)
            assert client.get_session(uid).exec_state == pb_session.EXEC_CANCELED
            with pytest.raises(errors.AgentSessionsError):
                client.cancel(uid, "not-an-execution", "USER")
    finally:
        server.stop(0)


def test_the_asyncio_client(daemon: Daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.addr) as client:
            made = await client.create_session(harness="echo")
            uid = made.metadata.uid
            turn = client.exec("hello", session=uid)
            items = [item async for item in turn]
            assert isinstance(items[0], pb_session.Session)
            result = await turn.result()
            assert result.output == "echo:hello"
            assert [s.metadata.uid async for s in client.list_sessions()] == [uid]
            assert [r async for r in client.replay(uid)] == await client.read_records(uid)
            assert (await client.verify(uid)).ok
            children = await client.fork(uid, count=1)
            assert (await client.run("child", session=children[0].metadata.uid)).output == "echo:child"
            assert (await client.suspend(uid)).compute_state == pb_session.COMPUTE_COLD
            assert (await client.resume(uid)).session.compute_state != pb_session.COMPUTE_COLD
            assert [p async for p in client.pending_approvals()] == []
            with pytest.raises(errors.NotFound):
                await client.get_session("sess-nope")
            with pytest.raises(errors.Aborted):
                await client.run("stale", session=uid, expected_last_seq=1)
            assert (await client.delete_session(uid)).deletion_state == pb_session.DELETION_PENDING

    asyncio.run(scenario())


def test_a_registered_python_harness(start_daemon: Callable[..., Daemon]) -> None:
    server = h.start_server(Conversational())
    try:
        daemon = start_daemon(*OFFLINE_TOOLS, registry=True)
        from agentsessions import RegistryClient

        with RegistryClient(daemon.registry) as registry, Client(daemon.addr) as client:
            outcome = registry.register("py-conv", server.address, descriptor_id="conversational")
            assert outcome.outcome == 1  # CREATED
            assert registry.get("py-conv", observe=True).observed.id == "conversational"
            assert [r.metadata.name for r in registry.list() if r.metadata.name == "py-conv"] == ["py-conv"]
            result = client.run("registered", harness="py-conv")
            assert result.output.endswith("python saw: registered")
            assert result.records[0].event.execution_start.harness == "py-conv"
            retired = registry.retire("py-conv", "done")
            assert retired.state == 2  # RETIRED
            with pytest.raises(errors.AgentSessionsError):
                client.create_session(harness="py-conv")
            with pytest.raises(errors.NotFound):
                registry.get("nope")
    finally:
        server.stop(0)


def test_re_registering_a_name_during_development_takes_the_next_version(start_daemon: Callable[..., Daemon]) -> None:
    from agentsessions import RegistryClient

    first, second = h.start_server(Conversational()), h.start_server(Conversational())
    try:
        daemon = start_daemon(*OFFLINE_TOOLS, registry=True)
        with RegistryClient(daemon.registry) as registry, Client(daemon.addr) as client:
            assert registry.register_versioned("dev", first.address).harness.metadata.name == "dev"
            with pytest.raises(errors.AlreadyExists):
                registry.register("dev", second.address)
            moved = registry.register_versioned("dev", second.address)
            assert moved.harness.metadata.name == "dev-v2" and moved.outcome == 1  # CREATED
            again = registry.register_versioned("dev", second.address)
            assert again.harness.metadata.name == "dev-v2" and again.outcome == 2  # UNCHANGED
            assert client.run("hi", harness="dev-v2").output.endswith("python saw: hi")
    finally:
        first.stop(0)
        second.stop(0)
