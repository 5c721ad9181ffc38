"""The asyncio client of the ``agentsessions.v1.Sessions`` API (same calls as
:class:`agentsessions.Client`, awaited).

.. code-block:: python

    async with AsyncClient("127.0.0.1:7070") as client:
        turn = client.exec("hello", harness="echo")
        async for item in turn:
            print(item)
        print((await turn.result()).output)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from . import _rpc, _shared
from ._pb import common_pb2, session_pb2, session_pb2_grpc
from ._rpc import Call, Op, Paged
from ._shared import Delta, ExecItem, Input, Tls, TurnResult
from .canonical import VerifyReport, verify_records
from .client import PAGE_RECORDS

R = TypeVar("R")
T = TypeVar("T")


class AsyncExecStream(_shared.TurnStream):
    """One running turn; ``async for`` yields records, deltas and session frames as they
    arrive, :meth:`result` drains the rest and returns the :class:`TurnResult`."""

    async def __aiter__(self) -> AsyncIterator[ExecItem]:
        if self._done:
            return
        try:
            async for update in self._call:
                yield _shared.absorb(self._result, update)
        except grpc.RpcError as err:
            raise self._failed(err) from None
        finally:
            self._done = True

    async def deltas(self) -> AsyncIterator[Delta]:
        """Only the text deltas of the turn."""
        async for item in self:
            if isinstance(item, Delta):
                yield item

    async def result(self) -> TurnResult:
        """Waits for the turn to end and returns its result."""
        async for _ in self:
            pass
        return self._result


class AsyncClient:
    """An asyncio connection to an ``agentsessionsd`` Sessions endpoint (see
    :class:`agentsessions.Client` for the arguments)."""

    def __init__(
        self,
        target: str,
        *,
        tls: Tls | None = None,
        token: str | None = None,
        project: str = "",
        timeout: float | None = None,
    ) -> None:
        self._channel = _shared.connect(target, tls, grpc.aio.insecure_channel, grpc.aio.secure_channel)
        self._stub = cast(Any, session_pb2_grpc).SessionsStub(self._channel)
        self._metadata = _shared.auth_metadata(token)
        self.project = project
        self.timeout = timeout

    async def close(self) -> None:
        """Closes the channel."""
        await self._channel.close(None)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # The transport: the calls of ``_rpc``, awaited.

    def _open(self, call: Call) -> Any:
        """Starts ``call``: an awaitable response, or the stream of a streaming call."""
        return _rpc.invoke(self._stub, call, self._metadata, self.timeout)

    async def _send(self, call: Call) -> Any:
        """Makes ``call`` and returns its response."""
        with _rpc.translated():
            return await self._open(call)

    async def _run(self, op: Op[R]) -> R:
        """Makes the calls of ``op`` and returns its result."""
        response = None
        while True:
            try:
                call = op.send(response)
            except StopIteration as done:
                return done.value
            response = await self._send(call)

    async def _pages(self, paged: Paged[T]) -> AsyncIterator[Iterable[T]]:
        """The items of a listing a page at a time, the next page fetched when asked for."""
        call: Call | None = paged.first
        while call is not None:
            page = await self._send(call)
            yield paged.items(page)
            call = paged.after(page)

    # Sessions

    async def create_session(
        self,
        *,
        harness: str = "",
        model: str = "",
        name: str = "",
        project: str = "",
        labels: dict[str, str] | None = None,
    ) -> session_pb2.Session:
        """Creates a session."""
        return await self._run(_rpc.create_session(self.project, harness, model, name, project, labels))

    async def get_session(self, uid: str) -> session_pb2.Session:
        """Reads one session."""
        return await self._run(_rpc.get_session(uid))

    async def list_sessions(self, *, project: str = "", page_size: int = 0) -> AsyncIterator[session_pb2.Session]:
        """Every session of ``project``, page by page."""
        async for page in self._pages(_rpc.list_sessions(project or self.project, page_size)):
            for session in page:
                yield session

    async def delete_session(self, uid: str) -> session_pb2.Session:
        """Marks a session for deletion."""
        return await self._run(_rpc.delete_session(uid))

    # Turns

    def exec(
        self,
        inputs: Input | Sequence[Input] | None = None,
        *,
        session: str = "",
        harness: str = "",
        config: bytes = b"",
        expected_last_seq: int | None = None,
        deadline_unix: int = 0,
        resume_from_seq: int = 0,
    ) -> AsyncExecStream:
        """Runs one turn; an empty ``session`` creates one."""
        call = _rpc.exec_turn(session, inputs, harness, config, expected_last_seq, deadline_unix, resume_from_seq)
        return AsyncExecStream(self._open(call))

    async def run(self, inputs: Input | Sequence[Input] | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`exec` and wait for the result."""
        return await self.exec(inputs, **kwargs).result()

    async def cancel(self, session: str, execution_id: str, reason: str = "USER") -> session_pb2.Session:
        """Stops a running execution."""
        return await self._run(_rpc.cancel(session, execution_id, reason))

    # Reading the journal

    async def replay(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records, one message per record (``Sessions.Replay``)."""
        with _rpc.translated():
            async for record in self._open(_rpc.replay(session, from_seq, to_seq)):
                yield record

    async def records(
        self, session: str, *, from_seq: int = 0, to_seq: int = 0, page_records: int = PAGE_RECORDS
    ) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records, many per message (``Sessions.ReadRecords``)."""
        async for page in self._pages(_rpc.read_records(session, from_seq, to_seq, page_records)):
            for record in page:
                yield record

    async def read_records(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> list[common_pb2.LogRecord]:
        """:meth:`records` as a list."""
        return [r async for r in self.records(session, from_seq=from_seq, to_seq=to_seq)]

    async def verify(self, session: str) -> VerifyReport:
        """Reads the journal and recomputes every hash and link in Python."""
        return verify_records(await self.read_records(session))

    # Lifecycle

    async def fork(
        self,
        session: str,
        *,
        at_seq: int = 0,
        count: int = 1,
        names: Sequence[str] = (),
        labels: dict[str, str] | None = None,
    ) -> list[session_pb2.Session]:
        """Creates ``count`` children from ``session`` at ``at_seq`` (0: the head)."""
        return await self._run(_rpc.fork(session, at_seq, count, names, labels))

    async def suspend(self, session: str) -> session_pb2.Session:
        """Checkpoints the session and releases its compute."""
        return await self._run(_rpc.suspend(session))

    async def resume(self, session: str, *, boot: bool = False) -> session_pb2.Session:
        """Brings the session back; an interrupted turn is re-driven from its journal."""
        return await self._run(_rpc.resume(session, boot))

    # Approvals

    async def approve(
        self,
        session: str,
        *,
        approved: bool = True,
        reason: str = "",
        execution_id: str = "",
        tool_call_id: str = "",
        request_seq: int = 0,
    ) -> session_pb2.ApproveResponse:
        """Decides a pending approval; without a reference, the session's pending one."""
        return await self._run(_rpc.approve(session, approved, reason, execution_id, tool_call_id, request_seq))

    async def deny(self, session: str, *, reason: str = "", **ref: Any) -> session_pb2.ApproveResponse:
        """:meth:`approve` with ``approved=False``."""
        return await self.approve(session, approved=False, reason=reason, **ref)

    async def pending_approvals(
        self, *, project: str = "", page_size: int = 0
    ) -> AsyncIterator[session_pb2.PendingApproval]:
        """Every approval request that waits for a decision, oldest first."""
        async for page in self._pages(_rpc.list_approvals(project or self.project, page_size)):
            for approval in page:
                yield approval
