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

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar, cast

import grpc
import grpc.aio

from . import _shared
from ._pb import common_pb2, session_pb2, session_pb2_grpc
from ._shared import Delta, ExecItem, Input, Tls, TurnResult
from .canonical import VerifyReport, verify_records
from .client import PAGE_RECORDS
from .errors import from_rpc_error

P = ParamSpec("P")
R = TypeVar("R")


def _translated(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Raises SDK exceptions (carrying the gRPC code) instead of raw ``grpc.RpcError``."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(*args, **kwargs)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    return wrapper


class AsyncExecStream:
    """One running turn; ``async for`` yields records, deltas and session frames as they
    arrive, :meth:`result` drains the rest and returns the :class:`TurnResult`."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._result = TurnResult()
        self._done = False

    async def __aiter__(self) -> AsyncIterator[ExecItem]:
        if self._done:
            return
        try:
            async for update in self._call:
                yield _shared.absorb(self._result, update)
        except grpc.RpcError as err:
            error = from_rpc_error(err)
            error.partial = self._result  # type: ignore[attr-defined]
            raise error from None
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

    def cancel(self) -> None:
        """Stops reading (the turn itself goes on)."""
        self._call.cancel()
        self._done = True


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
        options = _shared.channel_options(tls)
        if tls is None:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        else:
            credentials = _shared.channel_credentials(tls)
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
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

    @_translated
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
        session = session_pb2.Session(
            metadata=common_pb2.ResourceMetadata(project=project or self.project, name=name),
            harness=harness,
            model=model,
            labels=labels or {},
        )
        request = session_pb2.CreateSessionRequest(session=session)
        return await self._stub.CreateSession(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    async def get_session(self, uid: str) -> session_pb2.Session:
        """Reads one session."""
        request = session_pb2.GetSessionRequest(uid=uid)
        return await self._stub.GetSession(request, metadata=self._metadata, timeout=self.timeout)

    async def list_sessions(self, *, project: str = "", page_size: int = 0) -> AsyncIterator[session_pb2.Session]:
        """Every session of ``project``, page by page."""
        token = ""
        while True:
            page = await self._list_page(project or self.project, page_size, token)
            for session in page.sessions:
                yield session
            token = page.next_page_token
            if not token:
                return

    @_translated
    async def _list_page(self, project: str, page_size: int, token: str) -> session_pb2.ListSessionsResponse:
        request = session_pb2.ListSessionsRequest(project=project, page_size=page_size, page_token=token)
        return await self._stub.ListSessions(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    async def delete_session(self, uid: str) -> session_pb2.Session:
        """Marks a session for deletion."""
        request = session_pb2.DeleteSessionRequest(uid=uid)
        return await self._stub.DeleteSession(request, metadata=self._metadata, timeout=self.timeout)

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
        request = _shared.exec_request(
            session, inputs, harness, config, expected_last_seq, deadline_unix, resume_from_seq
        )
        return AsyncExecStream(self._stub.Exec(request, metadata=self._metadata))

    async def run(self, inputs: Input | Sequence[Input] | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`exec` and wait for the result."""
        return await self.exec(inputs, **kwargs).result()

    @_translated
    async def cancel(self, session: str, execution_id: str, reason: str = "USER") -> session_pb2.Session:
        """Stops a running execution."""
        request = session_pb2.CancelRequest(session=session, execution_id=execution_id, reason=reason)
        return await self._stub.Cancel(request, metadata=self._metadata, timeout=self.timeout)

    async def replay(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records, one message per record (``Sessions.Replay``)."""
        request = session_pb2.ReplayRequest(session=session, from_seq=from_seq, to_seq=to_seq)
        try:
            async for record in self._stub.Replay(request, metadata=self._metadata, timeout=self.timeout):
                yield record
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def records(
        self, session: str, *, from_seq: int = 0, to_seq: int = 0, page_records: int = PAGE_RECORDS
    ) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records, many per message (``Sessions.ReadRecords``)."""
        next_seq = from_seq
        while True:
            page = await self._read_page(session, next_seq, to_seq, page_records)
            for record in page.records:
                yield record
            if page.next_seq == 0:
                return
            next_seq = page.next_seq

    async def read_records(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> list[common_pb2.LogRecord]:
        """:meth:`records` as a list."""
        return [r async for r in self.records(session, from_seq=from_seq, to_seq=to_seq)]

    @_translated
    async def _read_page(self, session: str, from_seq: int, to_seq: int, limit: int) -> session_pb2.ReadRecordsResponse:
        request = session_pb2.ReadRecordsRequest(
            session=session, from_seq=from_seq, to_seq=to_seq, max_records=limit
        )
        return await self._stub.ReadRecords(request, metadata=self._metadata, timeout=self.timeout)

    async def verify(self, session: str) -> VerifyReport:
        """Reads the journal and recomputes every hash and link in Python."""
        return verify_records(await self.read_records(session))

    @_translated
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
        request = _shared.fork_request(session, at_seq, count, names, labels)
        response = await self._stub.Fork(request, metadata=self._metadata, timeout=self.timeout)
        return list(response.children)

    @_translated
    async def suspend(self, session: str) -> session_pb2.Session:
        """Checkpoints the session and releases its compute."""
        request = session_pb2.SuspendRequest(session=session)
        return await self._stub.Suspend(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    async def resume(self, session: str, *, boot: bool = False) -> session_pb2.Session:
        """Brings the session back; an interrupted turn is re-driven from its journal."""
        request = session_pb2.ResumeRequest(session=session, boot=boot)
        return await self._stub.Resume(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
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
        if not request_seq:
            pending = (await self.get_session(session)).pending_approval
            execution_id, tool_call_id, request_seq = (
                pending.execution_id,
                pending.tool_call_id,
                pending.request_seq,
            )
        request = _shared.approve_request(
            session, execution_id, tool_call_id, request_seq, approved, reason
        )
        return await self._stub.Approve(request, metadata=self._metadata, timeout=self.timeout)

    async def deny(self, session: str, *, reason: str = "", **ref: Any) -> session_pb2.ApproveResponse:
        """:meth:`approve` with ``approved=False``."""
        return await self.approve(session, approved=False, reason=reason, **ref)

    async def pending_approvals(
        self, *, project: str = "", page_size: int = 0
    ) -> AsyncIterator[session_pb2.PendingApproval]:
        """Every approval request that waits for a decision, oldest first."""
        token = ""
        while True:
            page = await self._approvals_page(project or self.project, page_size, token)
            for approval in page.approvals:
                yield approval
            token = page.next_page_token
            if not token:
                return

    @_translated
    async def _approvals_page(self, project: str, page_size: int, token: str) -> session_pb2.ListApprovalsResponse:
        request = session_pb2.ListApprovalsRequest(project=project, page_size=page_size, page_token=token)
        return await self._stub.ListApprovals(request, metadata=self._metadata, timeout=self.timeout)
