"""Python harnesses the tests serve in-process."""

from __future__ import annotations

import threading
import time

from agentsessions import harness as h
from agentsessions import pb_common


class Conversational:
    """Asks the host's model with the whole conversation, then records its own line."""

    def describe(self) -> pb_common.Message:  # type: ignore[override]
        return h.descriptor("conversational", version="1")

    def run(self, start: h.Start, sink: h.Sink) -> None:
        sink.model(start.conversation())  # its usage is recorded by the sink
        sink.output(f"python saw: {start.input_text}")


class Gated:
    """Calls tool ``charge`` behind an approval and says how it went."""

    def describe(self) -> pb_common.Message:  # type: ignore[override]
        return h.descriptor("gated", version="1")

    def run(self, start: h.Start, sink: h.Sink) -> None:
        call = pb_common.ToolCall(
            id="charge-1",
            tool="charge",
            args=h.struct({"amount": 5}),
            mediation=pb_common.MEDIATION_REQUIRES_APPROVAL,
            idempotency_key=f"{start.execution_id}-charge",
        )
        result = sink.tool_call(call)
        if result.code == pb_common.ToolResult.APPROVAL_DENIED:
            sink.output("charge denied")
        else:
            sink.output(f"charge ran: {result.error or 'ok'}")


class Waiting:
    """Waits until the host cancels it; ``started`` is set once it runs."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def describe(self) -> pb_common.Message:  # type: ignore[override]
        return h.descriptor("waiting", version="1")

    def run(self, start: h.Start, sink: h.Sink) -> None:
        self.started.set()
        deadline = time.monotonic() + 30
        while not sink.cancelled and time.monotonic() < deadline:
            time.sleep(0.02)
        sink.output("still here")  # raises Cancelled once the host cancelled


class Chatty:
    """Records ``start.config`` (a number, default 10) OUTPUT lines in one turn: a long journal."""

    def describe(self) -> pb_common.Message:  # type: ignore[override]
        return h.descriptor("chatty", version="1")

    def run(self, start: h.Start, sink: h.Sink) -> None:
        for i in range(int(start.config or b"10")):
            sink.output(f"line {i}")
