"""Operation counts for scaling tests: how many function calls (Python and builtin) some work
makes. Unlike its time, the count does not depend on the machine or its load, so a test can
compare two sizes exactly: linear work makes about ten times the calls for ten times the input,
quadratic work a hundred times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def count_calls(work: Callable[[], T], of: Callable[..., object] | None = None) -> tuple[T, int]:
    """Run `work` and return its value with the number of calls made while it ran (`of`: only
    the calls of that Python function)."""
    calls = 0
    code = getattr(of, "__code__", None)
    if of is not None and code is None:
        raise TypeError("`of` counts the calls of a Python function")

    def profile(frame, event, arg) -> None:
        nonlocal calls
        if code is not None:
            calls += event == "call" and frame.f_code is code
        elif event in ("call", "c_call"):
            calls += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        value = work()
    finally:
        sys.setprofile(previous)
    return value, calls
