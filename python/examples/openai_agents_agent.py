"""An OpenAI Agents SDK agent with one function tool, served as an agentsessions harness.

The agent's model is the host's (``HostModel``): no OpenAI key in the harness, every call
journaled and replayable. Try it with the offline directive model:

    python examples/openai_agents_agent.py --listen 127.0.0.1:7072 &
    agentsessionsd --addr 127.0.0.1:7070 --model directive --model-provider directive \
        --harness weather=127.0.0.1:7072 &
    agentctl --server 127.0.0.1:7070 exec --harness weather '/tool get_weather {"city": "Oslo"}'
"""

from __future__ import annotations

import argparse

from agents import Agent, function_tool

from agentsessions.adapters.openai_agents import AgentsHarness, HostModel
from agentsessions.harness import serve

FORECASTS = {"paris": "sunny, 21C", "oslo": "snow, -3C"}


@function_tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return FORECASTS.get(city.lower(), "unknown")


def build(model: HostModel) -> Agent[None]:
    return Agent(name="weather", instructions="You answer weather questions.", tools=[get_weather], model=model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:7072", help="host:port or unix:/path")
    args = parser.parse_args()
    serve(AgentsHarness("agents-weather", build, tools=["get_weather"]), args.listen)


if __name__ == "__main__":
    main()
