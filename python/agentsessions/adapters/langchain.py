"""LangChain and LangGraph on agentsessions.

:class:`HostChatModel` is a LangChain chat model whose every call goes through the host's
mediated model (``sink.model``): the host journals it, a replay serves it from the journal with
no provider call, a resume after a crash re-asks only the call that was cut, and a fork starts
from the recorded conversation. Tools the graph runs itself are reported as TOOL_RESULT records
before the model sees their results (they run again on replay: keep them repeatable).

:class:`LangGraphHarness` serves a graph built around that model (for example a ReAct agent
from ``langgraph.prebuilt.create_react_agent``) as a harness.

Requires the ``langgraph`` extra (``langchain-core`` and ``langgraph``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import json_format
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, PrivateAttr

from .. import harness as h
from .._pb import common_pb2, harness_pb2
from .._shared import message_text


def _text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for block in content:
        if isinstance(block, str):
            pieces.append(block)
        elif block.get("type") == "text":
            pieces.append(str(block.get("text", "")))
    return "".join(pieces)


def _text_part(text: str) -> common_pb2.Part:
    return common_pb2.Part(text=common_pb2.TextPart(text=text))


def to_message(message: BaseMessage) -> common_pb2.Message:
    """The wire message of a LangChain message."""
    text = _text(message.content)
    if isinstance(message, SystemMessage):
        return common_pb2.Message(role="system", parts=[_text_part(text)])
    if isinstance(message, AIMessage):
        parts = [_text_part(text)] if text else []
        for call in message.tool_calls:
            tool_call = common_pb2.ToolCall(id=call.get("id") or "", tool=call["name"], args=h.struct(call["args"]))
            parts.append(common_pb2.Part(tool_call=tool_call))
        return common_pb2.Message(role="assistant", parts=parts)
    if isinstance(message, ToolMessage):
        return common_pb2.Message(role="tool", parts=[common_pb2.Part(tool_result=tool_result(message))])
    return common_pb2.Message(role="user", parts=[_text_part(text)])


def tool_result(message: ToolMessage) -> common_pb2.ToolResult:
    """The receipt of a tool the graph ran."""
    failed = message.status == "error"
    text = _text(message.content)
    return common_pb2.ToolResult(
        id=message.tool_call_id,
        content=[_text_part(text)],
        is_error=failed,
        error=text if failed else "",
    )


def _tool_result_text(result: common_pb2.ToolResult) -> str:
    text = "".join(p.text.text for p in result.content if p.HasField("text"))
    if not text and result.HasField("output"):
        text = json.dumps(json_format.MessageToDict(result.output), sort_keys=True)
    return text


def from_message(message: common_pb2.Message) -> list[BaseMessage]:
    """LangChain messages for a wire message (a tool message may carry several results)."""
    text = message_text(message)
    if message.role == "system":
        return [SystemMessage(content=text)]
    if message.role == "assistant":
        calls = [
            {"name": p.tool_call.tool, "args": json_format.MessageToDict(p.tool_call.args), "id": p.tool_call.id}
            for p in message.parts
            if p.HasField("tool_call")
        ]
        return [AIMessage(content=text, tool_calls=calls)]
    if message.role == "tool":
        return [
            ToolMessage(
                content=_tool_result_text(p.tool_result),
                tool_call_id=p.tool_result.id,
                status="error" if p.tool_result.is_error else "success",
            )
            for p in message.parts
            if p.HasField("tool_result")
        ]
    return [HumanMessage(content=text)]


def _tool_definition(tool: dict[str, Any]) -> common_pb2.ToolDefinition:
    function = tool.get("function", tool)
    return common_pb2.ToolDefinition(
        name=function["name"],
        description=function.get("description", ""),
        input_schema=h.struct(function.get("parameters") or {}),
    )


def _tool_choice(choice: str | dict[str, Any] | None) -> common_pb2.ToolChoice | None:
    if choice is None:
        return None
    if isinstance(choice, dict):
        name = choice.get("function", {}).get("name", "")
        return common_pb2.ToolChoice(mode=common_pb2.ToolChoice.MODE_REQUIRED, name=name)
    modes = {"auto": common_pb2.ToolChoice.MODE_AUTO, "none": common_pb2.ToolChoice.MODE_NONE}
    if choice in modes:
        return common_pb2.ToolChoice(mode=modes[choice])
    if choice in ("any", "required"):
        return common_pb2.ToolChoice(mode=common_pb2.ToolChoice.MODE_REQUIRED)
    return common_pb2.ToolChoice(mode=common_pb2.ToolChoice.MODE_REQUIRED, name=choice)


# Model kwargs (``model.bind(temperature=...)``) sent as the model call's parameters, which the
# host types per provider; the others (tools, tool_choice) have fields of their own.
MODEL_KWARGS = ("temperature", "top_p", "max_tokens", "frequency_penalty", "presence_penalty", "seed", "response_format")


def model_params(kwargs: dict[str, Any]) -> dict[str, str]:
    """The model call's parameters from the kwargs a chat model call got."""
    params: dict[str, str] = {}
    for name in MODEL_KWARGS:
        value = kwargs.get(name)
        if value is not None:
            params[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return params


def usage_metadata(recorded: common_pb2.Usage) -> UsageMetadata:
    """LangChain's usage of one model call, from what the host answered (and journaled)."""
    return UsageMetadata(
        input_tokens=recorded.input_tokens,
        output_tokens=recorded.output_tokens,
        total_tokens=recorded.input_tokens + recorded.output_tokens,
        input_token_details=InputTokenDetails(cache_read=recorded.cached_input_tokens),
        output_token_details=OutputTokenDetails(reasoning=recorded.reasoning_tokens),
    )


class HostChatModel(BaseChatModel):
    """A chat model served by the agentsessions host through ``sink`` (one per execution)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sink: Any
    """The execution's :class:`agentsessions.harness.Sink`."""
    model_name: str = ""
    """Model id to ask for; empty means the host's default."""

    _asked: set[str] = PrivateAttr(default_factory=set)
    _reported: set[str] = PrivateAttr(default_factory=set)
    _answered: set[str] = PrivateAttr(default_factory=set)

    @property
    def _llm_type(self) -> str:
        return "agentsessions-host"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        """Offers ``tools`` to the model on every call."""
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def host_tool(
        self, name: str, *, description: str = "", args_schema: dict[str, Any] | None = None
    ) -> BaseTool:
        """A tool the host runs (one of the daemon's MCP tools, ``server__tool``) for the graph
        (``ToolNode``, ``create_react_agent``): its TOOL_CALL is journaled before the host runs
        it and its result after, keyed by the execution and the model's call id, so a replay or
        a resume after a crash serves the recorded result and never runs it twice."""
        schema = args_schema if args_schema is not None else {"type": "object", "properties": {}}
        return _HostTool(name=name, description=description or name, args_schema=schema, model=self)

    def _run_on_host(self, name: str, call_id: str, args: dict[str, Any]) -> ToolMessage:
        call = common_pb2.ToolCall(
            id=call_id,
            tool=name,
            args=h.struct(args),
            mediation=common_pb2.MEDIATION_CONTROLLER_MEDIATED,
            idempotency_key=f"{self.sink.execution_id}/{call_id}",
        )
        result = self.sink.tool_call(call)
        self._reported.add(call_id)  # the host journaled its result
        text = _tool_result_text(result) or result.error
        return ToolMessage(content=text, tool_call_id=call_id, name=name, status="error" if result.is_error else "success")

    def _report_tool_results(self, messages: Sequence[BaseMessage]) -> None:
        """Journals the results of tools the graph ran for calls this model asked for, once."""
        for message in messages:
            if isinstance(message, ToolMessage):
                call_id = message.tool_call_id
                if call_id in self._asked and call_id not in self._reported:
                    self._reported.add(call_id)
                    self.sink.report(tool_result(message))

    def settle(self, produced: Sequence[BaseMessage]) -> None:
        """Journals what the graph produced this turn that no model call recorded: results of
        tools the model asked for that no later call saw (a tool that ends the turn, e.g.
        ``return_direct``), and the text of messages a node wrote itself, as OUTPUT, so the
        turn's output is the graph's and the next turn's history is whole."""
        for message in produced:
            if isinstance(message, ToolMessage):
                if message.tool_call_id in self._asked and message.tool_call_id not in self._reported:
                    self._report_tool_results([message])
                    self.sink.output(_text(message.content))
            elif isinstance(message, AIMessage) and message.id not in self._answered:
                text = _text(message.content)
                if text:
                    self.sink.output(text)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._report_tool_results(messages)
        params = model_params(kwargs)
        if stop:
            params["stop"] = json.dumps(stop)
        answer = self.sink.complete(
            [to_message(m) for m in messages],
            model=self.model_name,
            params=params,
            tools=[_tool_definition(t) for t in kwargs.get("tools", [])],
            tool_choice=_tool_choice(kwargs.get("tool_choice")),
        )
        (reply,) = from_message(answer.message)
        assert isinstance(reply, AIMessage)
        reply.usage_metadata = usage_metadata(answer.usage)
        # Marks the reply as the model's (its OUTPUT is recorded); ids never reach the wire.
        reply.id = f"agentsessions-model-{len(self._answered)}"
        self._answered.add(reply.id)
        self._asked.update(call["id"] for call in reply.tool_calls if call["id"])
        return ChatResult(generations=[ChatGeneration(message=reply)], llm_output={"token_usage": reply.usage_metadata})


class _HostTool(BaseTool):
    """What :meth:`HostChatModel.host_tool` returns: called with the model's tool call (as
    ``ToolNode`` calls it), it has the host run the tool."""

    model: Any

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if not (isinstance(input, dict) and input.get("type") == "tool_call" and input.get("id")):
            raise ValueError(f"{self.name} runs on the host: call it with the model's tool call (ToolNode does)")
        return self.model._run_on_host(self.name, input["id"], dict(input.get("args") or {}))

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.invoke, input, config)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("called through invoke")


GraphBuilder = Callable[[HostChatModel], Runnable[Any, Any]]


# The id of the TOOL_RESULT that records a graph's state beyond its messages (no model call
# asked for it, and the adapter never shows it to the model).
STATE_KEY = "langgraph_state"


def state_result(state: dict[str, Any]) -> common_pb2.ToolResult:
    """The record of the graph's state keys beyond ``messages`` after a turn (as JSON: values
    that are not JSON are recorded as their text)."""
    data = json.loads(json.dumps(state, default=str, sort_keys=True))
    return common_pb2.ToolResult(id=STATE_KEY, output=h.struct(data))


def saved_state(message: common_pb2.Message) -> dict[str, Any] | None:
    """The state a :func:`state_result` recorded, None for any other message."""
    for part in message.parts:
        if part.HasField("tool_result") and part.tool_result.id == STATE_KEY:
            value = _whole_numbers(json_format.MessageToDict(part.tool_result.output))
            return value if isinstance(value, dict) else {}
    return None


def _whole_numbers(value: Any) -> Any:
    """``value`` with the whole floats a protobuf Struct makes of integers as ints again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


class LangGraphHarness:
    """Serves a LangGraph graph as a harness. ``build`` makes the graph around the host model
    (called once per execution); the graph takes and returns ``{"messages": [...]}`` and any
    other state keys. The conversation handed to it is rebuilt from the journal
    (``start.conversation()``); the other keys are recorded after a turn that changed them (a
    TOOL_RESULT with id ``langgraph_state``, which the model never sees) and handed to the next
    turn."""

    def __init__(
        self,
        id: str,
        build: GraphBuilder,
        *,
        version: str = "1",
        tools: Sequence[str] = (),
        recursion_limit: int = 25,
    ) -> None:
        self._id = id
        self._build = build
        self._version = version
        self._tools = [
            harness_pb2.ToolSpec(name=name, mediation=common_pb2.MEDIATION_IN_HARNESS_REPORTED) for name in tools
        ]
        self._recursion_limit = recursion_limit

    def describe(self) -> harness_pb2.HarnessDescriptor:
        return h.descriptor(self._id, version=self._version, tools=self._tools)

    async def run(self, start: h.Start, sink: h.Sink) -> None:
        """Runs the graph with ``ainvoke``, so ``async def`` nodes and tools work (plain ones run
        in threads; the sink serializes their calls)."""
        model = HostChatModel(sink=sink, model_name=start.model)
        graph = self._build(model)
        saved: dict[str, Any] = {}
        messages: list[BaseMessage] = []
        for message in start.conversation():
            if (state := saved_state(message)) is not None:
                saved = state
            else:
                messages.extend(from_message(message))
        state = await graph.ainvoke({**saved, "messages": messages}, config={"recursion_limit": self._recursion_limit})
        final = state.get("messages", []) if isinstance(state, dict) else []
        model.settle(final[len(messages) :])
        rest = {k: v for k, v in state.items() if k != "messages"} if isinstance(state, dict) else {}
        if rest and rest != saved:
            sink.report(state_result(rest))
