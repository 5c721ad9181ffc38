"""Every call of the Sessions and HarnessRegistry APIs, written once and without I/O: the
requests, the defaults of their arguments, the shaping of the responses into results, the
paging and the mapping of errors. :mod:`.client` carries them over a blocking channel and
:mod:`.aio` over an asyncio one; neither builds a request nor reads a response itself.

* An operation (:data:`Op`) is a generator that yields each :class:`Call` to make, is sent the
  call's response, and returns the result (``yield from`` another operation makes its calls).
* A listing (:class:`Paged`) is the call for its first page, the items of a page and the call
  for the page after it (None after the last).
* Exec and Watch stream, and Resume answers only after a whole turn, so each is one :class:`Call`
  the client starts and reads itself.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

import grpc
from google.protobuf.message import Message

from ._pb import common_pb2, harness_pb2, harness_registry_pb2, session_pb2
from ._shared import Input, to_messages
from .errors import from_rpc_error

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One RPC: the stub's method, its request, and whether the client's ``timeout`` bounds it
    (not a turn's stream, which lasts as long as the turn, nor the registry's calls)."""

    method: str
    request: Message
    timed: bool = True


# The generated stubs carry no types: a response comes back as ``Any`` and each operation
# declares what it returns.
Op: TypeAlias = Generator[Call, Any, R]


@dataclass(frozen=True)
class Paged(Generic[T]):
    """A listing read page by page, the next page fetched when the items of the last run out."""

    first: Call
    items: Callable[[Any], Iterable[T]]
    after: Callable[[Any], Call | None]


def invoke(stub: Any, call: Call, metadata: Sequence[tuple[str, str]], timeout: float | None) -> Any:
    """Starts ``call`` on a sync or asyncio ``stub``: a response, a stream or an awaitable."""
    method = getattr(stub, call.method)
    if call.timed:
        return method(call.request, metadata=metadata, timeout=timeout)
    return method(call.request, metadata=metadata)


class translated:
    """Raises SDK exceptions (carrying the gRPC code) instead of raw ``grpc.RpcError`` from its
    body, which may ``await`` and ``yield``."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: object) -> None:
        if isinstance(err, grpc.RpcError):
            raise from_rpc_error(err) from None


def _by_token(page: Callable[[str], Call], items: Callable[[Any], Iterable[T]]) -> Paged[T]:
    """A listing whose pages follow ``next_page_token`` until it is empty."""

    def after(response: Any) -> Call | None:
        return page(response.next_page_token) if response.next_page_token else None

    return Paged(page(""), items, after)


# Sessions


def create_session(
    default_project: str, harness: str, model: str, name: str, project: str, labels: dict[str, str] | None
) -> Op[session_pb2.Session]:
    session = session_pb2.Session(
        metadata=common_pb2.ResourceMetadata(project=project or default_project, name=name),
        harness=harness,
        model=model,
        labels=labels or {},
    )
    return (yield Call("CreateSession", session_pb2.CreateSessionRequest(session=session)))


def get_session(uid: str) -> Op[session_pb2.Session]:
    return (yield Call("GetSession", session_pb2.GetSessionRequest(uid=uid)))


def list_sessions(project: str, page_size: int) -> Paged[session_pb2.Session]:
    return _by_token(
        lambda token: Call(
            "ListSessions", session_pb2.ListSessionsRequest(project=project, page_size=page_size, page_token=token)
        ),
        lambda page: page.sessions,
    )


def delete_session(uid: str) -> Op[session_pb2.Session]:
    return (yield Call("DeleteSession", session_pb2.DeleteSessionRequest(uid=uid)))


# Turns


def exec_turn(
    session: str,
    inputs: Input | Sequence[Input] | None,
    harness: str,
    config: bytes,
    expected_last_seq: int | None,
    deadline_unix: int,
    resume_from_seq: int,
    abandon_unfinished: bool = False,
) -> Call:
    request = session_pb2.ExecRequest(
        session=session,
        inputs=to_messages(inputs),
        harness=harness,
        config=config,
        deadline_unix=deadline_unix,
        resume_from_seq=resume_from_seq,
        abandon_unfinished=abandon_unfinished,
    )
    if expected_last_seq is not None:
        request.expected_last_seq = expected_last_seq
    return Call("Exec", request, timed=False)


def cancel(session: str, execution_id: str, reason: str) -> Op[session_pb2.Session]:
    request = session_pb2.CancelRequest(session=session, execution_id=execution_id, reason=reason)
    return (yield Call("Cancel", request))


# Reading the journal


def watch(session: str, from_seq: int) -> Call:
    """The session's records from ``from_seq``, then each one as it commits (untimed: it follows)."""
    return Call("Watch", session_pb2.WatchRequest(session=session, from_seq=from_seq), timed=False)


def read_records(session: str, from_seq: int, to_seq: int, limit: int) -> Paged[common_pb2.LogRecord]:
    def page(seq: int) -> Call:
        request = session_pb2.ReadRecordsRequest(session=session, from_seq=seq, to_seq=to_seq, max_records=limit)
        return Call("ReadRecords", request)

    def after(response: Any) -> Call | None:
        return page(response.next_seq) if response.next_seq else None

    return Paged(page(from_seq), lambda response: response.records, after)


# Lifecycle


def fork(
    session: str, at_seq: int, count: int, names: Iterable[str], labels: dict[str, str] | None
) -> Op[list[session_pb2.Session]]:
    request = session_pb2.ForkRequest(
        session=session, at_seq=at_seq, count=count, child_names=list(names), labels=labels or {}
    )
    response = yield Call("Fork", request)
    return list(response.children)


def suspend(session: str) -> Op[session_pb2.Session]:
    return (yield Call("Suspend", session_pb2.SuspendRequest(session=session)))


def resume(session: str, boot: bool) -> Call:
    """Resume answers once the re-driven turn ended or parked, so it is untimed like Exec."""
    return Call("Resume", session_pb2.ResumeRequest(session=session, boot=boot), timed=False)


# Approvals


def approve(
    session: str, approved: bool, reason: str, execution_id: str, tool_call_id: str, request_seq: int
) -> Op[session_pb2.ApproveResponse]:
    """Without a ``request_seq``, the session's pending approval (read first) is decided."""
    if not request_seq:
        pending = (yield from get_session(session)).pending_approval
        execution_id, tool_call_id, request_seq = pending.execution_id, pending.tool_call_id, pending.request_seq
    request = session_pb2.ApproveRequest(
        session=session,
        execution_id=execution_id,
        tool_call_id=tool_call_id,
        request_seq=request_seq,
        approved=approved,
        reason=reason,
    )
    return (yield Call("Approve", request))


def list_approvals(project: str, page_size: int) -> Paged[session_pb2.PendingApproval]:
    return _by_token(
        lambda token: Call(
            "ListApprovals", session_pb2.ListApprovalsRequest(project=project, page_size=page_size, page_token=token)
        ),
        lambda page: page.approvals,
    )


# The harness registry


def _registry(method: str, request: Message) -> Call:
    """A HarnessRegistry call (the registry client has no timeout)."""
    return Call(method, request, timed=False)


def register_harness(
    name: str, address: str, resumability: int, descriptor_id: str
) -> Op[harness_registry_pb2.RegisterHarnessResponse]:
    spec = harness_registry_pb2.HarnessSpec(
        remote=harness_registry_pb2.RemotePlacement(address=address),
        capabilities=harness_pb2.Capabilities(resumability=resumability),  # type: ignore[arg-type]
        descriptor_id=descriptor_id,
    )
    return (yield _registry("RegisterHarness", harness_registry_pb2.RegisterHarnessRequest(name=name, spec=spec)))


def get_harness(name: str, observe: bool) -> Op[harness_registry_pb2.HarnessRegistration]:
    return (yield _registry("GetHarness", harness_registry_pb2.GetHarnessRequest(name=name, observe=observe)))


def retire_harness(name: str, reason: str) -> Op[harness_registry_pb2.HarnessRegistration]:
    return (yield _registry("RetireHarness", harness_registry_pb2.RetireHarnessRequest(name=name, reason=reason)))


def list_harnesses(include_retired: bool) -> Paged[harness_registry_pb2.HarnessRegistration]:
    return _by_token(
        lambda token: _registry(
            "ListHarnesses",
            harness_registry_pb2.ListHarnessesRequest(page_token=token, include_retired=include_retired),
        ),
        lambda page: page.harnesses,
    )
