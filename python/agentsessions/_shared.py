"""What the sync and asyncio clients share: connection settings, request building and the
accumulation of a turn's frames into its result."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from ._pb import common_pb2, session_pb2

# A Start frame or a page of records can be large; the server bounds pages at ~3 MiB.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]

Input = str | common_pb2.Message


@dataclass(frozen=True)
class Tls:
    """TLS settings: the CA that signed the server (None: system roots), and a client
    certificate and key for mutual TLS."""

    ca: str | Path | bytes | None = None
    cert: str | Path | bytes | None = None
    key: str | Path | bytes | None = None
    server_name: str | None = None


def _read(value: str | Path | bytes | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


def channel_credentials(tls: Tls) -> grpc.ChannelCredentials:
    """The gRPC credentials for ``tls``."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca),
        private_key=_read(tls.key),
        certificate_chain=_read(tls.cert),
    )


def channel_options(tls: Tls | None) -> list[tuple[str, int | str]]:
    """Channel options, with the TLS server name override when one is given."""
    options: list[tuple[str, int | str]] = list(CHANNEL_OPTIONS)
    if tls is not None and tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return options


def auth_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """The bearer token as call metadata (works over TLS and, for tests, cleartext)."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def text_message(text: str, role: str = "user") -> common_pb2.Message:
    """A message with one text part."""
    return common_pb2.Message(role=role, parts=[common_pb2.Part(text=common_pb2.TextPart(text=text))])


def to_messages(inputs: Input | Sequence[Input] | None) -> list[common_pb2.Message]:
    """Exec inputs: strings become user text messages, messages pass through."""
    if inputs is None:
        return []
    if isinstance(inputs, (str, common_pb2.Message)):
        inputs = [inputs]
    return [text_message(i) if isinstance(i, str) else i for i in inputs]


def message_text(message: common_pb2.Message) -> str:
    """The concatenated text parts of a message."""
    return "".join(part.text.text for part in message.parts if part.HasField("text"))


def exec_request(
    session: str,
    inputs: Input | Sequence[Input] | None,
    harness: str,
    config: bytes,
    expected_last_seq: int | None,
    deadline_unix: int,
    resume_from_seq: int,
) -> session_pb2.ExecRequest:
    request = session_pb2.ExecRequest(
        session=session,
        inputs=to_messages(inputs),
        harness=harness,
        config=config,
        deadline_unix=deadline_unix,
        resume_from_seq=resume_from_seq,
    )
    if expected_last_seq is not None:
        request.expected_last_seq = expected_last_seq
    return request


@dataclass
class Delta:
    """An ephemeral chunk of streamed output (never journaled)."""

    execution_id: str
    part_index: int
    chunk: str
    done: bool


@dataclass
class TurnResult:
    """A finished Exec: the newest session frame, the records committed during the turn, the
    text of its OUTPUT records, and the newest seq seen."""

    session: session_pb2.Session = field(default_factory=session_pb2.Session)
    records: list[common_pb2.LogRecord] = field(default_factory=list)
    output: str = ""
    last_seq: int = 0

    @property
    def execution_id(self) -> str:
        """The execution (turn) id, from the first record that carries one."""
        return next((r.event.execution_id for r in self.records if r.event.execution_id), "")


ExecItem = common_pb2.LogRecord | Delta | session_pb2.Session


def absorb(result: TurnResult, update: session_pb2.ExecUpdate) -> ExecItem:
    """Folds one Exec frame into ``result`` and returns what it carried."""
    which = update.WhichOneof("update")
    if which == "record":
        record = update.record
        result.records.append(record)
        result.last_seq = max(result.last_seq, record.seq)
        if record.event.kind == common_pb2.EVENT_OUTPUT:
            result.output += message_text(record.event.message)
        return record
    if which == "delta":
        d = update.delta
        return Delta(d.execution_id, d.part_index, d.chunk, d.done)
    result.session = update.session
    result.last_seq = max(result.last_seq, update.session.last_seq)
    return update.session


def fork_request(
    session: str,
    at_seq: int,
    count: int,
    names: Iterable[str],
    labels: dict[str, str] | None,
) -> session_pb2.ForkRequest:
    return session_pb2.ForkRequest(
        session=session, at_seq=at_seq, count=count, child_names=list(names), labels=labels or {}
    )


def approve_request(
    session: str,
    execution_id: str,
    tool_call_id: str,
    request_seq: int,
    approved: bool,
    reason: str,
) -> session_pb2.ApproveRequest:
    return session_pb2.ApproveRequest(
        session=session,
        execution_id=execution_id,
        tool_call_id=tool_call_id,
        request_seq=request_seq,
        approved=approved,
        reason=reason,
    )
