"""A minimal language client over a server's standard input and output (JSON-RPC with
`Content-Length` headers): what the tests and bench/lsp.py drive `harnessc lsp` with, as an
editor does. Requests from the server (registrations, progress) are answered with null."""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

Message = dict[str, Any]


class ClientError(Exception):
    """The server answered with an error, went away, or did not answer in time."""


class StdioClient:
    def __init__(self, command: Sequence[str], cwd: str | None = None) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
        )
        self._ids = itertools.count(1)
        self._answers: dict[int, queue.Queue[Message]] = {}
        self._lock = threading.Lock()
        self.notifications: queue.Queue[Message] = queue.Queue()
        self.asked: queue.Queue[Message] = queue.Queue()
        """The requests the server sent (each answered with null)."""
        self.stderr: list[str] = []
        """What the server wrote to its standard error (its log), line by line."""
        self._threads = [
            threading.Thread(target=target, daemon=True) for target in (self._read, self._drain)
        ]
        for thread in self._threads:
            thread.start()

    # -- the wire ------------------------------------------------------------------------------

    def _send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        stdin: IO[bytes] | None = self.process.stdin
        if stdin is None:
            raise ClientError("the server's input is closed")
        with self._lock:
            stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            stdin.flush()

    def _drain(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for line in stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = None
            while True:
                line = stdout.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if length is None:
                continue
            message = json.loads(stdout.read(length))
            if "id" in message and "method" in message:
                self.asked.put(message)
                self._send({"id": message["id"], "result": None})
            elif "id" in message:
                self._answers.setdefault(message["id"], queue.Queue()).put(message)
            else:
                self.notifications.put(message)

    # -- requests and notifications ------------------------------------------------------------

    def request(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        number = next(self._ids)
        answer = self._answers.setdefault(number, queue.Queue())
        self._send({"id": number, "method": method, "params": params})
        try:
            message = answer.get(timeout=timeout)
        except queue.Empty:
            raise ClientError(f"no answer to {method} in {timeout} s") from None
        finally:
            self._answers.pop(number, None)
        if "error" in message:
            raise ClientError(f"{method}: {message['error']}")
        return message.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"method": method, "params": params})

    def wait_for(
        self, method: str, accept: Callable[[Any], bool] = lambda _: True, timeout: float = 60
    ) -> Any:
        """The params of the next notification `method` that `accept`s (others are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientError(f"no {method} in {timeout} s")
            try:
                message = self.notifications.get(timeout=left)
            except queue.Empty:
                continue
            if message.get("method") == method and accept(message.get("params")):
                return message.get("params")

    # -- the session ---------------------------------------------------------------------------

    def initialize(self, root_uri: str | None = None, capabilities: Any = None) -> Any:
        result = self.request(
            "initialize",
            {"processId": None, "rootUri": root_uri, "capabilities": capabilities or {}},
        )
        self.notify("initialized", {})
        return result

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "harness",
                    "version": version,
                    "text": text,
                }
            },
        )

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def diagnostics(self, uri: str, version: int | None = None, timeout: float = 60) -> list[Any]:
        """The next diagnostics published for `uri` (of `version`, when given)."""
        params = self.wait_for(
            "textDocument/publishDiagnostics",
            lambda p: p["uri"] == uri and (version is None or p.get("version") == version),
            timeout,
        )
        return list(params["diagnostics"])

    def close(self, timeout: float = 30) -> int:
        """shutdown, exit; the server's exit code."""
        try:
            self.request("shutdown", timeout=timeout)
            self.notify("exit")
        except (ClientError, OSError):
            self.process.kill()
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        for thread in self._threads:  # each ends at the end of its pipe
            thread.join(timeout)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code
