/** The agents the adapter tests serve: an OpenAI Agents JS agent and a LangGraph.js ReAct
 * graph, each with a harness-local tool `lookup` and the host's `counter__count`. */
import { Agent, tool } from "@openai/agents";
import { tool as lcTool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { createReactAgent, ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { AgentsHarness, hostTool as agentsHostTool } from "../../src/adapters/openai-agents.js";
import { LangGraphHarness, hostTool as graphHostTool, type MessagesGraph } from "../../src/adapters/langgraph.js";

/** The host's counting tool (mcp-fixture-server's `count`, served as `counter`). */
export const COUNT = { name: "counter__count", description: "Counts its calls", schema: { type: "object", properties: { hold_ms: { type: "number" } } } };

/** Calls of `lookup`, by key: a harness-local tool runs again on replay. */
export const lookups: string[] = [];

export function openAiAgentsHarness(options: { stopOnTool?: boolean; stream?: boolean } = {}): AgentsHarness {
  const lookup = tool({
    name: "lookup",
    description: "Looks a key up.",
    parameters: z.object({ key: z.string() }),
    execute: ({ key }) => {
      lookups.push(key);
      return `value-of-${key}`;
    },
  });
  const count = agentsHostTool({ name: COUNT.name, description: COUNT.description, parameters: COUNT.schema });
  return new AgentsHarness(
    "agents-lookup",
    (model) =>
      new Agent({
        name: "lookup",
        instructions: "You look things up.",
        tools: [lookup, count],
        model,
        ...(options.stopOnTool === true ? { toolUseBehavior: "stop_on_first_tool" as const } : {}),
      }),
    { tools: ["lookup"], hostTools: [COUNT.name], stream: options.stream ?? false },
  );
}

export function langGraphHarness(): LangGraphHarness {
  const lookup = lcTool(
    ({ key }: { key: string }) => {
      lookups.push(key);
      return `value-of-${key}`;
    },
    { name: "lookup", description: "Looks a key up.", schema: z.object({ key: z.string() }) },
  );
  const count = graphHostTool({ name: COUNT.name, description: COUNT.description, schema: COUNT.schema });
  return new LangGraphHarness(
    "langgraph-lookup",
    (model) => createReactAgent({ llm: model, tools: [lookup, count], prompt: "You look things up." }) as unknown as MessagesGraph,
    { tools: ["lookup"], hostTools: [COUNT.name] },
  );
}

/** A graph that ends on its tool node: model → lookup → end, no model call after the tool. */
export function langGraphStopHarness(): LangGraphHarness {
  const lookup = lcTool(({ key }: { key: string }) => `value-of-${key}`, { name: "lookup", description: "Looks a key up.", schema: z.object({ key: z.string() }) });
  return new LangGraphHarness(
    "langgraph-stop",
    (model) => {
      const bound = model.bindTools([lookup]);
      return new StateGraph(MessagesAnnotation)
        .addNode("model", async (state) => ({ messages: [await bound.invoke(state.messages)] }))
        .addNode("tools", new ToolNode([lookup]))
        .addEdge(START, "model")
        .addEdge("model", "tools")
        .addEdge("tools", END)
        .compile() as unknown as MessagesGraph;
    },
    { tools: ["lookup"] },
  );
}
