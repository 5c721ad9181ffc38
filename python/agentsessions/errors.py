"""Exceptions raised by the client and harness SDKs, each carrying its gRPC status code."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

if TYPE_CHECKING:
    from ._shared import TurnResult


class AgentSessionsError(Exception):
    """A failed call. ``code`` is the gRPC status code the server (or transport) returned;
    ``partial`` is what a failed turn's stream had delivered before it failed (None for any
    other call)."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    partial: TurnResult | None = None

    def __init__(self, details: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(details)
        self.details = details
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code.name}: {self.details}"


class InvalidArgument(AgentSessionsError):
    """The request was malformed (INVALID_ARGUMENT)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AgentSessionsError):
    """The session (or harness) does not exist (NOT_FOUND)."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AgentSessionsError):
    """The name is taken (ALREADY_EXISTS)."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(AgentSessionsError):
    """The session's state refuses the call, e.g. an approval blocks it (FAILED_PRECONDITION)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(AgentSessionsError):
    """A concurrent writer won: the session is busy or the expected seq moved (ABORTED)."""

    code = grpc.StatusCode.ABORTED


class PermissionDenied(AgentSessionsError):
    """The caller may not touch this session (PERMISSION_DENIED)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(AgentSessionsError):
    """No or a bad credential (UNAUTHENTICATED)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class Unavailable(AgentSessionsError):
    """The server or a harness cannot be reached (UNAVAILABLE)."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AgentSessionsError):
    """The call ran past its deadline (DEADLINE_EXCEEDED)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(AgentSessionsError):
    """The call or the execution was cancelled (CANCELLED); in a harness, the host cancelled
    the execution (the next sink call raises it and the stream ends END{CANCELED})."""

    code = grpc.StatusCode.CANCELLED


class Unimplemented(AgentSessionsError):
    """The server does not offer this call (UNIMPLEMENTED)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(AgentSessionsError):
    """The server failed, e.g. the harness failed mid-turn (INTERNAL)."""

    code = grpc.StatusCode.INTERNAL


class ResourceExhausted(AgentSessionsError):
    """A limit was hit (RESOURCE_EXHAUSTED)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


_BY_CODE: dict[grpc.StatusCode, type[AgentSessionsError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        Aborted,
        PermissionDenied,
        Unauthenticated,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
        Unimplemented,
        Internal,
        ResourceExhausted,
    )
}


def from_rpc_error(err: grpc.RpcError) -> AgentSessionsError:
    """The SDK exception for a failed gRPC call."""
    code_of = getattr(err, "code", None)
    details_of = getattr(err, "details", None)
    code = code_of() if callable(code_of) else grpc.StatusCode.UNKNOWN
    details = details_of() if callable(details_of) else str(err)
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    cls = _BY_CODE.get(code, AgentSessionsError)
    return cls(details or code.name, code)
