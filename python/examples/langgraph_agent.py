"""A LangGraph ReAct agent with one tool, served as an agentsessions harness.

Every model call goes through the host (journaled, replayable with no provider call), so the
agent needs no model key. Try it with the offline directive model:

    python examples/langgraph_agent.py --listen 127.0.0.1:7071 &
    agentsessionsd --addr 127.0.0.1:7070 --model directive --model-provider directive \
        --harness weather=127.0.0.1:7071 &
    agentctl --server 127.0.0.1:7070 exec --harness weather '/tool get_weather {"city": "Paris"}'
"""

from __future__ import annotations

import argparse
import warnings

from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from agentsessions.adapters.langchain import HostChatModel, LangGraphHarness
from agentsessions.harness import serve

# create_react_agent moved to the langchain package; langgraph keeps it until 2.0.
warnings.filterwarnings("ignore", message="create_react_agent has been moved")

FORECASTS = {"paris": "sunny, 21C", "oslo": "snow, -3C"}


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    # A pure function of its arguments: in-harness tools run again on replay.
    return FORECASTS.get(city.lower(), "unknown")


def build(model: HostChatModel):  # type: ignore[no-untyped-def]
    return create_react_agent(model, [get_weather], prompt="You answer weather questions.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:7071", help="host:port or unix:/path")
    args = parser.parse_args()
    serve(LangGraphHarness("langgraph-weather", build, tools=["get_weather"]), args.listen)


if __name__ == "__main__":
    main()
