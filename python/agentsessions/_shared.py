"""What the sync and asyncio clients share besides the calls themselves (:mod:`._rpc`):
connection settings, messages, and the accumulation of a turn's frames into its result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from ._pb import common_pb2, session_pb2
from .errors import AgentSessionsError, from_rpc_error

# A Start frame or a page of records can be large; the server bounds pages at ~3 MiB.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]

Input = str | common_pb2.Message
C = TypeVar("C")


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


def connect(target: str, tls: Tls | None, insecure: Callable[..., C], secure: Callable[..., C]) -> C:
    """A channel to ``target`` made by the sync or the asyncio ``insecure_channel`` and
    ``secure_channel``: with TLS when ``tls`` is given."""
    options = channel_options(tls)
    if tls is None:
        return insecure(target, options=options)
    return secure(target, channel_credentials(tls), options=options)


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


@dataclass
class Delta:
    """An ephemeral chunk of streamed output (never journaled)."""

    execution_id: str
    part_index: int
    chunk: str
    done: bool


@dataclass
class TurnResult:
    """A finished turn: the session as it stands after it, the records committed during it, the
    text of each of its OUTPUT records, and the newest seq seen.

    A turn that parked on an approval ends without error: ``parked`` is True and
    ``pending_approval`` names the request a person has to decide (``Client.approve``)."""

    session: session_pb2.Session = field(default_factory=session_pb2.Session)
    records: list[common_pb2.LogRecord] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    last_seq: int = 0

    @property
    def output(self) -> str:
        """The turn's OUTPUT texts, one line each (a completion that only calls tools has none)."""
        return "\n".join(self.outputs)

    @property
    def execution_id(self) -> str:
        """The execution (turn) id, from the first record that carries one."""
        return next((r.event.execution_id for r in self.records if r.event.execution_id), "")

    @property
    def pending_approval(self) -> common_pb2.ApprovalRef | None:
        """The approval request the turn parked on, None when it did not park."""
        if self.session.exec_state == session_pb2.EXEC_AWAITING and self.session.HasField("pending_approval"):
            return self.session.pending_approval
        return None

    @property
    def parked(self) -> bool:
        """True when the turn waits for a person's decision on a gated tool call."""
        return self.pending_approval is not None


ExecItem = common_pb2.LogRecord | Delta | session_pb2.Session


def absorb_record(result: TurnResult, record: common_pb2.LogRecord) -> common_pb2.LogRecord:
    """Folds one committed record into ``result``."""
    result.records.append(record)
    result.last_seq = max(result.last_seq, record.seq)
    if record.event.kind == common_pb2.EVENT_OUTPUT:
        text = message_text(record.event.message)
        if text:
            result.outputs.append(text)
    return record


def absorb(result: TurnResult, update: session_pb2.ExecUpdate) -> ExecItem | None:
    """Folds one Exec frame into ``result`` and returns what it carried (None for a kind of
    frame this client does not know, which it skips)."""
    which = update.WhichOneof("update")
    if which == "record":
        return absorb_record(result, update.record)
    if which == "delta":
        d = update.delta
        return Delta(d.execution_id, d.part_index, d.chunk, d.done)
    if which == "session":
        result.session = update.session
        result.last_seq = max(result.last_seq, update.session.last_seq)
        return update.session
    return None


class TurnStream:
    """What the sync and the asyncio stream of a running turn keep: the call, the result so far
    and whether the stream has ended."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._result = TurnResult()
        self._done = False

    def _failed(self, err: grpc.RpcError) -> AgentSessionsError:
        """The SDK error of the turn's failed stream, carrying the result so far as ``partial``."""
        self._done = True
        error = from_rpc_error(err)
        error.partial = self._result
        return error

    def cancel(self) -> None:
        """Stops reading (the turn itself goes on; the client's ``cancel`` stops it)."""
        self._call.cancel()
        self._done = True


class Following:
    """How a re-driven turn (Resume, or approve/deny that resumes) is streamed: its records are
    read with ``Watch`` from the seq after the head the session had, while ``Resume`` runs; the
    watch stops once Resume has answered and every record up to the session's new head was read."""

    def __init__(self, from_seq: int) -> None:
        self.from_seq = from_seq
        self.stopping = False

    def caught_up(self, resumed: session_pb2.Session, result: TurnResult) -> bool:
        """Whether every record of the resumed turn was read."""
        return resumed.last_seq < self.from_seq or result.last_seq >= resumed.last_seq
