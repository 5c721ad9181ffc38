"""Write a harness in Python and serve it over ``Harness.Connect``.

A harness is a class with two methods, ``describe()`` and ``run(start, sink)``; the host drives
one execution (turn) per Connect stream. Everything the turn does goes through the sink, so the
host journals it and a replay, a resume or a fork reproduces it:

* ``sink.model(messages, tools=...)`` asks the host's model (live, or the recorded answer on
  replay) and returns the completion, which the host already recorded as the turn's OUTPUT;
* ``sink.tool_call(call)`` runs a host-mediated tool, or one behind an approval (it raises
  :class:`ApprovalParked` while a person decides: let it propagate);
* ``sink.report(result)`` records a tool the harness ran itself;
* ``sink.output(text)`` and ``sink.usage(...)`` record text and token counts.

``run`` may be a plain method or a coroutine. :func:`serve` serves the harness until SIGINT or
SIGTERM; :func:`start_server` starts it in the background (tests, notebooks).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import grpc
from google.protobuf import struct_pb2

from ._pb import common_pb2, harness_pb2, harness_pb2_grpc
from ._shared import MAX_MESSAGE_BYTES, message_text, text_message
from .errors import AgentSessionsError
from .errors import Cancelled as Cancelled  # the one Cancelled, also the client's

Message = common_pb2.Message
ToolCall = common_pb2.ToolCall
ToolResult = common_pb2.ToolResult
ToolDefinition = common_pb2.ToolDefinition
HarnessDescriptor = harness_pb2.HarnessDescriptor

# Events buffered between the run and the transport before the run waits.
EVENT_BUFFER = 16
# Host frames queued for the sink: it asks for one answer at a time, so a host that keeps the
# protocol has at most one queued; frames beyond this were never asked for and are dropped.
REPLY_BUFFER = 8
# How often a blocked wait looks at whether the stream ended.
POLL_SECONDS = 0.2


class HarnessError(AgentSessionsError):
    """A sink call that cannot go on; returned to the host as END{FAILED}."""

    code = grpc.StatusCode.INTERNAL


class HostGone(HarnessError):
    """The host closed the stream (it failed, was cancelled, or a model call failed there)."""

    code = grpc.StatusCode.UNAVAILABLE


class ApprovalParked(HarnessError):
    """A gated tool call waits for a person's decision. Let it propagate out of ``run``: the
    host records the request, and resumes the turn once the decision is made."""

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, ref: common_pb2.ApprovalRef) -> None:
        super().__init__(
            f"tool call {ref.tool_call_id} parked for approval (request seq {ref.request_seq})"
        )
        self.ref = ref


@dataclass
class Start:
    """Everything one execution gets from the host."""

    execution_id: str
    session_uid: str
    inputs: list[Message]
    history: list[common_pb2.Event]
    config: bytes = b""
    resume_from_seq: int = 0
    model: str = ""
    identity: harness_pb2.IdentityContext = field(default_factory=harness_pb2.IdentityContext)

    @property
    def input_text(self) -> str:
        """The text of the turn's inputs, one line each."""
        return "\n".join(message_text(m) for m in self.inputs)

    def conversation(self) -> list[Message]:
        """The session so far as model messages: earlier inputs, completions and tool results
        from ``history``, then this turn's inputs. Built only from the journal, so replay
        rebuilds exactly the same conversation."""
        return conversation(self.history) + list(self.inputs)


def conversation(history: Sequence[common_pb2.Event]) -> list[Message]:
    """Model messages from journaled events: INPUT and OUTPUT messages as recorded, and each
    TOOL_RESULT as a ``tool`` message (what the model saw on the next call)."""
    messages: list[Message] = []
    for event in history:
        if event.kind in (common_pb2.EVENT_INPUT, common_pb2.EVENT_OUTPUT) and event.HasField("message"):
            messages.append(event.message)
        elif event.kind == common_pb2.EVENT_TOOL_RESULT and event.HasField("result"):
            part = common_pb2.Part(tool_result=event.result)
            messages.append(Message(role="tool", parts=[part]))
    return messages


def struct(value: dict[str, Any] | None) -> struct_pb2.Struct:
    """A protobuf Struct from a JSON-shaped dict."""
    out = struct_pb2.Struct()
    if value:
        out.update(value)
    return out


def descriptor(
    id: str,
    *,
    version: str = "1",
    models: Sequence[str] = (),
    tools: Sequence[harness_pb2.ToolSpec] = (),
    resumability: int = harness_pb2.RESUMABILITY_STATELESS_REPLAY,
    fork_safe: bool = True,
) -> harness_pb2.HarnessDescriptor:
    """A harness descriptor. Bump ``version`` whenever a recorded turn would come out
    differently (prompt, request order, tools): replay refuses a version mismatch up front."""
    return harness_pb2.HarnessDescriptor(
        id=id,
        version=version,
        models=list(models),
        tools=list(tools),
        capabilities=harness_pb2.Capabilities(
            resumability=resumability,  # type: ignore[arg-type]
            fork_safe=fork_safe,
        ),
    )


class Harness(Protocol):
    """What :func:`serve` serves. ``run`` may also be ``async def``."""

    def describe(self) -> harness_pb2.HarnessDescriptor:
        """The static contract; constant for a version."""
        ...

    def run(self, start: Start, sink: Sink) -> Any:
        """Drives one turn through ``sink``; returns when the turn is done."""
        ...


class _Execution:
    """The shared state of one Connect stream: its outgoing events, the host's answers, and
    whether the stream ended (cancelled, host gone, or finished)."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        self.events: queue.Queue[common_pb2.Event | None] = queue.Queue(EVENT_BUFFER)
        self.replies: queue.Queue[harness_pb2.ControllerFrame] = queue.Queue(REPLY_BUFFER)
        self.lock = threading.Lock()
        self.stopped: AgentSessionsError | None = None
        self.wake = threading.Event()

    def stop(self, why: AgentSessionsError) -> None:
        with self.lock:
            if self.stopped is None:
                self.stopped = why
        self.wake.set()

    def check(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    def emit(self, event: common_pb2.Event) -> None:
        event.execution_id = self.execution_id
        while True:
            self.check()
            try:
                self.events.put(event, timeout=POLL_SECONDS)
                return
            except queue.Full:
                continue

    def reply(self) -> harness_pb2.ControllerFrame:
        while True:
            self.check()
            try:
                frame = self.replies.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            if frame.execution_id and frame.execution_id != self.execution_id:
                raise HarnessError(
                    f"host frame for execution {frame.execution_id}, expected {self.execution_id}"
                )
            return frame


def _event(kind: int, **body: Any) -> common_pb2.Event:
    return common_pb2.Event(kind=kind, **body)  # type: ignore[arg-type]


class Sink:
    """The harness's handle on the host for one execution. Calls are serialized; a failed
    call (cancelled, host gone, protocol) fails every later one too."""

    def __init__(self, execution: _Execution, session_uid: str) -> None:
        self._x = execution
        self._session_uid = session_uid
        self._lock = threading.Lock()
        self.parked: common_pb2.ApprovalRef | None = None
        self.failure: HarnessError | None = None

    @property
    def execution_id(self) -> str:
        """The execution (turn) this sink records into: stable on replay, so idempotency keys
        derived from it and a model's call id are too."""
        return self._x.execution_id

    @property
    def cancelled(self) -> bool:
        """True once the host cancelled the execution or went away."""
        return self._x.stopped is not None

    def _fail(self, why: str) -> HarnessError:
        self.failure = HarnessError(why)
        return self.failure

    def model(
        self,
        messages: Sequence[Message],
        *,
        model: str = "",
        params: dict[str, str] | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: common_pb2.ToolChoice | None = None,
    ) -> Message:
        """Asks the host's model; returns the completion (text and/or tool_call parts). The
        host records it as the turn's OUTPUT: do not emit it again with :meth:`output`. The
        call's token usage is recorded too (see :meth:`complete` for the usage itself)."""
        return self.complete(messages, model=model, params=params, tools=tools, tool_choice=tool_choice).message

    def complete(
        self,
        messages: Sequence[Message],
        *,
        model: str = "",
        params: dict[str, str] | None = None,
        tools: Sequence[ToolDefinition] = (),
        tool_choice: common_pb2.ToolChoice | None = None,
    ) -> harness_pb2.ModelResult:
        """:meth:`model`, returning the host's whole answer: ``message`` and ``usage``. A
        non-zero usage is recorded as the call's USAGE record at once (the session's usage
        totals count it; on replay the host serves the recorded usage, so the same record is
        reported again): do not report it again with :meth:`usage`."""
        call = common_pb2.ModelCall(
            id=os.urandom(8).hex(),
            model=model,
            params=params or {},
            messages=list(messages),
            tools=list(tools),
        )
        if tool_choice is not None:
            call.tool_choice.CopyFrom(tool_choice)
        with self._lock:
            self._x.emit(_event(common_pb2.EVENT_MODEL_CALL, model=call))
            frame = self._x.reply()
            if frame.WhichOneof("frame") != "model" or frame.model.model_call_id != call.id:
                raise self._fail(f"expected the completion of model call {call.id}, got {frame.WhichOneof('frame')}")
            result = frame.model
            if _counts(result.usage):
                self._x.emit(_event(common_pb2.EVENT_USAGE, usage=result.usage))
            return result

    def tool_call(self, call: ToolCall) -> ToolResult:
        """A tool the host runs (``MEDIATION_CONTROLLER_MEDIATED``, with an idempotency key)
        or one that needs approval (``MEDIATION_REQUIRES_APPROVAL``). Returns the recorded
        result; raises :class:`ApprovalParked` while a decision is pending."""
        with self._lock:
            self._x.emit(_event(common_pb2.EVENT_TOOL_CALL, tool=call))
            frame = self._x.reply()
            which = frame.WhichOneof("frame")
            if which == "park":
                ref = frame.park
                if ref.tool_call_id != call.id or ref.request_seq <= 0:
                    raise self._fail(f"park for call {ref.tool_call_id}, expected {call.id}")
                self.parked = ref
                raise ApprovalParked(ref)
            if which == "approval":
                if frame.approval.tool_call_id != call.id:
                    raise self._fail(f"decision for call {frame.approval.tool_call_id}, expected {call.id}")
                frame = self._x.reply()
                which = frame.WhichOneof("frame")
            if which != "tool" or frame.tool.id != call.id:
                raise self._fail(f"expected the result of tool call {call.id}, got {which}")
            return frame.tool

    def report(self, result: ToolResult) -> None:
        """Records a tool the harness ran itself (``MEDIATION_IN_HARNESS_REPORTED``). Such
        tools run again on replay: keep them free of effects that must not repeat."""
        with self._lock:
            self._x.emit(_event(common_pb2.EVENT_TOOL_RESULT, result=result))

    def output(self, text: str) -> None:
        """Records text the harness produced itself (not a model's answer)."""
        with self._lock:
            self._x.emit(_event(common_pb2.EVENT_OUTPUT, message=text_message(text, "assistant")))

    def usage(
        self, *, model: str = "", input_tokens: int = 0, output_tokens: int = 0, reasoning_tokens: int = 0
    ) -> None:
        """Records token accounting of the harness's own (a host model call's usage is recorded
        by :meth:`model` already)."""
        usage = common_pb2.Usage(
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            reasoning_tokens=reasoning_tokens,
        )
        with self._lock:
            self._x.emit(_event(common_pb2.EVENT_USAGE, usage=usage))


def _counts(usage: common_pb2.Usage) -> bool:
    """Whether ``usage`` counts any tokens (an empty one is not recorded)."""
    return any((usage.input_tokens, usage.output_tokens, usage.reasoning_tokens, usage.cached_input_tokens))


def _end(state: str, error: str = "", code: int = 0) -> common_pb2.Event:
    end = common_pb2.HarnessEnd(state=state)
    if error:
        end.error.CopyFrom(common_pb2.Error(code=code, description=error))
    return _event(common_pb2.EVENT_END, end=end)


def _is_async(harness: Harness) -> bool:
    return inspect.iscoroutinefunction(harness.run)


class _Servicer(harness_pb2_grpc.HarnessServicer):
    def __init__(self, harness: Harness, runs: futures.ThreadPoolExecutor) -> None:
        self._harness = harness
        self._runs = runs

    def Describe(self, request: harness_pb2.DescribeRequest, context: grpc.ServicerContext) -> harness_pb2.HarnessDescriptor:
        try:
            return self._harness.describe()
        except Exception as err:  # a harness bug is the host's UNKNOWN, never a crash
            context.abort(grpc.StatusCode.INTERNAL, f"describe failed: {err}")
            raise

    def Connect(
        self, request_iterator: Iterator[harness_pb2.ControllerFrame], context: grpc.ServicerContext
    ) -> Iterator[common_pb2.Event]:
        first = next(request_iterator, None)
        if first is None:
            return
        if first.WhichOneof("frame") != "start":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first frame must be start")
        if not first.execution_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the start frame has no execution id")
        s = first.start
        start = Start(
            execution_id=first.execution_id,
            session_uid=s.session_uid or first.session,
            inputs=list(s.inputs),
            history=list(s.history),
            config=s.config,
            resume_from_seq=s.resume_from_seq,
            model=s.model,
            identity=s.identity,
        )
        x = _Execution(first.execution_id)
        sink = Sink(x, start.session_uid)
        threading.Thread(target=_route, args=(request_iterator, x), daemon=True).start()
        self._runs.submit(self._run, start, sink, x)
        failed = ""
        # Stream events until the run delivered its last one (None) or the stream stopped.
        while True:
            try:
                event = x.events.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if x.stopped is not None:
                    break
                continue
            if event is None:
                break
            yield event
            if event.kind == common_pb2.EVENT_END and event.end.state == "FAILED":
                failed = event.end.error.description or "the harness failed"
        if isinstance(x.stopped, Cancelled):
            yield _end("CANCELED", str(x.stopped), grpc.StatusCode.CANCELLED.value[0])
        elif failed:
            context.set_code(grpc.StatusCode.INTERNAL)
            context.set_details(failed)

    def _run(self, start: Start, sink: Sink, x: _Execution) -> None:
        """Runs the harness, then delivers the stream's last event and the end marker."""
        last = self._outcome(start, sink)
        try:
            x.emit(last)
            x.events.put(None, timeout=POLL_SECONDS)
        except (AgentSessionsError, queue.Full):
            pass  # the stream already stopped; nobody reads the outcome

    def _outcome(self, start: Start, sink: Sink) -> common_pb2.Event:
        """Runs the harness; returns the stream's last event (END, or PARKED)."""
        try:
            if _is_async(self._harness):
                asyncio.run(self._harness.run(start, sink))
            else:
                self._harness.run(start, sink)
            error: BaseException | None = None
        except BaseException as err:  # the run's outcome is reported, never raised here
            error = err
        if sink.parked is not None and (error is None or isinstance(error, ApprovalParked)):
            return _event(common_pb2.EVENT_PARKED, parked=sink.parked)
        if error is not None:
            return _end("FAILED", f"{type(error).__name__}: {error}", grpc.StatusCode.INTERNAL.value[0])
        if sink.failure is not None:
            return _end("FAILED", str(sink.failure), grpc.StatusCode.INTERNAL.value[0])
        return _end("COMPLETED")


def _route(frames: Iterator[harness_pb2.ControllerFrame], x: _Execution) -> None:
    """Reads host frames: a cancel stops the execution, answers go to the sink, the end of
    the stream means the host is gone."""
    try:
        for frame in frames:
            if frame.WhichOneof("frame") == "cancel":
                x.stop(Cancelled(f"cancelled by the host ({frame.cancel.reason})"))
                _nudge(x)
                return
            try:
                x.replies.put_nowait(frame)
            except queue.Full:
                pass  # never asked for (see REPLY_BUFFER)
    except grpc.RpcError:
        pass
    x.stop(HostGone("the host closed the stream"))
    _nudge(x)


def _nudge(x: _Execution) -> None:
    """Wakes the streaming loop at once after a stop (it also polls)."""
    try:
        x.events.put_nowait(None)
    except queue.Full:
        pass


class HarnessServer:
    """A running harness server; :attr:`address` is what the host dials."""

    def __init__(self, server: grpc.Server, address: str) -> None:
        self._server = server
        self.address = address

    def stop(self, grace: float | None = 1.0) -> None:
        """Stops serving; running turns get ``grace`` seconds."""
        self._server.stop(grace).wait()

    def wait(self) -> None:
        """Blocks until the server stops."""
        self._server.wait_for_termination()


def start_server(harness: Harness, address: str = "127.0.0.1:0", *, max_turns: int = 32) -> HarnessServer:
    """Serves ``harness`` on ``address`` (``host:port``, port 0 picks one, or ``unix:/path``)
    in the background and returns at once. ``max_turns`` bounds concurrent executions."""
    workers = futures.ThreadPoolExecutor(max_workers=max_turns + 4, thread_name_prefix="harness-rpc")
    runs = futures.ThreadPoolExecutor(max_workers=max_turns, thread_name_prefix="harness-run")
    server = grpc.server(
        workers,
        maximum_concurrent_rpcs=max_turns,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    cast(Any, harness_pb2_grpc).add_HarnessServicer_to_server(_Servicer(harness, runs), server)
    if address.startswith("unix:"):
        server.add_insecure_port(address)
        bound = address
    else:
        port = server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot listen on {address}")
        host = address.rsplit(":", 1)[0] or "0.0.0.0"
        bound = f"{host}:{port}"
    server.start()
    return HarnessServer(server, bound)


def serve(
    harness: Harness,
    address: str,
    *,
    max_turns: int = 32,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serves ``harness`` on ``address`` until SIGINT or SIGTERM, then lets running turns
    finish for a few seconds. ``ready`` is called with the bound address (default: print
    ``harness listening on ADDRESS``)."""
    server = start_server(harness, address, max_turns=max_turns)
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if ready is None:
            print(f"harness listening on {server.address}", flush=True)
        else:
            ready(server.address)
        stopping.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop(grace=5.0)
