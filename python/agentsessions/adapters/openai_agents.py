"""The OpenAI Agents SDK on agentsessions.

:class:`HostModel` implements the SDK's ``Model`` so every model call of an ``Agent`` goes
through the host's mediated model (``sink.model``): journaled, served from the journal on
replay and resume, never sent to a provider by the harness. Function tools the agent runs
itself are reported as TOOL_RESULT records before the model sees their outputs (they run again
on replay: keep them repeatable).

:class:`AgentsHarness` serves an agent built around that model as a harness.

Requires the ``openai-agents`` extra.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agents import Agent, FunctionTool, Handoff, ModelSettings, RunConfig, RunHooks, Runner, set_tracing_disabled
from agents.agent_output import AgentOutputSchemaBase
from agents.tool_context import ToolContext
from agents.result import RunResultBase
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from google.protobuf import json_format
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from openai.types.responses import Response, ResponseCompletedEvent
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails, ResponseUsage

from .. import harness as h
from .._pb import common_pb2, harness_pb2
from .._shared import message_text

# Ids the SDK would otherwise take from the Responses API; never journaled (the wire message
# drops them), so a constant keeps every request identical on replay.
FAKE_ID = "__fake_id__"


def _text_part(text: str) -> common_pb2.Part:
    return common_pb2.Part(text=common_pb2.TextPart(text=text))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for block in content or []:
        block = block if isinstance(block, dict) else block.model_dump()
        if block.get("type") in ("input_text", "output_text", "text"):
            pieces.append(str(block.get("text", "")))
    return "".join(pieces)


def _item(item: Any) -> dict[str, Any]:
    return item if isinstance(item, dict) else dict(item.model_dump(exclude_unset=True))


def to_messages(system: str | None, items: str | list[TResponseInputItem]) -> list[common_pb2.Message]:
    """Wire messages for the SDK's instructions and Responses-style input items."""
    messages: list[common_pb2.Message] = []
    if system:
        messages.append(common_pb2.Message(role="system", parts=[_text_part(system)]))
    if isinstance(items, str):
        messages.append(common_pb2.Message(role="user", parts=[_text_part(items)]))
        return messages
    for raw in items:
        item = _item(raw)
        kind = item.get("type", "message")
        if kind == "function_call":
            call = common_pb2.ToolCall(
                id=item["call_id"], tool=item["name"], args=h.struct(json.loads(item.get("arguments") or "{}"))
            )
            if not messages or messages[-1].role != "assistant":
                messages.append(common_pb2.Message(role="assistant"))
            messages[-1].parts.append(common_pb2.Part(tool_call=call))
        elif kind == "function_call_output":
            result = common_pb2.ToolResult(id=item["call_id"], content=[_text_part(_content_text(item.get("output")))])
            messages.append(common_pb2.Message(role="tool", parts=[common_pb2.Part(tool_result=result)]))
        elif kind == "message":
            role = item.get("role", "user")
            role = "system" if role == "developer" else role
            text = _content_text(item.get("content"))
            messages.append(common_pb2.Message(role=role, parts=[_text_part(text)] if text else []))
    return messages


def _tool_output_text(result: common_pb2.ToolResult) -> str:
    text = "".join(p.text.text for p in result.content if p.HasField("text"))
    if not text and result.HasField("output"):
        text = json.dumps(json_format.MessageToDict(result.output), sort_keys=True)
    return text


def to_items(messages: Sequence[common_pb2.Message]) -> list[TResponseInputItem]:
    """Responses-style input items for wire messages (rebuilding a session's conversation)."""
    items: list[TResponseInputItem] = []
    for message in messages:
        text = message_text(message)
        if message.role == "assistant":
            if text:
                items.append(_output_message(text).model_dump(exclude_unset=True))  # type: ignore[arg-type]
            for part in message.parts:
                if part.HasField("tool_call"):
                    items.append(_function_call(part.tool_call).model_dump(exclude_unset=True))  # type: ignore[arg-type]
        elif message.role == "tool":
            for part in message.parts:
                if part.HasField("tool_result"):
                    output = {"type": "function_call_output", "call_id": part.tool_result.id,
                              "output": _tool_output_text(part.tool_result)}  # fmt: skip
                    items.append(output)  # type: ignore[arg-type]
        else:
            items.append({"role": "system" if message.role == "system" else "user", "content": text})
    return items


def _output_message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=FAKE_ID,
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


def _function_call(call: common_pb2.ToolCall) -> ResponseFunctionToolCall:
    arguments = json.dumps(json_format.MessageToDict(call.args), sort_keys=True)
    return ResponseFunctionToolCall(
        arguments=arguments, call_id=call.id, name=call.tool, type="function_call", id=FAKE_ID, status="completed"
    )


def _tool_definition(tool: Any) -> common_pb2.ToolDefinition | None:
    if not isinstance(tool, FunctionTool):
        return None  # hosted tools (web search…) are the Responses API's, not a chat model's
    return common_pb2.ToolDefinition(
        name=tool.name, description=tool.description, input_schema=h.struct(tool.params_json_schema)
    )


def _handoff_definition(handoff: Handoff[Any, Any]) -> common_pb2.ToolDefinition:
    return common_pb2.ToolDefinition(
        name=handoff.tool_name, description=handoff.tool_description, input_schema=h.struct(handoff.input_json_schema)
    )


def settings_params(settings: ModelSettings, output_schema: AgentOutputSchemaBase | None) -> dict[str, str]:
    """The model call's parameters from the agent's ``ModelSettings`` and ``output_type``."""
    params: dict[str, str] = {}
    for name in ("temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens", "top_logprobs"):
        value = getattr(settings, name, None)
        if value is not None:
            params[name] = str(value)
    for name in ("parallel_tool_calls", "store"):
        value = getattr(settings, name, None)
        if value is not None:
            params[name] = "true" if value else "false"
    if settings.metadata:
        params["metadata"] = json.dumps(settings.metadata, sort_keys=True)
    if output_schema is not None and not output_schema.is_plain_text():
        params["response_format"] = json.dumps(
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "final_output",
                    "schema": output_schema.json_schema(),
                    "strict": output_schema.is_strict_json_schema(),
                },
            },
            sort_keys=True,
        )
    return params


def _tool_choice(choice: Any) -> common_pb2.ToolChoice | None:
    """The SDK's ``tool_choice`` (``auto``, ``required``, ``none`` or a tool's name)."""
    if choice is None:
        return None
    if not isinstance(choice, str):
        choice = getattr(choice, "name", "") or ""
    modes = {
        "auto": common_pb2.ToolChoice.MODE_AUTO,
        "none": common_pb2.ToolChoice.MODE_NONE,
        "required": common_pb2.ToolChoice.MODE_REQUIRED,
    }
    if choice in modes:
        return common_pb2.ToolChoice(mode=modes[choice])
    return common_pb2.ToolChoice(mode=common_pb2.ToolChoice.MODE_REQUIRED, name=choice)


def usage(recorded: common_pb2.Usage) -> Usage:
    """The SDK's usage of one model call, from what the host answered (and journaled)."""
    return Usage(
        requests=1,
        input_tokens=recorded.input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=recorded.cached_input_tokens, cache_write_tokens=0),
        output_tokens=recorded.output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=recorded.reasoning_tokens),
        total_tokens=recorded.input_tokens + recorded.output_tokens,
    )


class HostModel(Model):
    """An Agents SDK model served by the agentsessions host through ``sink``."""

    def __init__(self, sink: h.Sink, model: str = "") -> None:
        self._sink = sink
        self._model = model
        self._asked: set[str] = set()
        self._reported: set[str] = set()

    def host_tool(
        self, name: str, *, description: str = "", params_json_schema: dict[str, Any] | None = None
    ) -> FunctionTool:
        """A tool the host runs (one of the daemon's MCP tools, ``server__tool``), offered to the
        agent as a function tool: its TOOL_CALL is journaled before the host runs it and its
        result after, keyed by the execution and the model's call id, so a replay or a resume
        after a crash serves the recorded result and never runs it twice (the host's ledger)."""

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            call = common_pb2.ToolCall(
                id=context.tool_call_id,
                tool=name,
                args=h.struct(json.loads(arguments or "{}")),
                mediation=common_pb2.MEDIATION_CONTROLLER_MEDIATED,
                idempotency_key=f"{self._sink.execution_id}/{context.tool_call_id}",
            )
            result = await asyncio.to_thread(self._sink.tool_call, call)
            self._reported.add(context.tool_call_id)  # the host journaled its result
            return _tool_output_text(result) or result.error

        schema = params_json_schema if params_json_schema is not None else {"type": "object", "properties": {}}
        return FunctionTool(
            name=name, description=description, params_json_schema=schema, on_invoke_tool=invoke, strict_json_schema=False
        )

    def _report_tool_outputs(self, items: str | list[TResponseInputItem]) -> int:
        """Journals the outputs of tools the agent ran for calls this model asked for, once;
        returns how many it journaled."""
        if isinstance(items, str):
            return 0
        reported = 0
        for raw in items:
            item = _item(raw)
            call_id = item.get("call_id", "")
            if item.get("type") == "function_call_output" and call_id in self._asked and call_id not in self._reported:
                self._reported.add(call_id)
                text = _content_text(item.get("output"))
                self._sink.report(common_pb2.ToolResult(id=call_id, content=[_text_part(text)]))
                reported += 1
        return reported

    def settle(self, result: RunResultBase) -> None:
        """Journals what the run produced that no model call recorded: the outputs of tools no
        later call saw (a run that ends on a tool, ``tool_use_behavior="stop_on_first_tool"``),
        then the run's final output as OUTPUT, so the next turn's history is whole."""
        if self._report_tool_outputs(result.to_input_list()) and result.final_output is not None:
            final = result.final_output
            self._sink.output(final if isinstance(final, str) else json.dumps(final, default=str))

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        self._report_tool_outputs(input)
        definitions = [d for d in (_tool_definition(t) for t in tools) if d is not None]
        # Handoffs are offered as tools; the SDK follows the one the model calls.
        definitions += [_handoff_definition(handoff) for handoff in handoffs]
        params = settings_params(model_settings, output_schema)
        # The sink blocks on the host's answer; keep the agent's event loop free meanwhile.
        answer = await asyncio.to_thread(
            self._sink.complete,
            to_messages(system_instructions, input),
            model=self._model,
            params=params,
            tools=definitions,
            tool_choice=_tool_choice(model_settings.tool_choice),
        )
        completion = answer.message
        output: list[Any] = []
        text = message_text(completion)
        if text:
            output.append(_output_message(text))
        for part in completion.parts:
            if part.HasField("tool_call"):
                self._asked.add(part.tool_call.id)
                output.append(_function_call(part.tool_call))
        return ModelResponse(output=output, usage=usage(answer.usage), response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """``Runner.run_streamed``: the host answers a call whole, so the stream is one
        ``response.completed`` event carrying the completion and its usage."""
        answer = await self.get_response(
            system_instructions, input, model_settings, tools, output_schema, handoffs, tracing,
            previous_response_id=previous_response_id, conversation_id=conversation_id, prompt=prompt,
        )  # fmt: skip
        u = answer.usage
        response = Response.model_construct(
            id=FAKE_ID,
            created_at=0,
            model=self._model,
            object="response",
            output=answer.output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=False,
            usage=ResponseUsage(
                input_tokens=u.input_tokens,
                input_tokens_details=u.input_tokens_details,
                output_tokens=u.output_tokens,
                output_tokens_details=u.output_tokens_details,
                total_tokens=u.total_tokens,
            ),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


AgentBuilder = Callable[[HostModel], Agent[Any]]


class AgentsHarness:
    """Serves an Agents SDK agent as a harness. ``build`` makes the agent around the host
    model (once per execution); the input is the session's conversation rebuilt from the
    journal. ``hooks`` go to the run; ``streamed`` runs it with ``Runner.run_streamed``."""

    def __init__(
        self,
        id: str,
        build: AgentBuilder,
        *,
        version: str = "1",
        tools: Sequence[str] = (),
        max_turns: int = 10,
        hooks: RunHooks[Any] | None = None,
        streamed: bool = False,
    ) -> None:
        self._id = id
        self._hooks = hooks
        self._streamed = streamed
        self._build = build
        self._version = version
        self._tools = [
            harness_pb2.ToolSpec(name=name, mediation=common_pb2.MEDIATION_IN_HARNESS_REPORTED) for name in tools
        ]
        self._max_turns = max_turns
        # The SDK's tracing exports to OpenAI; a harness must not reach a provider by itself.
        set_tracing_disabled(True)

    def describe(self) -> harness_pb2.HarnessDescriptor:
        return h.descriptor(self._id, version=self._version, tools=self._tools)

    async def run(self, start: h.Start, sink: h.Sink) -> None:
        model = HostModel(sink, start.model)
        agent = self._build(model)
        # The run's model, for every agent it reaches (handoffs' too): never a provider directly.
        config = RunConfig(model=model, tracing_disabled=True)
        items = to_items(start.conversation())
        result: RunResultBase
        if self._streamed:
            streaming = Runner.run_streamed(agent, items, max_turns=self._max_turns, hooks=self._hooks, run_config=config)
            async for _ in streaming.stream_events():
                pass
            result = streaming
        else:
            result = await Runner.run(agent, items, max_turns=self._max_turns, hooks=self._hooks, run_config=config)
        model.settle(result)
