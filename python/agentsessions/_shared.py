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
        error.partial = self._result  # type: ignore[attr-defined]
        return error

    def cancel(self) -> None:
        """Stops reading (the turn itself goes on; the client's ``cancel`` stops it)."""
        self._call.cancel()
        self._done = True
