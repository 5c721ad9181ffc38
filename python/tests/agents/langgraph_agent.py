"""A LangGraph ReAct agent served as a harness, for the tests: its tool ``lookup`` can be made
to wait (env ``AGENT_GATE=FILE``: while FILE exists it writes FILE.started and waits) so a test can
kill the process in the middle of a turn."""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from agentsessions.adapters.langchain import HostChatModel, LangGraphHarness
from agentsessions.harness import serve

GATE = Path(os.environ["AGENT_GATE"]) if os.environ.get("AGENT_GATE") else None
# create_react_agent moved to the langchain package; langgraph keeps it until 2.0.
warnings.filterwarnings("ignore", message="create_react_agent has been moved")


@tool
def lookup(key: str) -> str:
    """Looks a key up."""
    if GATE is not None and GATE.exists():
        GATE.with_suffix(".started").write_text("started")
        while GATE.exists():
            time.sleep(0.05)
    return f"value-of-{key}"


def build(model: HostChatModel):  # type: ignore[no-untyped-def]
    return create_react_agent(model, [lookup], prompt="You look things up.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True)
    args = parser.parse_args()
    serve(LangGraphHarness("langgraph-lookup", build, tools=["lookup"]), args.listen)


if __name__ == "__main__":
    main()
