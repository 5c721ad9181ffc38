"""An OpenAI Agents SDK agent served as a harness, for the tests: its tool ``lookup`` can be
made to wait (env ``AGENT_GATE=FILE``: while FILE exists it writes FILE.started and waits) so a
test can kill the process in the middle of a turn."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from agents import Agent, function_tool

from agentsessions.adapters.openai_agents import AgentsHarness, HostModel
from agentsessions.harness import serve

GATE = Path(os.environ["AGENT_GATE"]) if os.environ.get("AGENT_GATE") else None


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    if GATE is not None and GATE.exists():
        GATE.with_suffix(".started").write_text("started")
        while GATE.exists():
            time.sleep(0.05)
    return f"value-of-{key}"


def build(model: HostModel) -> Agent[None]:
    return Agent(name="lookup", instructions="You look things up.", tools=[lookup], model=model)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    args = parser.parse_args()
    serve(AgentsHarness("agents-lookup", build, tools=["lookup"]), args.listen)


if __name__ == "__main__":
    main()
