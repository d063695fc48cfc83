"""The data the compiler and the runtime share: the IR, and the meaning written once over it.

This is the only part of the runtime the compiler's core imports (pyproject.toml's import
contracts). `harnessc.runtime.model` names the IR (model/ir.py), as it did when the IR was one
module; beside it:

- ir: the typed model of a checked spec (frozen pydantic classes)
- semantics: the condition operators and selectors, written once (values, patterns, paths)
- canonical: canonical JSON (RFC 8785) and the input hash of an exact invocation
- session_terms: the session terms of a condition and a history term's identity
- exposure: each tool's document for ranking, and the data an exposure returns
"""

from . import ir
from .ir import *  # noqa: F403  (the IR's own __all__ is the one list)

__all__ = ir.__all__
