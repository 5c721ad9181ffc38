"""The client's answers are true (against the real daemon): an unknown session is NotFound, a
turn's result is the session after it and says when it parked, approve/deny and resume stream
the resumed turn, the asyncio client behaves as documented, the error classes are the package's,
``replay`` reads pages, and ``watch`` follows a session as it commits."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from conftest import OFFLINE_TOOLS, Daemon
from harnesses import Chatty, Conversational, Gated

import agentsessions
from agentsessions import AsyncClient, Client, NotFound, pb_common, pb_session
from agentsessions import harness as h


def kinds(records: list[pb_common.LogRecord]) -> list[str]:
    return [pb_common.EventKind.Name(r.event.kind).removeprefix("EVENT_") for r in records]


def effects(records: list[pb_common.LogRecord]) -> list[str]:
    """The kinds of the turn's own records (a resume also commits LIFECYCLE records)."""
    return [kind for kind in kinds(records) if kind != "LIFECYCLE"]


@pytest.fixture
def host(start_daemon: Callable[..., Daemon]) -> Iterator[Daemon]:
    servers = {name: h.start_server(harness) for name, harness in
               {"conversational": Conversational(), "gated": Gated(), "chatty": Chatty()}.items()}  # fmt: skip
    flags = [f"--harness={name}={server.address}" for name, server in servers.items()]
    yield start_daemon(*OFFLINE_TOOLS, *flags)
    for server in servers.values():
        server.stop(0)


def test_an_unknown_session_is_not_found_for_every_read(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        for read in (client.verify, client.read_records, lambda uid: list(client.replay(uid))):
            with pytest.raises(NotFound):
                read("sess-unknown")
        with pytest.raises(NotFound):
            next(iter(client.watch("sess-unknown")))
        uid = client.run("hi", harness="echo").session.metadata.uid
        assert client.read_records(uid, from_seq=50) == []  # a known session past its head: empty

    async def unknown() -> None:
        async with AsyncClient(daemon.addr) as client:
            with pytest.raises(NotFound):
                await client.verify("sess-unknown")
            with pytest.raises(NotFound):
                [r async for r in client.replay("sess-unknown")]

    asyncio.run(unknown())


def test_a_turns_result_is_the_session_after_it_and_its_outputs_are_lines(host: Daemon) -> None:
    with Client(host.addr) as client:
        echo = client.run("hello", harness="echo")
        assert echo.session.exec_state == pb_session.EXEC_COMPLETED
        assert echo.session.last_seq == echo.last_seq == 5
        assert not echo.parked and echo.pending_approval is None
        both = client.run("hi", harness="conversational")
        assert len(both.outputs) == 2 and both.outputs[1] == "python saw: hi"
        assert both.output == f"{both.outputs[0]}\npython saw: hi"


def test_a_parked_turn_says_so_and_a_decision_resumes_it(host: Daemon) -> None:
    with Client(host.addr) as client:
        parked = client.run("charge me", harness="gated")
        uid = parked.session.metadata.uid
        assert parked.parked and parked.output == ""
        assert parked.pending_approval is not None and parked.pending_approval.tool_call_id == "charge-1"
        assert parked.session.exec_state == pb_session.EXEC_AWAITING

        # (This host has no executor for "charge", so it can only carry out a denial.)
        resumed = client.deny(uid, reason="no")  # decides and resumes, as agentctl deny does
        assert resumed.decision is not None and not resumed.decision.event.approval_result.approved
        streamed = list(resumed)
        result = resumed.result()
        assert [r.seq for r in streamed if isinstance(r, pb_common.LogRecord)] == [r.seq for r in result.records]
        assert effects(result.records)[-3:] == ["TOOL_RESULT", "OUTPUT", "END"]
        assert result.output == "charge denied" and not result.parked
        assert result.session.exec_state == pb_session.EXEC_COMPLETED
        assert result.session.last_seq == client.read_records(uid)[-1].seq


def test_resume_of_a_session_with_nothing_to_redrive_ends_at_once(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        uid = client.run("hi", harness="echo").session.metadata.uid
        client.suspend(uid)
        result = client.resume(uid).result()
        assert effects(result.records) == [] and result.session.compute_state != pb_session.COMPUTE_COLD

    async def scenario() -> None:
        async with AsyncClient(daemon.addr) as client:
            await client.suspend(uid)
            result = await client.resume(uid)
            assert effects(result.records) == [] and result.session.compute_state != pb_session.COMPUTE_COLD

    asyncio.run(scenario())


def test_the_asyncio_client_as_documented(host: Daemon) -> None:
    client = AsyncClient(host.addr)  # made before any event loop runs

    async def scenario() -> None:
        async with client:
            result = await client.exec("hello", harness="echo")  # "same calls, awaited"
            assert result.output == "echo:hello"
            uid = result.session.metadata.uid
            turn = client.exec("again", session=uid)
            async for item in turn:
                if isinstance(item, pb_common.LogRecord):
                    break  # leave the stream early ...
            rest = await turn.result()  # ... and the result is still the whole turn
            assert rest.output == "echo:again" and kinds(rest.records)[-1] == "END"
            assert rest.session.last_seq == 10

            parked = await client.exec("charge me", harness="gated")
            assert parked.parked
            resumed = client.deny(parked.session.metadata.uid)
            records = [r async for r in resumed]
            done = await resumed
            assert resumed.decision is not None and not resumed.decision.event.approval_result.approved
            assert [r.seq for r in records if isinstance(r, pb_common.LogRecord)] == [r.seq for r in done.records]
            assert done.output == "charge denied" and effects(done.records)[-1] == "END"
            assert done.session.exec_state == pb_session.EXEC_COMPLETED

    asyncio.run(scenario())


def test_the_error_classes_are_the_packages() -> None:
    assert issubclass(agentsessions.NotFound, agentsessions.AgentSessionsError)
    assert h.Cancelled is agentsessions.Cancelled
    for harness_error in (h.HarnessError, h.HostGone, h.ApprovalParked):
        assert issubclass(harness_error, agentsessions.AgentSessionsError)
    assert agentsessions.AgentSessionsError.__annotations__["partial"] == "TurnResult | None"


def test_replay_reads_pages(host: Daemon) -> None:
    with Client(host.addr) as client:
        result = client.run("go", config=b"4997", harness="chatty")
        uid = result.session.metadata.uid
        assert result.last_seq == 5000
        assert list(client.replay(uid)) == client.read_records(uid)

        def median_seconds(read: Callable[[], int]) -> float:
            took = []
            for _ in range(5):
                started = time.perf_counter()
                assert read() == 5000
                took.append(time.perf_counter() - started)
            return statistics.median(took)

        paged = median_seconds(lambda: len(list(client.replay(uid))))
        streamed = median_seconds(lambda: len(list(client._stub.Replay(pb_session.ReplayRequest(session=uid)))))
        # One message a record (what replay() was) is several times slower than pages of records
        # (figures with python/bench/bench.py; a release daemon pages 5,000 records in ms).
        assert paged < streamed, (paged, streamed)


def test_watch_follows_a_session_as_it_commits(daemon: Daemon) -> None:
    with Client(daemon.addr) as client:
        uid = client.run("one", harness="echo").session.metadata.uid
        seen: list[int] = []
        got_ten = threading.Event()

        def follow() -> None:
            for record in client.watch(uid, from_seq=3):
                seen.append(record.seq)
                if record.seq == 10:
                    got_ten.set()
                    return

        follower = threading.Thread(target=follow)
        follower.start()
        client.run("two", session=uid)
        assert got_ten.wait(20)
        follower.join(5)
        assert seen == list(range(3, 11))

    async def scenario() -> None:
        async with AsyncClient(daemon.addr) as client:
            seqs = []
            async for record in client.watch(uid):
                seqs.append(record.seq)
                if record.seq == 10:
                    break
            assert seqs == list(range(1, 11))

    asyncio.run(scenario())
