"""The harness server's side of Harness.Connect, driven frame by frame as a host would."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from harnesses import Conversational, Gated

from agentsessions import harness as h
from agentsessions import pb_common, pb_harness
from agentsessions._pb import harness_pb2_grpc


class Host:
    """A hand-driven host: frames go in through a queue, events come back in order."""

    def __init__(self, server: h.HarnessServer) -> None:
        self.channel = grpc.insecure_channel(server.address)
        self.stub: Any = harness_pb2_grpc.HarnessStub(self.channel)
        self.frames: queue.Queue[pb_harness.ControllerFrame | None] = queue.Queue()
        self.events: Iterator[pb_common.Event] = self.stub.Connect(self._outbound(), timeout=20)

    def _outbound(self) -> Iterator[pb_harness.ControllerFrame]:
        while (frame := self.frames.get()) is not None:
            yield frame

    def send(self, **frame: Any) -> None:
        self.frames.put(pb_harness.ControllerFrame(session="s1", execution_id="x1", **frame))

    def close(self) -> None:
        self.frames.put(None)
        self.channel.close()


def start_frame(text: str) -> dict[str, Any]:
    message = pb_common.Message(role="user", parts=[pb_common.Part(text=pb_common.TextPart(text=text))])
    return {"start": pb_harness.Start(inputs=[message], session_uid="s1")}


@pytest.fixture
def conversational() -> Iterator[h.HarnessServer]:
    server = h.start_server(Conversational())
    yield server
    server.stop(0)


def test_a_turn_frame_by_frame(conversational: h.HarnessServer) -> None:
    host = Host(conversational)
    try:
        host.send(**start_frame("hi"))
        call = next(host.events)
        assert call.kind == pb_common.EVENT_MODEL_CALL and call.execution_id == "x1"
        assert [m.role for m in call.model.messages] == ["user"] and len(call.model.id) == 16
        answer = pb_common.Message(role="assistant", parts=[pb_common.Part(text=pb_common.TextPart(text="yo"))])
        usage = pb_common.Usage(model="m", input_tokens=4, output_tokens=1)
        host.send(model=pb_harness.ModelResult(message=answer, usage=usage, model_call_id=call.model.id))
        rest = list(host.events)
        assert [e.kind for e in rest] == [pb_common.EVENT_USAGE, pb_common.EVENT_OUTPUT, pb_common.EVENT_END]
        assert rest[0].usage == usage  # the sink reports the usage the host answered with
        assert rest[-1].end.state == "COMPLETED"
    finally:
        host.close()


def test_a_wrong_answer_fails_the_turn(conversational: h.HarnessServer) -> None:
    host = Host(conversational)
    try:
        host.send(**start_frame("hi"))
        next(host.events)
        host.send(model=pb_harness.ModelResult(model_call_id="not-the-call"))
        with pytest.raises(grpc.RpcError) as failed:
            ends = list(host.events)
            assert ends[-1].end.state == "FAILED"
        assert failed.value.code() == grpc.StatusCode.INTERNAL
    finally:
        host.close()


def test_the_first_frame_must_be_start(conversational: h.HarnessServer) -> None:
    host = Host(conversational)
    try:
        host.send(cancel=pb_harness.Cancel(reason="USER"))
        with pytest.raises(grpc.RpcError) as refused:
            list(host.events)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        host.close()


def test_cancel_ends_the_stream_canceled(conversational: h.HarnessServer) -> None:
    host = Host(conversational)
    try:
        host.send(**start_frame("hi"))
        next(host.events)  # the model call, never answered
        host.send(cancel=pb_harness.Cancel(reason="USER"))
        (end,) = list(host.events)
        assert end.kind == pb_common.EVENT_END and end.end.state == "CANCELED"
    finally:
        host.close()


def test_a_park_is_acknowledged_without_an_end() -> None:
    server = h.start_server(Gated())
    host = Host(server)
    try:
        host.send(**start_frame("charge"))
        call = next(host.events)
        assert call.kind == pb_common.EVENT_TOOL_CALL and call.tool.mediation == pb_common.MEDIATION_REQUIRES_APPROVAL
        ref = pb_common.ApprovalRef(execution_id="x1", tool_call_id=call.tool.id, request_seq=7)
        host.send(park=ref)
        (parked,) = list(host.events)
        assert parked.kind == pb_common.EVENT_PARKED and parked.parked == ref
    finally:
        host.close()
        server.stop(0)


def test_describe(conversational: h.HarnessServer) -> None:
    with grpc.insecure_channel(conversational.address) as channel:
        described = harness_pb2_grpc.HarnessStub(channel).Describe(pb_harness.DescribeRequest(), timeout=10)
    assert described.id == "conversational" and described.version == "1"
    assert described.capabilities.resumability == pb_harness.RESUMABILITY_STATELESS_REPLAY
