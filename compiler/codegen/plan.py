"""The build plan: every decision of `harnessc build` made in Python, as typed values.

`plan_build(spec, …)` returns the files of the generated package, each a template name with a
typed context (or verbatim bytes). Templates only loop and branch over what the plan hands
them; every name, order and escape is fixed in Python:

- spec text reaches generated Python only through `repr()` (literals) or `py_comment` (one
  comment line, non-printable characters escaped), and Markdown only through `md_text`,
  `md_code` and `mermaid_label` (escape.py);
- the package's policies are `model.json`, which the runtime compiles when it loads it: the
  code it compiles is shown in the docs (docs.py, from `Decider.source`), never emitted;
- everything that comes from a dict or a set is sorted; rules and steps keep their text order,
  which is their meaning.

The package's name and the build's inputs come from inputs.py, the review docs from docs.py,
the generated tests' cases from the cases package.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from harnessc.runtime.model import PUBLIC_KINDS, ModelSeal, Spec
from harnessc.runtime.model.exposure import EMBEDDING_IDS_FILE, EMBEDDINGS_FILE, tool_docs

from ..analysis.policy import PolicyAnalysis
from ..suppress import Suppression
from .cases import plan_cases

# ---------------------------------------------------------------------------------------------
# The plan's types
from .docs import doc_pages
from .escape import generated_header, py_comment, py_literal

__all__ = [
    "TEST_MODULES",
    "BuildPlan",
    "GeneratedFile",
    "InitContext",
    "TestsContext",
    "plan_build",
]


@dataclass(frozen=True)
class GeneratedFile:
    """One output file: `path` relative to the output folder (POSIX), rendered from `template`
    with `context`, or written as `data` when there is no template."""

    path: str
    template: str | None = None
    context: Any = None
    data: bytes | None = None


@dataclass(frozen=True)
class BuildPlan:
    package: str
    """The package's name: the `harness` header's name."""
    spec_path: str
    """The root spec, relative to the build root."""
    header: str
    files: tuple[GeneratedFile, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InitContext:
    header: str
    spec_name: str
    """repr() of the spec's name."""
    title: str
    """A comment-safe line naming the harness."""
    policy_version: str
    model_sha256: str
    """repr() of the SHA-256 of model.json's bytes (`ModelSeal`)."""
    ir_fingerprint: str
    """repr() of the IR's fingerprint (`ir_fingerprint`)."""
    has_embeddings: bool


@dataclass(frozen=True)
class TestsContext:
    """A module of the generated test suite: its code is the template's; only the header
    comes from the spec (every case is data in `cases.json`)."""

    __test__ = False  # not a pytest class
    header: str


TEST_MODULES = (
    ("__init__.py", "tests_init.py.j2"),
    ("runner.py", "tests_runner.py.j2"),
    ("test_policies.py", "tests_policies.py.j2"),
    ("test_schemas.py", "tests_schemas.py.j2"),
    ("test_surfaces.py", "tests_surfaces.py.j2"),
    ("test_workflows.py", "tests_workflows.py.j2"),
)
"""The generated test suite, in `OUT/<package>/tests/`, with its data in `cases.json`."""


# ---------------------------------------------------------------------------------------------
# The whole plan


def _tool_docs_json(spec: Spec, header: str) -> bytes:
    tools = [spec.tools[t] for t in sorted(spec.tools)]
    indexed = [t for t in tools if t.kind in PUBLIC_KINDS | {"private"}]
    rows = [asdict(d) for d in tool_docs(indexed)]
    text = json.dumps(
        {"generated": header, "tools": rows}, sort_keys=True, indent=1, ensure_ascii=False
    )
    return (text + "\n").encode("utf-8")


def _npy_bytes(matrix: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(matrix, dtype=np.float32), allow_pickle=False)
    return buffer.getvalue()


def _cases_json(
    spec: Spec, header: str, analysis: PolicyAnalysis | None, available: PolicyAnalysis | None
) -> bytes:
    """The generated suite's cases, the header first (so a rebuild knows the file as its own)."""
    findings = analysis.findings if analysis is not None else ()
    body = json.dumps(
        plan_cases(spec, analysis, findings, available),
        sort_keys=True,
        indent=1,
        ensure_ascii=False,
    )
    generated = json.dumps(header, ensure_ascii=False)
    return ("{\n " + f'"generated": {generated},\n' + body[2:] + "\n").encode("utf-8")


def plan_build(
    spec: Spec,
    spec_path: str,
    suppressions: Sequence[Suppression] = (),
    embeddings: tuple[np.ndarray, Sequence[str]] | None = None,
    notes: Sequence[str] = (),
    analysis: PolicyAnalysis | None = None,
    available: PolicyAnalysis | None = None,
) -> BuildPlan:
    """The files of the package for `spec` (already checked): `spec_path` is the root spec
    relative to the build root, `embeddings` the build-time tool embeddings if any, `analysis`
    the policy analysis whose witnesses the generated tests check, `available` the same over
    calls to available tools (`analyse_availability`; None when no tool has availability
    conditions). Both are the pipeline's: nothing here runs an analysis."""
    header = generated_header(spec_path)
    package = spec.name
    base = f"{package}/"
    model = (spec.to_json() + "\n").encode("utf-8")
    seal = ModelSeal.of(model, spec.content_hash())
    files = [
        GeneratedFile(
            base + "__init__.py",
            "init.py.j2",
            InitContext(
                header=header,
                spec_name=py_literal(spec.name),
                title=py_comment(
                    f"harness {spec.name}" + (f" {spec.version}" if spec.version else "")
                ),
                policy_version=py_literal(seal.policy_version),
                model_sha256=py_literal(seal.sha256),
                ir_fingerprint=py_literal(seal.ir),
                has_embeddings=embeddings is not None,
            ),
        ),
        GeneratedFile(base + "model.json", data=model),
        GeneratedFile(base + "tool_docs.json", data=_tool_docs_json(spec, header)),
    ]
    if embeddings is not None:
        matrix, ids = embeddings
        files.append(GeneratedFile(base + EMBEDDINGS_FILE, data=_npy_bytes(matrix)))
        ids_text = json.dumps(list(ids), indent=0, ensure_ascii=False) + "\n"
        files.append(GeneratedFile(base + EMBEDDING_IDS_FILE, data=ids_text.encode("utf-8")))
    docs = base + "docs/"
    pages = doc_pages(spec, header, package, suppressions, embeddings is not None)
    for name in sorted(pages):
        files.append(GeneratedFile(docs + name, "doc.md.j2", pages[name]))
    tests = base + "tests/"
    for name, template in TEST_MODULES:
        files.append(GeneratedFile(tests + name, template, TestsContext(header)))
    files.append(
        GeneratedFile(tests + "cases.json", data=_cases_json(spec, header, analysis, available))
    )
    return BuildPlan(
        package=package,
        spec_path=spec_path,
        header=header,
        files=tuple(sorted(files, key=lambda f: f.path)),
        notes=tuple(notes),
    )
