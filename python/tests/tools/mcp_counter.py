"""A stdio MCP server for the tests with one side-effecting tool: ``bump`` appends its key to the
file named by ``COUNTER_FILE``, so a test counts how often the tool really ran."""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("counter")


@server.tool()
def bump(key: str) -> str:
    """Counts one call for ``key``."""
    with Path(os.environ["COUNTER_FILE"]).open("a") as counter:
        counter.write(f"{key}\n")
    return f"bumped {key}"


if __name__ == "__main__":
    server.run()
