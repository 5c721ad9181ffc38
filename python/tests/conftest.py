"""Fixtures: the real ``agentsessionsd`` started on 127.0.0.1 with an ephemeral port, Python
harness processes, and a counting OpenAI-wire model stub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO = PYTHON_DIR.parent
STUB_KEY_VARIABLE = "AGENTSESSIONS_PY_STUB_KEY"


def bin_dir() -> Path:
    """Where the cargo-built binaries are (``AGENTSESSIONS_BIN_DIR``, else target/debug)."""
    configured = os.environ.get("AGENTSESSIONS_BIN_DIR")
    path = Path(configured) if configured else REPO / "target" / "debug"
    if not (path / "agentsessionsd").exists():
        pytest.fail(f"no agentsessionsd in {path}: run `cargo build -p agentsessions-cli` first")
    return path


class Daemon:
    """A running ``agentsessionsd``; killed at teardown."""

    def __init__(self, args: list[str], cwd: Path, with_registry: bool, env: dict[str, str]) -> None:
        command = [str(bin_dir() / "agentsessionsd"), "--addr", "127.0.0.1:0", *args]
        if with_registry:
            command += ["--registry-addr", "127.0.0.1:0"]
        environment = {k: v for k, v in os.environ.items() if k not in ("MODEL_API_KEY", "OPENAI_API_KEY")}
        environment.update(env)
        self.log = cwd / f"agentsessionsd-{os.getpid()}-{id(self)}.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command, cwd=cwd, stdout=subprocess.PIPE, stderr=log, text=True, env=environment
            )
        assert self.process.stdout is not None
        self.addr = self._line("agentsessionsd listening on ")
        self.registry = self._line("agentsessionsd registry on ") if with_registry else ""

    def _line(self, prefix: str) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith(prefix):
            self.stop()
            said = self.log.read_text()[-2000:]
            raise AssertionError(f"agentsessionsd said {line!r}, expected {prefix!r}: {said}")
        return line[len(prefix) :]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Starts daemons in the test's temp dir with extra flags; all are killed at teardown."""
    started: list[Daemon] = []

    def start(*args: str, registry: bool = False, env: dict[str, str] | None = None) -> Daemon:
        journal = tmp_path / f"journal-{len(started)}.db"
        daemon = Daemon(["--journal", str(journal), *args], tmp_path, registry, env or {})
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


OFFLINE_TOOLS = ["--model", "directive", "--model-provider", "directive"]


@pytest.fixture
def daemon(start_daemon: Callable[..., Daemon]) -> Daemon:
    """A daemon with the offline echo model."""
    return start_daemon()


class HarnessProcess:
    """A Python harness served by a separate process (so a test can kill it mid-turn)."""

    def __init__(self, script: Path, address: str, env: dict[str, str]) -> None:
        environment = dict(os.environ)
        environment.update(env)
        environment["PYTHONPATH"] = str(PYTHON_DIR)
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--listen", address],
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        prefix = "harness listening on "
        if not line.startswith(prefix):
            self.kill()
            raise AssertionError(f"harness said {line!r}")
        self.address = line[len(prefix) :]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def start_harness() -> Iterator[Callable[..., HarnessProcess]]:
    """Starts harness scripts as processes; all are killed at teardown."""
    started: list[HarnessProcess] = []

    def start(script: Path, address: str = "127.0.0.1:0", env: dict[str, str] | None = None) -> HarnessProcess:
        harness = HarnessProcess(script, address, env or {})
        started.append(harness)
        return harness

    yield start
    for harness in started:
        harness.kill()


class StubModel:
    """An OpenAI chat-completions endpoint that counts its calls. A request whose last message
    is a tool result is answered in text quoting it; ``/tool NAME {json}`` asks for a tool
    call; anything else is echoed."""

    def __init__(self) -> None:
        self.calls = 0
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                with stub.lock:
                    stub.calls += 1
                    stub.requests.append(request)
                invalid = stub.invalid_history(request.get("messages", []))
                if invalid:
                    # As OpenAI answers it: 400, the request never reaches a model.
                    body = json.dumps({"error": {"message": invalid, "type": "invalid_request_error"}}).encode()
                    self.send_response(400)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                whole = stub.answer(request)
                if request.get("stream"):
                    body = stub.as_stream(whole).encode()
                    kind = "text/event-stream"
                else:
                    body = json.dumps(whole).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def invalid_history(messages: list[dict[str, Any]]) -> str:
        """Why OpenAI would refuse ``messages`` (every assistant tool call must be answered by a
        tool message before the next other message), or ''."""
        waiting: set[str] = set()
        for message in messages:
            if message.get("role") == "tool":
                waiting.discard(message.get("tool_call_id", ""))
                continue
            if waiting:
                return f"tool calls {sorted(waiting)} have no tool message"
            waiting = {call["id"] for call in message.get("tool_calls") or []}
        return ""

    @staticmethod
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages", [])
        last = messages[-1] if messages else {}
        usage = {"prompt_tokens": 5, "completion_tokens": 3}
        structured = request.get("response_format", {}).get("type") == "json_schema"
        if last.get("role") == "tool":
            content = last.get("content")
            said = content if isinstance(content, str) else json.dumps(content)
            said = f"the tool said: {said}"
            if structured:
                said = json.dumps({"answer": said})  # a structured answer when a schema is asked for
            message: dict[str, Any] = {"role": "assistant", "content": said}
            return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        if text.startswith("/tool "):
            name, _, arguments = text[len("/tool ") :].partition(" ")
            call = {
                "id": f"call_{len(messages)}",
                "type": "function",
                "function": {"name": name, "arguments": arguments or "{}"},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}], "usage": usage}
        said = f"stub:{text}"
        if structured:
            said = json.dumps({"answer": said})
        message = {"role": "assistant", "content": said}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}

    @staticmethod
    def as_stream(whole: dict[str, Any]) -> str:
        """``whole`` as a chat-completions event stream: one chunk, then the usage."""
        choice = whole["choices"][0]
        message = choice["message"]
        delta: dict[str, Any] = {"role": "assistant"}
        if isinstance(message.get("content"), str):
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]}
        usage = {"choices": [], "usage": whole["usage"]}
        return f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n"

    def model_flags(self) -> list[str]:
        return [
            "--model", "stub-model",
            "--model-provider", "openai",
            "--model-base-url", self.base_url,
            "--model-api-key-env", STUB_KEY_VARIABLE,
        ]  # fmt: skip

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    model = StubModel()
    yield model
    model.stop()
