"""The build's inputs: the package's name (H501), the build root, the tool embeddings."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import keyword
import os
import pathlib
import sys
from typing import TYPE_CHECKING

import numpy as np
from harnessc.dsl import syntax as s
from harnessc.dsl.diagnostics import Diagnostic
from harnessc.dsl.source import Span
from harnessc.runtime.model import PUBLIC_KINDS, Spec

from ..resolve import Resolution

if TYPE_CHECKING:
    from ..embed import Progress

RESERVED_PACKAGE_NAMES = frozenset({"tests", "harnessc"})
"""`tests` is the name of the generated test suite's folder (inside the package), and a
package of that name would shadow a project's own tests; `harnessc` would shadow the runtime
the package imports."""

__all__ = [
    "RESERVED_PACKAGE_NAMES",
    "build_root",
    "check_package_name",
    "check_package_name_of",
    "relative_to_root",
    "shadowed_module",
    "tool_embeddings",
]


def check_package_name(
    spec: Spec, header_span: Span | None, path: str | None = None, out: pathlib.Path | None = None
) -> list[Diagnostic]:
    """H501 when the spec's name cannot be the generated package's name, H502 when the package
    would shadow a module of the standard library or an installed one (`header_span`: the
    header's name; None when the spec has no header and is named after its file `path`; `out`:
    the build's output folder, whose own earlier build of the package shadows nothing)."""
    name = spec.name
    code, problem = "H501", None
    if not name.isidentifier() or not name.isascii():
        problem = "is not a Python identifier"
    elif keyword.iskeyword(name):
        problem = "is a Python keyword"
    elif name in RESERVED_PACKAGE_NAMES:
        problem = "is reserved"
    else:
        code, problem = "H502", shadowed_module(name, out)
    if problem is None:
        return []
    result = (
        "which the generated package would shadow"
        if code == "H502"
        else "so it cannot name the generated package"
    )
    if header_span is None:
        return [
            Diagnostic.make(
                code,
                f"the spec's name `{name}` (its file name) {problem}, {result}",
                None,
                path=path,
                help="add a header `harness NAME { }` whose NAME is a plain lowercase word",
            )
        ]
    return [
        Diagnostic.make(
            code,
            f"the harness name `{name}` {problem}, {result}",
            header_span,
            "the generated package is named after this",
            help=f"rename the harness, for example `{name}_agent`"
            if code == "H502"
            else "rename the harness to a plain word such as `remediation` or `my_agent`",
        )
    ]


def shadowed_module(name: str, out: pathlib.Path | None = None) -> str | None:
    """What a top-level package `name` would hide from `import`: a standard-library module, or a
    module an installed distribution provides (not the package an earlier build wrote to `out`,
    when the project that holds it is installed); None when it hides nothing."""
    if name in sys.stdlib_module_names:
        return "is a module of Python's standard library"
    distributions = importlib.metadata.packages_distributions().get(name)
    if not distributions:
        return None
    found = importlib.util.find_spec(name)
    origin = found.origin if found is not None else None
    if out is not None and origin is not None:
        own = (out / name).resolve()
        if pathlib.Path(origin).resolve().is_relative_to(own):
            return None
    return f"is a module installed by `{sorted(distributions)[0]}`"


def build_root(spec: str | os.PathLike[str]) -> pathlib.Path:
    """The folder generated files name the spec relative to: the nearest folder at or above
    the spec holding a `pyproject.toml` (the project), else the spec's own folder."""
    from ..config import find_pyproject

    found = find_pyproject(pathlib.Path(spec))
    return found.parent if found is not None else pathlib.Path(spec).resolve().parent


def relative_to_root(path: str | os.PathLike[str], root: pathlib.Path) -> str:
    """`path` relative to the build root, in POSIX form: never absolute, never the cwd's."""
    try:
        rel = os.path.relpath(pathlib.Path(path).resolve(), root)
    except ValueError:  # another drive: only the file name is stable
        rel = pathlib.Path(path).name
    return pathlib.PurePath(rel).as_posix()


def check_package_name_of(
    spec: Spec, resolution: Resolution, out: pathlib.Path | None = None
) -> list[Diagnostic]:
    """`check_package_name` for a resolved build: the diagnostic points at the root's header."""
    roots = [m for m in resolution.modules if m.is_root]
    header = next(
        (i for m in roots for i in m.syntax.items if isinstance(i, s.Header)),
        None,
    )
    path = roots[0].name if roots else None
    span = header.name.span if header is not None else None
    return check_package_name(spec, span, path, out)


def tool_embeddings(
    spec: Spec, progress: Progress | None = None
) -> tuple[np.ndarray, list[str]] | None:
    """The build-time embeddings of every tool the exposure index holds, or None without the
    embed extra (the package then ranks lexically). `progress` hears how far embedding is."""
    from ..embed import build_tool_embeddings

    tools = [spec.tools[t] for t in sorted(spec.tools)]
    indexed = [t for t in tools if t.kind in PUBLIC_KINDS | {"private"}]
    found = build_tool_embeddings(indexed, progress=progress)
    return None if found.matrix is None else (found.matrix, list(found.ids))
