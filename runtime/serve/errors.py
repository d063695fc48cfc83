"""The errors of `harnessc serve`: a stable code, its HTTP status and a sentence, as JSON
(`ErrorOut`); never a traceback."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

_STATUS = {
    "unknown-session": 404,
    "unknown-agent": 404,
    "unknown-tool": 404,
    "unknown-call": 404,
    "unknown-request": 404,
    "unknown-action": 404,
    "session-exists": 409,
    "not-pending": 409,
    "expired": 409,
    "already-finished": 409,
    "not-waiting": 409,
    "running": 409,
    "grant-spent": 409,
    "not-an-approver": 403,
    "self-approval": 403,
    "forbidden": 403,
    "actor-override": 403,
    "not-your-session": 403,
    "agent-not-allowed": 403,
    "unauthenticated": 401,
    "body-too-large": 413,
    "unsupported-media-type": 415,
    "not-found": 404,
    "method-not-allowed": 405,
    "archived": 410,  # a session a compaction archived (`harnessc log compact`)
    "not-an-ask": 409,
    "internal": 500,
}


class ServeError(Exception):
    """A request refused: `code` (stable, `_STATUS` gives its HTTP status) and a sentence."""

    def __init__(self, code: str, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.errors = errors or []


def error_response(code: str, message: str, errors: list[dict[str, Any]] | None = None) -> Response:
    status = _STATUS.get(code, 400)
    body = {"error": code, "message": message, "errors": errors or []}
    headers = {"www-authenticate": 'Bearer realm="harnessc"'} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)
