"""The data of exposure (runtime/exposure/ranker.py ranks): each tool's document, the files of
their embeddings, and what an exposure returns — the ranked candidates, the cuts, and the trace of
how they were ranked, which a session logs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, overload

import numpy as np

from .ir import Tool

# the files of a generated package that hold its tools' embeddings, written by the build and read
# by the ranker
EMBEDDINGS_FILE = "tool_embeddings.npy"
EMBEDDING_IDS_FILE = "tool_embedding_ids.json"


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """One row of the index: a tool, or one operation of a tool (`row` is `id#operation`).

    `arg_text` holds argument descriptions where the source has them (MCP or imported schemas).
    """

    id: str
    row: str
    summary: str = ""
    wire_name: str = ""
    """The name a model calls the tool by, when it is not the id (matched verbatim in requests)."""
    use_when: str = ""
    not_for: str = ""
    args: tuple[str, ...] = ()
    arg_text: str = ""
    operations: str = ""
    packs: tuple[str, ...] = ()

    def fields(self) -> dict[str, str]:
        """The BM25 fields (weights in `lexical.FIELD_WEIGHTS`)."""
        return {
            "id": self.row.replace("#", " "),
            "summary": self.summary,
            "use_when": self.use_when,
            "not_for": self.not_for,
            "args": " ".join(self.args),
            "arg_text": self.arg_text,
            "operations": self.operations,
            "packs": " ".join(self.packs),
        }

    def embedding_text(self) -> str:
        """The text embedded at build time: name, summary, when to use it, its arguments.

        `not_for` is left out on purpose: a sentence embedding does not model negation, so
        "not for deploying" would pull deploy queries toward this tool.
        """
        name = _words(self.row.replace("#", " "))
        parts = [f"{name}: {self.summary}".strip()]
        if self.use_when:
            parts.append(self.use_when)
        if self.operations:
            parts.append(f"Operations: {self.operations}")
        if self.args:
            parts.append("Arguments: " + ", ".join(self.args) + ".")
        if self.arg_text:
            parts.append(self.arg_text)
        return " ".join(p for p in parts if p)


def _words(name: str) -> str:
    for sep in (".", ":", "_", "/", "-"):
        name = name.replace(sep, " ")
    return " ".join(name.split())


def tool_docs(tools: Iterable[Tool]) -> list[ToolDoc]:
    """The index rows of `tools`: one per tool, plus one per operation of a tool that has them.

    >>> from harnessc.runtime.model import Operation
    >>> ops = {"observe": Operation(name="observe")}
    >>> t = Tool(id="browser", wire_name="browser", operations=ops)
    >>> [d.row for d in tool_docs([t])]
    ['browser', 'browser#observe']
    """
    docs: list[ToolDoc] = []
    for tool in tools:
        args = tuple(f.name for f in tool.input.fields)
        ops = " ".join(
            " ".join(x for x in (name, op.summary or "", op.use_when or "") if x)
            for name, op in tool.operations.items()
        )
        docs.append(
            ToolDoc(
                id=tool.id,
                row=tool.id,
                summary=tool.summary or "",
                wire_name=tool.wire_name if tool.wire_name != tool.id else "",
                use_when=tool.use_when or "",
                not_for=tool.not_for or "",
                args=args,
                operations=ops,
                packs=tool.packs,
            )
        )
        for name, op in tool.operations.items():
            op_args = args + tuple(f.name for f in op.input.fields) if op.input else args
            docs.append(
                ToolDoc(
                    id=tool.id,
                    row=f"{tool.id}#{name}",
                    summary=" ".join(x for x in (op.summary, tool.summary) if x),
                    use_when=op.use_when or tool.use_when or "",
                    not_for=op.not_for or tool.not_for or "",
                    args=tuple(dict.fromkeys(op_args)),
                    packs=tool.packs,
                )
            )
    return docs


RECALLED_BY = tuple(
    tuple(name for bit, name in ((1, "dense"), (2, "lexical"), (4, "named")) if tag & bit)
    for tag in range(8)
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked tool: its best row's scores (None when that score was not computed)."""

    tool: str
    row: str
    position: int
    """1-based, after dedupe."""
    exposed: bool
    dense: float | None = None
    lexical: float | None = None
    fused: float | None = None
    boost: float = 0.0
    score: float | None = None
    """fused + boost: what the order is by."""
    recalled_by: tuple[str, ...] = ()
    """Which lists brought the row to the rerank: `dense`, `lexical`, and `named` for a tool
    named verbatim in the request (exposed first, whatever its score)."""


@dataclass(frozen=True, slots=True)
class Cut:
    """Where the list was cut: the last exposed and the first left out, with their scores."""

    limit: int
    last_exposed: str
    last_score: float
    first_excluded: str | None
    first_excluded_score: float | None


@dataclass(frozen=True, slots=True)
class ExposureTrace:
    """Why exactly these tools were exposed."""

    query: str
    """The query as ranked: its first `QUERY_CAP` characters."""
    limit: int
    public: int
    available: int
    rule: str
    """`all` (|P| ≤ limit: nothing ranked), `ranked`, or `order` (the query has no terms: the
    first `limit` of P in the surface's order)."""
    recall: str | None = None
    rerank: str | None = None
    recalled: int = 0
    """Rows recalled for the rerank (a tool's operations are rows of their own)."""
    candidates: Sequence[Candidate] = ()
    cut: Cut | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    packs: tuple[str, ...] = ()
    """The packs the user selected, as given."""
    named: tuple[str, ...] = ()
    """Tools of P named verbatim in the request (by id or wire name): always exposed."""
    query_chars: int = 0
    """The length of the query as given; more than `QUERY_CAP` means it was cut."""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, as a session logs it: dicts with string keys, lists (for the
        tuples), strings, numbers, booleans and None, every container a fresh one."""
        out = {name: getattr(self, name) for name in _TRACE_FIELDS}
        # field by field: `asdict` deep-copies every value, ten times slower on a ranked trace
        if isinstance(self.candidates, Ranked):  # straight from the ranking's arrays
            out["candidates"] = self.candidates.dicts()
        else:
            out["candidates"] = [_candidate_dict(c) for c in self.candidates]
        cut = self.cut
        out["cut"] = None if cut is None else {name: getattr(cut, name) for name in _CUT_FIELDS}
        out["unavailable"] = dict(self.unavailable)
        out["packs"] = list(self.packs)
        out["named"] = list(self.named)
        out["notes"] = list(self.notes)
        return out


def _candidate_dict(c: Candidate) -> dict[str, Any]:
    out = {name: getattr(c, name) for name in _CANDIDATE_FIELDS}
    out["recalled_by"] = list(c.recalled_by)
    return out


_CANDIDATE_FIELDS = tuple(f.name for f in fields(Candidate))
_CUT_FIELDS = tuple(f.name for f in fields(Cut))  # scalars: nothing to copy
_TRACE_FIELDS = tuple(f.name for f in fields(ExposureTrace))


@dataclass(frozen=True, slots=True)
class Exposure:
    """The tools the planner sees this turn, in order, and the trace of how they were chosen."""

    tools: tuple[str, ...]
    trace: ExposureTrace


class Ranked(Sequence[Candidate]):
    """A ranking's candidates, made into `Candidate`s when first read: the order and the
    scores are decided (numpy arrays), only the Python objects of the trace wait."""

    __slots__ = ("_args", "_built")

    def __init__(self, docs: Sequence[ToolDoc], limit: int, **arrays: Any) -> None:
        # `cand` (sorted rows) and the score arrays align; `order` ranks them; `lists` are
        # the dense, lexical and named rows (which recalled what)
        self._args = (docs, limit, arrays)
        self._built: tuple[Candidate, ...] | None = None

    def _columns(self) -> list[list[Any]]:
        """The candidates' fields, one list per field of `Candidate`, in its order."""
        docs, limit, a = self._args
        cand, order = a["cand"], a["order"]
        n = len(order)
        tags = np.zeros(len(cand), dtype=np.int64)
        for bit, listed in zip((1, 2, 4), a["lists"], strict=True):
            if len(listed):
                tags[cand.searchsorted(listed)] |= bit
        scores = [
            [None] * n if a[k] is None else np.round(a[k][order].astype(np.float64), 6).tolist()
            for k in ("dense", "lexical", "fused", "score")
        ]
        boost = [0.0] * n if a["boost"] is None else a["boost"][order].tolist()
        picked = [docs[r] for r in cand[order].tolist()]
        return [
            [d.id for d in picked],
            [d.row for d in picked],
            list(range(1, n + 1)),
            [i < limit for i in range(n)],
            *scores[:3],
            boost,
            scores[3],
            [RECALLED_BY[t] for t in tags[order].tolist()],
        ]

    def _all(self) -> tuple[Candidate, ...]:
        if self._built is None:
            self._built = tuple(map(Candidate, *self._columns()))
        return self._built

    def dicts(self) -> list[dict[str, Any]]:
        """The candidates as `ExposureTrace.to_dict` gives them, made without the objects."""
        names = _CANDIDATE_FIELDS
        columns = self._columns()
        columns[-1] = [list(by) for by in columns[-1]]  # `recalled_by`, as JSON lists
        return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]

    def __len__(self) -> int:
        return len(self._args[2]["order"])

    @overload
    def __getitem__(self, i: int) -> Candidate: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Candidate, ...]: ...
    def __getitem__(self, i: int | slice) -> Candidate | tuple[Candidate, ...]:
        return self._all()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())
