"""A language client for `harnessc lsp` over the server's standard input and output: pygls's
`LanguageClient` (lsprotocol's messages, typed both ways) on an event loop of its own thread,
behind a small synchronous face for the tests and bench/lsp.py. Requests and notifications take
and give plain JSON values, as an editor's wire does; pygls structures them with lsprotocol's
types on the way out and this client unstructures the answers. The server's own requests
(registrations, progress) are answered with null and kept in `asked`."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

Message = dict[str, Any]
T = TypeVar("T")

_NOTIFIED = (
    lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    lsp.WINDOW_LOG_MESSAGE,
    lsp.WINDOW_SHOW_MESSAGE,
    lsp.PROGRESS,
)
_ASKED = (
    lsp.CLIENT_REGISTER_CAPABILITY,
    lsp.CLIENT_UNREGISTER_CAPABILITY,
    lsp.WINDOW_WORK_DONE_PROGRESS_CREATE,
    lsp.WORKSPACE_CONFIGURATION,
    lsp.WORKSPACE_SEMANTIC_TOKENS_REFRESH,
    lsp.WORKSPACE_INLAY_HINT_REFRESH,
    lsp.WORKSPACE_DIAGNOSTIC_REFRESH,
)


class ClientError(Exception):
    """The server answered with an error, went away, or did not answer in time."""


class StdioClient:
    def __init__(self, command: Sequence[str], cwd: str | None = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = LanguageClient("harnessc-client", "1")
        self._converter = self._client.protocol._converter
        self.notifications: queue.Queue[Message] = queue.Queue()
        self.asked: queue.Queue[Message] = queue.Queue()
        """The requests the server sent (each answered with null)."""
        self.capabilities: dict[str, Any] = {}
        """What the server said it can do, in its answer to `initialize`."""
        self.stderr: list[str] = []
        """What the server wrote to its standard error (its log), line by line."""
        for method in _NOTIFIED:
            self._client.feature(method)(self._keeper(method, self.notifications))
        for method in _ASKED:
            self._client.feature(method)(self._keeper(method, self.asked))
        self._run(self._client.start_io(*command, cwd=cwd))
        process = self._client._server
        assert process is not None and process.stderr is not None
        self._process = process
        self._drained = asyncio.run_coroutine_threadsafe(self._drain(process.stderr), self._loop)

    def _keeper(self, method: str, into: queue.Queue[Message]) -> Callable[[Any], None]:
        def keep(params: Any) -> None:
            into.put({"method": method, "params": self._converter.unstructure(params)})

        return keep

    async def _drain(self, stderr: asyncio.StreamReader) -> None:
        async for line in stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def _run(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    def _typed(self, method: str, params: Any) -> Any:
        """`params` as lsprotocol's type for `method`, as pygls sends them."""
        types = lsp.METHOD_TO_TYPES.get(method)
        kind: Any = types[2] if types is not None else None
        if params is None or kind is None:
            return params
        return self._converter.structure(params, kind)

    # -- requests and notifications ------------------------------------------------------------

    def request(self, method: str, params: Any = None, timeout: float = 60) -> Any:
        typed = self._typed(method, params)

        async def ask() -> Any:
            return await self._client.protocol.send_request_async(method, typed)

        try:
            result = self._run(ask(), timeout)
        except TimeoutError:
            raise ClientError(f"no answer to {method} in {timeout} s") from None
        except Exception as error:  # an error answer, or the server went away
            raise ClientError(f"{method}: {error}") from error
        return self._converter.unstructure(result)

    def notify(self, method: str, params: Any = None) -> None:
        typed = self._typed(method, params)
        self._loop.call_soon_threadsafe(self._client.protocol.notify, method, typed)

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
        self.capabilities = result["capabilities"]
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
            self._process.kill()
        try:
            code = self._run(self._process.wait(), timeout)
        except TimeoutError:
            self._process.kill()
            code = self._run(self._process.wait(), timeout)
        try:
            self._drained.result(timeout)
            self._run(self._client.stop(), timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._loop.close()
        return code
