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

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ParamSpec, TypeVar, cast

import grpc

from . import _shared
from ._pb import common_pb2, harness_pb2, harness_registry_pb2, harness_registry_pb2_grpc
from ._pb import session_pb2, session_pb2_grpc
from ._shared import Delta, ExecItem, Input, Tls, TurnResult
from .canonical import VerifyReport, verify_records
from .errors import from_rpc_error

P = ParamSpec("P")
R = TypeVar("R")

# Records per ReadRecords page: the server's maximum, so a 5,000-record session is one call.
PAGE_RECORDS = 10000


def _translated(method: Callable[P, R]) -> Callable[P, R]:
    """Raises SDK exceptions (carrying the gRPC code) instead of raw ``grpc.RpcError``."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    return wrapper


def _channel(target: str, tls: Tls | None) -> grpc.Channel:
    options = _shared.channel_options(tls)
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, _shared.channel_credentials(tls), options=options)


class ExecStream:
    """One running turn. Iterating yields each committed :class:`LogRecord`, each
    :class:`Delta` and each :class:`Session` frame as it arrives; :meth:`result` drains what is
    left and returns the :class:`TurnResult` (raising the turn's error, if any)."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._result = TurnResult()
        self._done = False

    def __iter__(self) -> Iterator[ExecItem]:
        while not self._done:
            try:
                update = next(self._call)
            except StopIteration:
                self._done = True
                return
            except grpc.RpcError as err:
                self._done = True
                error = from_rpc_error(err)
                error.partial = self._result  # type: ignore[attr-defined]
                raise error from None
            yield _shared.absorb(self._result, update)

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

    def cancel(self) -> None:
        """Stops reading (the turn itself goes on; use :meth:`Client.cancel` to stop it)."""
        self._call.cancel()
        self._done = True


class Client:
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
        self._channel = _channel(target, tls)
        self._stub = cast(Any, session_pb2_grpc).SessionsStub(self._channel)
        self._metadata = _shared.auth_metadata(token)
        self.project = project
        self.timeout = timeout

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Sessions

    @_translated
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
        session = session_pb2.Session(
            metadata=common_pb2.ResourceMetadata(project=project or self.project, name=name),
            harness=harness,
            model=model,
            labels=labels or {},
        )
        request = session_pb2.CreateSessionRequest(session=session)
        return self._stub.CreateSession(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    def get_session(self, uid: str) -> session_pb2.Session:
        """Reads one session."""
        request = session_pb2.GetSessionRequest(uid=uid)
        return self._stub.GetSession(request, metadata=self._metadata, timeout=self.timeout)

    def list_sessions(self, *, project: str = "", page_size: int = 0) -> Iterator[session_pb2.Session]:
        """Every session of ``project``, fetched page by page as the iterator advances."""
        token = ""
        while True:
            page = self._list_page(project or self.project, page_size, token)
            yield from page.sessions
            token = page.next_page_token
            if not token:
                return

    @_translated
    def _list_page(self, project: str, page_size: int, token: str) -> session_pb2.ListSessionsResponse:
        request = session_pb2.ListSessionsRequest(project=project, page_size=page_size, page_token=token)
        return self._stub.ListSessions(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    def delete_session(self, uid: str) -> session_pb2.Session:
        """Marks a session for deletion."""
        request = session_pb2.DeleteSessionRequest(uid=uid)
        return self._stub.DeleteSession(request, metadata=self._metadata, timeout=self.timeout)

    # Turns

    @_translated
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
    ) -> ExecStream:
        """Runs one turn; an empty ``session`` creates one. Strings are user text messages."""
        request = _shared.exec_request(
            session, inputs, harness, config, expected_last_seq, deadline_unix, resume_from_seq
        )
        return ExecStream(self._stub.Exec(request, metadata=self._metadata))

    def run(self, inputs: Input | Sequence[Input] | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`exec` and wait for the result."""
        return self.exec(inputs, **kwargs).result()

    @_translated
    def cancel(self, session: str, execution_id: str, reason: str = "USER") -> session_pb2.Session:
        """Stops a running execution."""
        request = session_pb2.CancelRequest(session=session, execution_id=execution_id, reason=reason)
        return self._stub.Cancel(request, metadata=self._metadata, timeout=self.timeout)

    # Reading the journal

    def replay(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> Iterator[common_pb2.LogRecord]:
        """The committed records, streamed one message per record (``Sessions.Replay``)."""
        request = session_pb2.ReplayRequest(session=session, from_seq=from_seq, to_seq=to_seq)
        try:
            yield from self._stub.Replay(request, metadata=self._metadata, timeout=self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def records(
        self, session: str, *, from_seq: int = 0, to_seq: int = 0, page_records: int = PAGE_RECORDS
    ) -> Iterator[common_pb2.LogRecord]:
        """The committed records, many per message (``Sessions.ReadRecords``, the fast path)."""
        next_seq = from_seq
        while True:
            page = self._read_page(session, next_seq, to_seq, page_records)
            yield from page.records
            if page.next_seq == 0:
                return
            next_seq = page.next_seq

    def read_records(self, session: str, *, from_seq: int = 0, to_seq: int = 0) -> list[common_pb2.LogRecord]:
        """:meth:`records` as a list."""
        return list(self.records(session, from_seq=from_seq, to_seq=to_seq))

    @_translated
    def _read_page(self, session: str, from_seq: int, to_seq: int, limit: int) -> session_pb2.ReadRecordsResponse:
        request = session_pb2.ReadRecordsRequest(
            session=session, from_seq=from_seq, to_seq=to_seq, max_records=limit
        )
        return self._stub.ReadRecords(request, metadata=self._metadata, timeout=self.timeout)

    def verify(self, session: str) -> VerifyReport:
        """Reads the whole journal and recomputes every hash and link in Python."""
        return verify_records(self.records(session))

    # Lifecycle

    @_translated
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
        request = _shared.fork_request(session, at_seq, count, names, labels)
        response = self._stub.Fork(request, metadata=self._metadata, timeout=self.timeout)
        return list(response.children)

    @_translated
    def suspend(self, session: str) -> session_pb2.Session:
        """Checkpoints the session and releases its compute."""
        request = session_pb2.SuspendRequest(session=session)
        return self._stub.Suspend(request, metadata=self._metadata, timeout=self.timeout)

    @_translated
    def resume(self, session: str, *, boot: bool = False) -> session_pb2.Session:
        """Brings the session back; an interrupted turn is re-driven from its journal."""
        request = session_pb2.ResumeRequest(session=session, boot=boot)
        return self._stub.Resume(request, metadata=self._metadata, timeout=self.timeout)

    # Approvals

    @_translated
    def approve(
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
            pending = self.get_session(session).pending_approval
            execution_id, tool_call_id, request_seq = (
                pending.execution_id,
                pending.tool_call_id,
                pending.request_seq,
            )
        request = _shared.approve_request(
            session, execution_id, tool_call_id, request_seq, approved, reason
        )
        return self._stub.Approve(request, metadata=self._metadata, timeout=self.timeout)

    def deny(self, session: str, *, reason: str = "", **ref: Any) -> session_pb2.ApproveResponse:
        """:meth:`approve` with ``approved=False``."""
        return self.approve(session, approved=False, reason=reason, **ref)

    def pending_approvals(self, *, project: str = "", page_size: int = 0) -> Iterator[session_pb2.PendingApproval]:
        """Every approval request that waits for a decision, oldest first."""
        token = ""
        while True:
            page = self._approvals_page(project or self.project, page_size, token)
            yield from page.approvals
            token = page.next_page_token
            if not token:
                return

    @_translated
    def _approvals_page(self, project: str, page_size: int, token: str) -> session_pb2.ListApprovalsResponse:
        request = session_pb2.ListApprovalsRequest(project=project, page_size=page_size, page_token=token)
        return self._stub.ListApprovals(request, metadata=self._metadata, timeout=self.timeout)


class RegistryClient:
    """The operator's ``HarnessRegistry`` API (served on the daemon's ``--registry-addr``)."""

    def __init__(self, target: str, *, tls: Tls | None = None, token: str | None = None) -> None:
        self._channel = _channel(target, tls)
        self._stub = cast(Any, harness_registry_pb2_grpc).HarnessRegistryStub(self._channel)
        self._metadata = _shared.auth_metadata(token)

    def close(self) -> None:
        """Closes the channel."""
        self._channel.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_translated
    def register(
        self,
        name: str,
        address: str,
        *,
        resumability: int = harness_pb2.RESUMABILITY_STATELESS_REPLAY,
        descriptor_id: str = "",
    ) -> harness_registry_pb2.RegisterHarnessResponse:
        """Registers the harness served at ``address`` under ``name``."""
        spec = harness_registry_pb2.HarnessSpec(
            remote=harness_registry_pb2.RemotePlacement(address=address),
            capabilities=harness_pb2.Capabilities(resumability=resumability),  # type: ignore[arg-type]
            descriptor_id=descriptor_id,
        )
        request = harness_registry_pb2.RegisterHarnessRequest(name=name, spec=spec)
        return self._stub.RegisterHarness(request, metadata=self._metadata)

    @_translated
    def get(self, name: str, *, observe: bool = False) -> harness_registry_pb2.HarnessRegistration:
        """Reads one registration (``observe`` also calls the harness's Describe)."""
        request = harness_registry_pb2.GetHarnessRequest(name=name, observe=observe)
        return self._stub.GetHarness(request, metadata=self._metadata)

    @_translated
    def retire(self, name: str, reason: str = "") -> harness_registry_pb2.HarnessRegistration:
        """Stops new sessions from selecting ``name``."""
        request = harness_registry_pb2.RetireHarnessRequest(name=name, reason=reason)
        return self._stub.RetireHarness(request, metadata=self._metadata)

    def list(self, *, include_retired: bool = False) -> Iterator[harness_registry_pb2.HarnessRegistration]:
        """Every registration, in name order."""
        token = ""
        while True:
            page = self._list_page(include_retired, token)
            yield from page.harnesses
            token = page.next_page_token
            if not token:
                return

    @_translated
    def _list_page(self, include_retired: bool, token: str) -> harness_registry_pb2.ListHarnessesResponse:
        request = harness_registry_pb2.ListHarnessesRequest(page_token=token, include_retired=include_retired)
        return self._stub.ListHarnesses(request, metadata=self._metadata)
