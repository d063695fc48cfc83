"""A stdio MCP server, raw JSON-RPC, that misbehaves as its first argument says: what an SDK
server would not let a test do.

- `rpc_error`: answers a call with JSON-RPC error -32000 (JSON-RPC's first "server error",
  the code the SDK also gives a closed connection), and keeps answering pings.
- `dup_tools`: lists the tool `t` twice, with two schemas.
- `bad_listing`: every listing is invalid (a tool without its input schema).
- `bad_after_change` / `hang_after_change`: a call announces `tools/list_changed`; the next
  listing is then invalid / never answered.
- `freeze_call`: a call freezes the server (it reads nothing more, ignores end of input).
- `nan_text`: a call answers with the text `{"v": NaN}`.
- `nan_reply`: a call's answer holds NaN in its structured content (not JSON: no parser reads it).
- `list_reply`: a call's answer is a list, not a result object.
- `wrong_id`: a call is answered under another request's id.
- `garbage_reply`: a call is answered with a line that is not JSON at all.
- anything else: a well-behaved server of one tool `t` that echoes its arguments.
"""

import json
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
changed = False


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict, result: object) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def tools(request: dict) -> None:
    if changed and MODE == "hang_after_change":
        return
    if MODE == "bad_listing" or (changed and MODE == "bad_after_change"):
        answer(request, {"tools": [{"name": "t"}]})  # no inputSchema: not a listing
        return
    t = {"name": "t", "description": "echo", "inputSchema": SCHEMA}
    listed = [t, {"name": "t", "inputSchema": {"type": "object"}}] if MODE == "dup_tools" else [t]
    answer(request, {"tools": listed})


def call(request: dict) -> None:
    global changed
    if MODE == "rpc_error":
        error = {"code": -32000, "message": "the backend failed"}
        send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        return
    if MODE == "freeze_call":
        time.sleep(3600)
    if MODE in ("bad_after_change", "hang_after_change"):
        changed = True
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    if MODE == "nan_reply":
        content = '[{"type": "text", "text": "x"}], "structuredContent": {"v": NaN}'
        sys.stdout.write(
            f'{{"jsonrpc": "2.0", "id": {json.dumps(request["id"])}, '
            f'"result": {{"content": {content}}}}}\n'
        )
        sys.stdout.flush()
        return
    if MODE == "list_reply":
        answer(request, [1, 2])
        return
    if MODE == "wrong_id":
        send({"jsonrpc": "2.0", "id": 987654, "result": {"content": []}})
        return
    if MODE == "garbage_reply":
        sys.stdout.write("this is not JSON\n")
        sys.stdout.flush()
        return
    text = '{"v": NaN}' if MODE == "nan_text" else json.dumps(request["params"]["arguments"])
    answer(request, {"content": [{"type": "text", "text": text}]})


for line in sys.stdin:
    message = json.loads(line)
    method = message.get("method")
    if method == "initialize":
        info = {"name": "misbehaving", "version": "1"}
        capabilities = {"tools": {"listChanged": True}}
        answer(
            message,
            {"protocolVersion": "2025-06-18", "capabilities": capabilities, "serverInfo": info},
        )
    elif method == "tools/list":
        tools(message)
    elif method == "tools/call":
        call(message)
    elif method == "ping":
        answer(message, {})
    elif "id" in message and method is not None:
        send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "no such method"},
            }
        )
