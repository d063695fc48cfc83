"""OpenTelemetry spans for the path of a call (the `otel` extra): off until `enable()`.

    from harnessc.runtime.integrations import telemetry
    telemetry.enable()                       # the global tracer provider, or:
    telemetry.enable(tracer_provider=provider)
    telemetry.disable()

Once enabled, every `expose`, `normalize`, `decide`, `invoke` / `ainvoke` and workflow step is a
span, and an answered approval request is a span from the moment it was asked to the answer
(runtime/session/spans.py writes them, and says what their attributes hold and never hold).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..session import spans

__all__ = ["disable", "enable", "enabled", "tracer"]

_NAME = "harnessc"

if TYPE_CHECKING:
    tracer: Any  # the tracer spans go to, or None (off): read through `__getattr__` below


def enable(tracer_provider: Any = None) -> None:
    """Send spans to `tracer_provider` (an `opentelemetry.sdk.trace.TracerProvider`), or to
    the global provider when None. Needs the `otel` extra."""
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - the extra is installed in CI
        raise RuntimeError(
            "telemetry needs the `otel` extra: pip install 'harnessc[otel]'"
        ) from exc
    from harnessc import __version__

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    spans.tracer = provider.get_tracer(_NAME, __version__)


def disable() -> None:
    """Stop making spans."""
    spans.tracer = None


def enabled() -> bool:
    return spans.tracer is not None


def __getattr__(name: str) -> Any:
    if name == "tracer":  # the tracer spans go to, or None: kept by the session's spans
        return spans.tracer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
