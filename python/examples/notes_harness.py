"""A plain Python harness: rebuilds the conversation from the journal, asks the host's model
once, and records a line of its own.

    python examples/notes_harness.py --listen 127.0.0.1:7073 &
    agentsessionsd --addr 127.0.0.1:7070 --model directive --model-provider directive \
        --harness notes=127.0.0.1:7073 &
    agentctl --server 127.0.0.1:7070 exec --harness notes 'remember the milk'
"""

from __future__ import annotations

import argparse

from agentsessions import harness, text_message


class Notes:
    def describe(self) -> harness.HarnessDescriptor:
        return harness.descriptor("notes", version="1")

    def run(self, start: harness.Start, sink: harness.Sink) -> None:
        system = text_message("You keep short notes.", role="system")
        sink.model([system, *start.conversation()])  # recorded as the turn's OUTPUT
        notes = sum(1 for m in start.conversation() if m.role == "user")
        sink.output(f"{notes} note(s) so far")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="127.0.0.1:7073")
    harness.serve(Notes(), parser.parse_args().listen)
