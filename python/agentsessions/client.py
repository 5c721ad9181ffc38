"""The synchronous client of the ``agentsessions.v1.Sessions`` API.

.. code-block:: python

    from agentsessions import Client

    with Client("127.0.0.1:7070") as client:
        turn = client.exec("hello", harness="echo")
        for item in turn:          # records and deltas as they commit
            print(item)
        print(turn.result().output)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self, TypeVar, cast

import grpc

from . import _rpc, _shared
from ._pb import common_pb2, harness_pb2, harness_registry_pb2, harness_registry_pb2_grpc
from ._pb import session_pb2, session_pb2_grpc
from ._rpc import Call, Op, Paged
from ._shared import Delta, ExecItem, Input, Tls, TurnResult
from .canonical import VerifyReport, verify_records
from .errors import AlreadyExists

R = TypeVar("R")
T = TypeVar("T")

# Records per ReadRecords page: the server's maximum, so a 5,000-record session is one call.
PAGE_RECORDS = 10000


class _Connection:
    """A blocking channel to one of the daemon's APIs, a stub on it and the call metadata:
    carries the calls of :mod:`._rpc`."""

    def __init__(self, target: str, tls: Tls | None, token: str | None, stub: Callable[[grpc.Channel], Any]) -> None:
        self._channel = _shared.connect(target, tls, grpc.insecure_channel, grpc.secure_channel)
        self._stub = stub(self._channel)
        self._metadata = _shared.auth_metadata(token)

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timeout(self) -> float | None:
        """The deadline of a timed call (the registry's calls are not timed)."""
        return None

    def _send(self, call: Call) -> Any:
        """Makes ``call``: its response, or the stream of a streaming call."""
        with _rpc.translated():
            return _rpc.invoke(self._stub, call, self._metadata, self._timeout())

    def _run(self, op: Op[R]) -> R:
        """Makes the calls of ``op`` and returns its result."""
        response = None
        while True:
            try:
                call = op.send(response)
            except StopIteration as done:
                return done.value
            response = self._send(call)

    def _pages(self, paged: Paged[T]) -> Iterator[Iterable[T]]:
        """The items of a listing a page at a time, the next page fetched when asked for."""
        call: Call | None = paged.first
        while call is not None:
            page = self._send(call)
            yield paged.items(page)
            call = paged.after(page)


class ExecStream(_shared.TurnStream):
    """One running turn. Iterating yields each committed :class:`LogRecord`, each
    :class:`Delta` and each :class:`Session` frame as it arrives; :meth:`result` drains what is
    left and returns the :class:`TurnResult` (raising the turn's error, if any), whose
    ``session`` is the session as it stands after the turn."""

    def __init__(self, call: Any, settle: Callable[[str], session_pb2.Session]) -> None:
        super().__init__(call)
        self._settle = settle

    def __iter__(self) -> Iterator[ExecItem]:
        while not self._done:
            try:
                update = next(self._call)
            except StopIteration:
                self._finish()
                return
            except grpc.RpcError as err:
                raise self._failed(err) from None
            item = _shared.absorb(self._result, update)
            if item is not None:
                yield item

    def _finish(self) -> None:
        """The stream ended: the result's session becomes the session after the turn."""
        self._done = True
        uid = self._result.session.metadata.uid
        if uid:
            self._result.session = self._settle(uid)

    def deltas(self) -> Iterator[Delta]:
        """Only the text deltas of the turn."""
        for item in self:
            if isinstance(item, Delta):
                yield item

    def result(self) -> TurnResult:
        """Waits for the turn to end and returns its result."""
        for _ in self:
            pass
        return self._result


class ResumeStream(ExecStream):
    """A re-driven turn (:meth:`Client.resume`, or :meth:`Client.approve` / :meth:`Client.deny`,
    which resume the decided turn): iterating yields each record as it commits, :meth:`result`
    returns the :class:`TurnResult` like an Exec's. ``decision`` is the approval record the
    turn was resumed after (None for a plain resume)."""

    def __init__(
        self,
        watch: Any,
        resumed: grpc.Future[session_pb2.Session],
        following: _shared.Following,
        decision: common_pb2.LogRecord | None = None,
    ) -> None:
        super().__init__(watch, lambda uid: self._resumed.result())
        self._resumed = resumed
        self._following = following
        self.decision = decision
        resumed.add_done_callback(lambda _: self._stop_when_caught_up())

    def _stop_when_caught_up(self) -> None:
        if not self._resumed.done():
            return
        if self._resumed.exception() is None and not self._following.caught_up(self._resumed.result(), self._result):
            return
        self._following.stopping = True
        self._call.cancel()

    def __iter__(self) -> Iterator[ExecItem]:
        while not self._done:
            try:
                record = next(self._call)
            except StopIteration:
                break
            except grpc.RpcError as err:
                if self._following.stopping:
                    break
                raise self._failed(err) from None
            yield _shared.absorb_record(self._result, record)
            self._stop_when_caught_up()
        if self._done:
            return
        try:
            self._result.session = self._resumed.result()
        except grpc.RpcError as err:
            raise self._failed(err) from None
        self._done = True


class Client(_Connection):
    """A connection to an ``agentsessionsd`` Sessions endpoint.

    ``tls`` turns on TLS (and mutual TLS with a client certificate); ``token`` sends a bearer
    token on every call; ``project`` is the default project of created sessions.
    """

    def __init__(
        self,
        target: str,
        *,
        tls: Tls | None = None,
        token: str | None = None,
        project: str = "",
        timeout: float | None = None,
    ) -> None:
        super().__init__(target, tls, token, cast(Any, session_pb2_grpc).SessionsStub)
        self.project = project
        self.timeout = timeout

    def _timeout(self) -> float | None:
        return self.timeout

    # Sessions

    def create_session(
        self,
        *,
        harness: str = "",
        model: str = "",
        name: str = "",
        project: str = "",
        labels: dict[str, str] | None = None,
    ) -> session_pb2.Session:
        """Creates a session on ``harness`` (the server's default when empty)."""
        return self._run(_rpc.create_session(self.project, harness, model, name, project, labels))

    def get_session(self, uid: str) -> session_pb2.Session:
        """Reads one session."""
        return self._run(_rpc.get_session(uid))

    def list_sessions(self, *, project: str = "", page_size: int = 0) -> Iterator[session_pb2.Session]:
        """Every session of ``project``, fetched page by page as the iterator advances."""
        for page in self._pages(_rpc.list_sessions(project or self.project, page_size)):
            yield from page

    def delete_session(self, uid: str) -> session_pb2.Session:
        """Marks a session for deletion."""
        return self._run(_rpc.delete_session(uid))

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
    ) -> ExecStream:
        """Runs one turn; an empty ``session`` creates one. Strings are user text messages.
        ``abandon_unfinished`` closes a turn left parked or interrupted instead of refusing."""
        call = _rpc.exec_turn(
            session, inputs, harness, config, expected_last_seq, deadline_unix, resume_from_seq, abandon_unfinished
        )
        return ExecStream(self._send(call), self.get_session)

    def run(self, inputs: Input | Sequence[Input] | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`exec` and wait for the result."""
        return self.exec(inputs, **kwargs).result()

    def cancel(self, session: str, execution_id: str, reason: str = "USER") -> session_pb2.Session:
        """Stops a running execution."""
        return self._run(_rpc.cancel(session, execution_id, reason))

    # Reading the journal

    def records(
        self, session: str, *, from_seq: int = 0, to_seq: int = 0, page_records: int = PAGE_RECORDS
    ) -> Iterator[common_pb2.LogRecord]:
        """The committed records, many per message (``Sessions.ReadRecords``). An unknown
        session raises :class:`NotFound`."""
        empty = True
        for page in self._pages(_rpc.read_records(session, from_seq, to_seq, page_records)):
            for record in page:
                empty = False
                yield record
        if empty:
            self.get_session(session)  # the server reads an unknown uid as empty: NotFound here

    def replay(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> Iterator[common_pb2.LogRecord]:
        """The committed records in ``[from_seq, to_seq]`` (:meth:`records`; :meth:`watch` follows)."""
        return self.records(session, from_seq=from_seq, to_seq=to_seq)

    def read_records(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> list[common_pb2.LogRecord]:
        """:meth:`records` as a list."""
        return list(self.records(session, from_seq=from_seq, to_seq=to_seq))

    def watch(self, session: str, *, from_seq: int = 0) -> Iterator[common_pb2.LogRecord]:
        """Follows a session like ``agentctl watch``: its records from ``from_seq`` (0: all),
        then each one as it commits, until the session is deleted or the iterator is closed."""
        stream = self._send(_rpc.watch(session, from_seq))
        try:
            with _rpc.translated():
                yield from stream
        finally:
            stream.cancel()

    def verify(self, session: str) -> VerifyReport:
        """Reads the whole journal and recomputes every hash and link in Python."""
        return verify_records(self.records(session))

    # Lifecycle

    def fork(
        self,
        session: str,
        *,
        at_seq: int = 0,
        count: int = 1,
        names: Sequence[str] = (),
        labels: dict[str, str] | None = None,
    ) -> list[session_pb2.Session]:
        """Creates ``count`` children from ``session`` at ``at_seq`` (0: the head)."""
        return self._run(_rpc.fork(session, at_seq, count, names, labels))

    def suspend(self, session: str) -> session_pb2.Session:
        """Checkpoints the session and releases its compute."""
        return self._run(_rpc.suspend(session))

    def resume(self, session: str, *, boot: bool = False) -> ResumeStream:
        """Brings the session back; an interrupted or decided turn is re-driven from its
        journal. Streams the re-driven turn's records like :meth:`exec`; ``result().session``
        is the session after it."""
        return self._resume(session, boot, None)

    def _resume(self, session: str, boot: bool, decision: common_pb2.LogRecord | None) -> ResumeStream:
        following = _shared.Following(self.get_session(session).last_seq + 1)
        watch = self._send(_rpc.watch(session, following.from_seq))
        call = _rpc.resume(session, boot)
        resumed = self._stub.Resume.future(call.request, metadata=self._metadata)
        return ResumeStream(watch, resumed, following, decision)

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
    ) -> ResumeStream:
        """Decides a pending approval (without a reference, the session's pending one) and
        resumes the turn, as ``agentctl approve`` does: the stream is the resumed turn's
        (``decision`` is the committed APPROVAL_RESULT record)."""
        decided = self._run(_rpc.approve(session, approved, reason, execution_id, tool_call_id, request_seq))
        return self._resume(session, False, decided.decision)

    def deny(self, session: str, *, reason: str = "", **ref: Any) -> ResumeStream:
        """:meth:`approve` with ``approved=False``."""
        return self.approve(session, approved=False, reason=reason, **ref)

    def pending_approvals(self, *, project: str = "", page_size: int = 0) -> Iterator[session_pb2.PendingApproval]:
        """Every approval request that waits for a decision, oldest first."""
        for page in self._pages(_rpc.list_approvals(project or self.project, page_size)):
            yield from page


class RegistryClient(_Connection):
    """The operator's ``HarnessRegistry`` API (served on the daemon's ``--registry-addr``)."""

    def __init__(self, target: str, *, tls: Tls | None = None, token: str | None = None) -> None:
        super().__init__(target, tls, token, cast(Any, harness_registry_pb2_grpc).HarnessRegistryStub)

    def register(
        self,
        name: str,
        address: str,
        *,
        resumability: int = harness_pb2.RESUMABILITY_STATELESS_REPLAY,
        descriptor_id: str = "",
    ) -> harness_registry_pb2.RegisterHarnessResponse:
        """Registers the harness served at ``address`` under ``name``."""
        return self._run(_rpc.register_harness(name, address, resumability, descriptor_id))

    def register_versioned(
        self,
        name: str,
        address: str,
        *,
        resumability: int = harness_pb2.RESUMABILITY_STATELESS_REPLAY,
        descriptor_id: str = "",
        max_versions: int = 1000,
    ) -> harness_registry_pb2.RegisterHarnessResponse:
        """Registers under ``name``, or, when ``name`` already holds another spec (a name is
        bound to its spec for good: sessions on it keep it), under the first of ``name-v2``,
        ``name-v3``, … that is free or already holds this spec. Re-registering during
        development: the response's ``harness.metadata.name`` is the name to run on."""
        for version in range(1, max_versions + 1):
            candidate = name if version == 1 else f"{name}-v{version}"
            try:
                return self.register(candidate, address, resumability=resumability, descriptor_id=descriptor_id)
            except AlreadyExists:
                continue
        raise AlreadyExists(f"{name} and its versions up to v{max_versions} hold other specs")

    def get(self, name: str, *, observe: bool = False) -> harness_registry_pb2.HarnessRegistration:
        """Reads one registration (``observe`` also calls the harness's Describe)."""
        return self._run(_rpc.get_harness(name, observe))

    def retire(self, name: str, reason: str = "") -> harness_registry_pb2.HarnessRegistration:
        """Stops new sessions from selecting ``name``."""
        return self._run(_rpc.retire_harness(name, reason))

    def list(self, *, include_retired: bool = False) -> Iterator[harness_registry_pb2.HarnessRegistration]:
        """Every registration, in name order."""
        for page in self._pages(_rpc.list_harnesses(include_retired)):
            yield from page
