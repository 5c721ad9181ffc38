"""agentsessions: durable, hash-chained agent sessions, from Python.

* :class:`Client` / :class:`AsyncClient` — the Sessions API (sessions, turns, replay, verify,
  fork, suspend/resume, approvals, cancel);
* :mod:`agentsessions.harness` — write a harness in Python and serve it over Harness.Connect;
* :mod:`agentsessions.canonical` — the journal's canonical hash and chain verification;
* :mod:`agentsessions.adapters` — LangGraph / LangChain and OpenAI Agents SDK models routed
  through the host.
"""

__version__ = "0.1.0"

from ._pb import common_pb2 as pb_common
from ._pb import harness_pb2 as pb_harness
from ._pb import harness_registry_pb2 as pb_registry
from ._pb import session_pb2 as pb_session
from ._shared import Delta, Tls, TurnResult, message_text, text_message
from .aio import AsyncClient, AsyncExecStream
from .canonical import VerifyReport, content_hash, verify_records
from .client import Client, ExecStream, RegistryClient
from .errors import (
    Aborted,
    AgentSessionsError,
    AlreadyExists,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from .harness import ApprovalParked, HarnessError, HostGone

__all__ = [
    "Aborted",
    "AgentSessionsError",
    "AlreadyExists",
    "ApprovalParked",
    "Cancelled",
    "DeadlineExceeded",
    "FailedPrecondition",
    "HarnessError",
    "HostGone",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "AsyncClient",
    "AsyncExecStream",
    "Client",
    "Delta",
    "ExecStream",
    "RegistryClient",
    "Tls",
    "TurnResult",
    "VerifyReport",
    "__version__",
    "content_hash",
    "message_text",
    "pb_common",
    "pb_harness",
    "pb_registry",
    "pb_session",
    "text_message",
    "verify_records",
]
