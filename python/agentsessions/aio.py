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

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from typing import Any, TypeVar, cast

import grpc
import grpc.aio

from . import _rpc, _shared
from ._pb import common_pb2, session_pb2, session_pb2_grpc
from ._rpc import Call, Op, Paged
from ._shared import Delta, ExecItem, Input, Tls, TurnResult
from .canonical import VerifyReport, verify_records
from .errors import AgentSessionsError
from .client import PAGE_RECORDS

# What a stream's ``read()`` returns after its last message (the type stubs lack it).
EOF: Any = cast(Any, grpc.aio).EOF
R = TypeVar("R")
T = TypeVar("T")


class AsyncExecStream(_shared.TurnStream):
    """One running turn; ``async for`` yields records, deltas and session frames as they
    arrive, :meth:`result` drains the rest and returns the :class:`TurnResult` (whose
    ``session`` is the session after the turn). ``await client.exec(...)`` is ``result()``.
    Leaving an ``async for`` early and calling :meth:`result` later goes on where it left."""

    def __init__(self, call: Any, settle: Callable[[str], Awaitable[session_pb2.Session]]) -> None:
        super().__init__(call)
        self._settle = settle

    async def _next(self) -> ExecItem | None:
        """The next item, None once the stream ended. One read at a time on the one call, so
        every ``async for`` over the stream continues the same reading."""
        while True:
            try:
                update = await self._call.read()
            except grpc.RpcError as err:
                raise self._failed(err) from None
            if update is EOF:
                self._done = True
                uid = self._result.session.metadata.uid
                if uid:
                    self._result.session = await self._settle(uid)
                return None
            item = _shared.absorb(self._result, update)
            if item is not None:
                return item

    async def __aiter__(self) -> AsyncIterator[ExecItem]:
        while not self._done:
            item = await self._next()
            if item is None:
                return
            yield item

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

    def __await__(self) -> Generator[Any, None, TurnResult]:
        return self.result().__await__()


class AsyncResumeStream(AsyncExecStream):
    """A re-driven turn (:meth:`AsyncClient.resume`, :meth:`AsyncClient.approve` /
    :meth:`AsyncClient.deny`): ``async for`` yields its records as they commit, ``await`` gives
    the :class:`TurnResult`. Like a coroutine, it starts when first iterated or awaited;
    ``decision`` is then the committed approval record (None for a plain resume)."""

    def __init__(self, client: AsyncClient, session: str, boot: bool, decide: Op[Any] | None) -> None:
        super().__init__(None, self._after)
        self._client = client
        self._session = session
        self._boot = boot
        self._decide = decide
        self._resumed: asyncio.Future[session_pb2.Session] | None = None
        self._following = _shared.Following(0)
        self._reading: asyncio.Future[Any] | None = None
        self.decision: common_pb2.LogRecord | None = None

    async def _begin(self) -> asyncio.Future[session_pb2.Session]:
        """Decides (approve/deny), then reads the head, starts Watch after it and Resume."""
        client = self._client
        if self._decide is not None:
            self.decision = (await client._run(self._decide)).decision
        self._following = _shared.Following((await client.get_session(self._session)).last_seq + 1)
        self._call = client._open(_rpc.watch(self._session, self._following.from_seq))
        return asyncio.ensure_future(client._send(_rpc.resume(self._session, self._boot)))

    async def _after(self, uid: str) -> session_pb2.Session:
        assert self._resumed is not None
        with _rpc.translated():
            return await self._resumed

    async def _next(self) -> ExecItem | None:
        if self._resumed is None:
            self._resumed = await self._begin()
        resumed = self._resumed
        while not self._done:
            if self._reading is None:
                self._reading = asyncio.ensure_future(self._call.read())
            if not resumed.done():
                await asyncio.wait({self._reading, resumed}, return_when=asyncio.FIRST_COMPLETED)
            if not self._reading.done():
                failed = resumed.exception() is not None
                if failed or self._following.caught_up(resumed.result(), self._result):
                    self._reading.cancel()
                    self._call.cancel()
                    await self._end()
                    return None
                await asyncio.wait({self._reading})
            reading, self._reading = self._reading, None
            try:
                record = reading.result()
            except grpc.RpcError as err:
                raise self._failed(err) from None
            if record is EOF:
                await self._end()
                return None
            return _shared.absorb_record(self._result, record)
        return None

    async def _end(self) -> None:
        try:
            self._result.session = await self._after("")
        except AgentSessionsError as err:
            err.partial = self._result
            raise
        finally:
            self._done = True

    def cancel(self) -> None:
        """Stops reading (the resumed turn itself goes on)."""
        if self._call is not None:
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
        # The channel is made on first use, inside the event loop that uses it, so a client may
        # be made before the loop runs (at import, in a constructor).
        self._target = target
        self._tls = tls
        self._channel: grpc.aio.Channel | None = None
        self._stub_of_channel: Any = None
        self._metadata = _shared.auth_metadata(token)
        self.project = project
        self.timeout = timeout

    @property
    def _stub(self) -> Any:
        if self._channel is None:
            self._channel = _shared.connect(self._target, self._tls, grpc.aio.insecure_channel, grpc.aio.secure_channel)
            self._stub_of_channel = cast(Any, session_pb2_grpc).SessionsStub(self._channel)
        return self._stub_of_channel

    async def close(self) -> None:
        """Closes the channel."""
        if self._channel is not None:
            await self._channel.close(None)
            self._channel = None

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
        abandon_unfinished: bool = False,
    ) -> AsyncExecStream:
        """Runs one turn; an empty ``session`` creates one. Iterate it, or ``await`` it for
        the :class:`TurnResult`."""
        call = _rpc.exec_turn(
            session, inputs, harness, config, expected_last_seq, deadline_unix, resume_from_seq, abandon_unfinished
        )
        return AsyncExecStream(self._open(call), self.get_session)

    async def run(self, inputs: Input | Sequence[Input] | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`exec` and wait for the result."""
        return await self.exec(inputs, **kwargs).result()

    async def cancel(self, session: str, execution_id: str, reason: str = "USER") -> session_pb2.Session:
        """Stops a running execution."""
        return await self._run(_rpc.cancel(session, execution_id, reason))

    # Reading the journal

    async def records(
        self, session: str, *, from_seq: int = 0, to_seq: int = 0, page_records: int = PAGE_RECORDS
    ) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records, many per message (``Sessions.ReadRecords``). An unknown
        session raises :class:`NotFound`."""
        empty = True
        async for page in self._pages(_rpc.read_records(session, from_seq, to_seq, page_records)):
            for record in page:
                empty = False
                yield record
        if empty:
            await self.get_session(session)  # the server reads an unknown uid as empty: NotFound here

    def replay(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> AsyncIterator[common_pb2.LogRecord]:
        """The committed records in ``[from_seq, to_seq]`` (:meth:`records`; :meth:`watch` follows)."""
        return self.records(session, from_seq=from_seq, to_seq=to_seq)

    async def read_records(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> list[common_pb2.LogRecord]:
        """:meth:`records` as a list."""
        return [r async for r in self.records(session, from_seq=from_seq, to_seq=to_seq)]

    async def watch(self, session: str, *, from_seq: int = 0) -> AsyncIterator[common_pb2.LogRecord]:
        """Follows a session like ``agentctl watch``: its records from ``from_seq`` (0: all),
        then each one as it commits, until the session is deleted or the iterator is closed."""
        stream = self._open(_rpc.watch(session, from_seq))
        try:
            with _rpc.translated():
                while (record := await stream.read()) is not EOF:
                    yield record
        finally:
            stream.cancel()

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

    def resume(self, session: str, *, boot: bool = False) -> AsyncResumeStream:
        """Brings the session back; an interrupted or decided turn is re-driven from its
        journal. Streams the re-driven turn like :meth:`exec` (``await`` it for the result)."""
        return AsyncResumeStream(self, session, boot, None)

    # Approvals

    def approve(
        self,
        session: str,
        *,
        approved: bool = True,
        reason: str = "",
        execution_id: str = "",
        tool_call_id: str = "",
        request_seq: int = 0,
    ) -> AsyncResumeStream:
        """Decides a pending approval (without a reference, the session's pending one) and
        resumes the turn, as ``agentctl approve`` does (``decision`` is the committed record)."""
        decide = _rpc.approve(session, approved, reason, execution_id, tool_call_id, request_seq)
        return AsyncResumeStream(self, session, False, decide)

    def deny(self, session: str, *, reason: str = "", **ref: Any) -> AsyncResumeStream:
        """:meth:`approve` with ``approved=False``."""
        return self.approve(session, approved=False, reason=reason, **ref)

    async def pending_approvals(
        self, *, project: str = "", page_size: int = 0
    ) -> AsyncIterator[session_pb2.PendingApproval]:
        """Every approval request that waits for a decision, oldest first."""
        async for page in self._pages(_rpc.list_approvals(project or self.project, page_size)):
            for approval in page:
                yield approval
