"""The exposure layer: which public, available tools a planner sees in one turn (the top-N rule).

The rule (language.md §5), exactly. Let P be the tools public on the surface and available now.

- |P| ≤ limit: expose all of P, in the order given. No embedding is computed, nothing is ranked.
- |P| > limit: recall the `top` best candidates (by dense score, or by BM25 when the surface
  recalls lexically or no embeddings are at hand) → rerank them (`hybrid` fuses the dense and the
  lexical score, `dense` and `lexical` use one) → add the bounded pack boost → dedupe by tool id
  (a tool's operations and duplicate registrations are separate rows) → expose the first `limit`.

Ranking only ever orders P: it never adds a tool outside P, and it is never a permission — every
exposed tool's calls are still judged by policy. Every exposure returns a trace: the candidates
with their dense, lexical, fused and boost scores, the cut, the notes (a fallback to lexical
ranking says why), and, for each public tool that is not available, the reason the caller gave.

Speed: dense recall is one float32 matrix–vector product over P's rows followed by
`np.argpartition`, with no Python loop over tools; the rerank, the dedupe and the trace work on
the recalled candidates only. Tool embeddings are computed at build time
(`harnessc.compiler.embed`); only the query is embedded at run time
(`harnessc.runtime.embedding`). The product runs in numpy, or, when the embedder offers
`scores(matrix, vector)` (MiniLM's does), in the embedder's own thread pool: one pool for the
whole query side instead of two fighting over the cores.

>>> from harnessc.runtime.model import Tool
>>> tools = [Tool(id=f"t{i}", wire_name=f"t{i}", summary=f"tool number {i}") for i in range(3)]
>>> index = ExposureIndex.from_tools(tools)
>>> index.expose(["t0", "t1", "t2"], "anything", limit=20).tools
('t0', 't1', 't2')
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .lexical import LexicalIndex
from .model import Rank, Surface, Tool

__all__ = [
    "EMBEDDINGS_FILE",
    "EMBEDDING_IDS_FILE",
    "HYBRID_DENSE_WEIGHT",
    "PACK_BOOST",
    "Candidate",
    "Cut",
    "Exposure",
    "ExposureIndex",
    "ExposureTrace",
    "ToolDoc",
    "UnknownToolError",
    "load_tool_embeddings",
    "tool_docs",
]

HYBRID_DENSE_WEIGHT = 0.6
"""Weight of the z-normalised dense score in `hybrid` (the lexical one gets the rest); tuned on
BFCL with bench/exposure.py."""

PACK_BOOST = 0.5
"""The boost, in standard deviations of the fused score, for a tool in a pack the user selected.
It is a constant, so a preference can lift a close candidate over the cut but cannot lift a
poor match far, and it applies only to tools already in P and recalled."""

NO_AVAILABILITY_REASON = "no availability was given for this tool"
EMBEDDINGS_FILE = "tool_embeddings.npy"
EMBEDDING_IDS_FILE = "tool_embedding_ids.json"

Embedder = Callable[[str], Any]
Availability = Mapping[str, Any] | Callable[[str], Any]


class UnknownToolError(KeyError):
    """`expose` was given a tool id that the exposure index does not hold."""


# ---------------------------------------------------------------------------------------------
# Tool documents: what lexical and dense ranking read of a tool


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """One row of the index: a tool, or one operation of a tool (`row` is `id#operation`).

    `arg_text` holds argument descriptions where the source has them (MCP or imported schemas).
    """

    id: str
    row: str
    summary: str = ""
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


# ---------------------------------------------------------------------------------------------
# The result and its trace


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
    limit: int
    public: int
    available: int
    rule: str
    """`all` (|P| ≤ limit: nothing ranked) or `ranked`."""
    recall: str | None = None
    rerank: str | None = None
    recalled: int = 0
    """Rows recalled for the rerank (a tool's operations are rows of their own)."""
    candidates: tuple[Candidate, ...] = ()
    cut: Cut | None = None
    unavailable: dict[str, str] = field(default_factory=dict)
    packs: tuple[str, ...] = ()
    """The packs the user selected, as given."""
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Exposure:
    """The tools the planner sees this turn, in order, and the trace of how they were chosen."""

    tools: tuple[str, ...]
    trace: ExposureTrace


# ---------------------------------------------------------------------------------------------
# The index


class ExposureIndex:
    """Tool rows with their BM25 index and (optionally) their build-time embeddings.

    `embeddings` is a float32 matrix of L2-normalised rows and `ids` names each of its rows (a
    row key from `tool_docs`, or a tool id, which then also serves that tool's operations).
    `embedder` turns a query into a vector (`harnessc.runtime.embedding.QueryEmbedder`); it is
    called only when ranking is needed and no `query_vector` was given. If it also has
    `scores(matrix, vector)`, the query-side products run there instead of in numpy.
    """

    def __init__(
        self,
        docs: Sequence[ToolDoc],
        embeddings: np.ndarray | None = None,
        ids: Sequence[str] | None = None,
        *,
        embedder: Embedder | None = None,
        dense_note: str | None = None,
    ) -> None:
        self.docs = tuple(docs)
        self.embedder = embedder
        self.dense_note = dense_note
        tool_ids = list(dict.fromkeys(d.id for d in self.docs))
        self._tool_pos = {t: i for i, t in enumerate(tool_ids)}
        self.tool_ids = tuple(tool_ids)
        # each row's place in the order of row keys: the tie-break of equal scores
        by_key = sorted(range(len(self.docs)), key=lambda r: self.docs[r].row)
        self._row_rank = np.empty(len(self.docs), dtype=np.int64)
        self._row_rank[by_key] = np.arange(len(self.docs))
        self._row_tool = np.fromiter(
            (self._tool_pos[d.id] for d in self.docs), dtype=np.int64, count=len(self.docs)
        )
        self._packs = [frozenset(d.packs) for d in self.docs]
        self.lexical = LexicalIndex([d.fields() for d in self.docs])
        self.matrix: np.ndarray | None = None
        if embeddings is not None:
            self.matrix = _align(self.docs, np.asarray(embeddings), ids)

    @classmethod
    def from_tools(
        cls,
        tools: Iterable[Tool],
        embeddings: np.ndarray | None = None,
        ids: Sequence[str] | None = None,
        *,
        embedder: Embedder | None = None,
        dense_note: str | None = None,
    ) -> ExposureIndex:
        """The index of `tools` (one row per tool and per operation)."""
        return cls(tool_docs(tools), embeddings, ids, embedder=embedder, dense_note=dense_note)

    @property
    def has_embeddings(self) -> bool:
        return self.matrix is not None

    # -- the rule ------------------------------------------------------------------------------

    def expose(
        self,
        public: Iterable[str],
        query: str,
        *,
        available: Availability | None = None,
        limit: int | None = None,
        rank: Rank | None = None,
        packs: Iterable[str] = (),
        query_vector: np.ndarray | None = None,
        surface: Surface | None = None,
    ) -> Exposure:
        """Expose at most `limit` tools of P = `public` ∩ available, by the rule of §5.

        `public` lists the surface's public tool ids. `available` (a mapping or a callable) says
        for each whether it is available: `True`, or `False`/a reason string/an object with
        `available` and `reason`; a mapping without the tool counts as unavailable. Without
        `available`, every public tool is available. `limit` and `rank` default to `surface`'s,
        else 20 and `Rank()`. `packs` are the packs the user selected: a bounded boost when the
        surface says `prefer packs`, and a trace entry either way.
        """
        if limit is None:
            limit = surface.limit if surface is not None else 20
        if rank is None:
            rank = surface.rank if surface is not None else Rank()
        packs = tuple(packs)
        ordered = list(dict.fromkeys(public))
        if not all(map(self._tool_pos.__contains__, ordered)):
            unknown = [t for t in ordered if t not in self._tool_pos]
            raise UnknownToolError(f"not in the exposure index: {', '.join(unknown[:5])}")
        pool, unavailable = _split_available(ordered, available)
        trace_args: dict[str, Any] = {
            "query": query,
            "limit": limit,
            "public": len(ordered),
            "available": len(pool),
            "unavailable": unavailable,
            "packs": packs,
        }
        if len(pool) <= limit:
            # INVARIANT: the exact rule — no embedding, no rerank when P fits in the limit
            candidates = tuple(
                Candidate(tool=t, row=t, position=i + 1, exposed=True) for i, t in enumerate(pool)
            )
            trace = ExposureTrace(rule="all", candidates=candidates, **trace_args)
            return Exposure(tuple(pool), trace)
        return self._ranked(pool, query, limit, rank, packs, query_vector, trace_args)

    # -- ranking -------------------------------------------------------------------------------

    def _ranked(
        self,
        pool: list[str],
        query: str,
        limit: int,
        rank: Rank,
        packs: tuple[str, ...],
        query_vector: np.ndarray | None,
        trace_args: dict[str, Any],
    ) -> Exposure:
        notes: list[str] = []
        rows = self._rows_of(pool)
        wants_dense = rank.recall == "embedding" or rank.rerank != "lexical"
        qv = self._query_vector(query, query_vector, notes) if wants_dense else None
        recall_mode = rank.recall if qv is not None else "lexical"
        rerank_mode = rank.rerank if qv is not None else "lexical"
        lexical_all = self.lexical.scores(query)

        # recall: enough rows that at least `top` distinct tools survive the dedupe
        k = min(len(rows), max(rank.top, limit) + (len(rows) - len(pool)))
        dense_rows: np.ndarray | None = None
        if recall_mode == "embedding":
            assert qv is not None
            dense_rows = self._dense(rows, qv)
            picked = _top_k(dense_rows, k)
        else:
            picked = _top_k(lexical_all[rows], k)
        cand = rows[picked]
        lexical = lexical_all[cand]
        dense: np.ndarray | None = None
        if dense_rows is not None:
            dense = dense_rows[picked]
        elif qv is not None:
            assert self.matrix is not None
            dense = self._product(self.matrix[cand], qv)

        if rerank_mode == "hybrid":
            assert dense is not None
            fused = HYBRID_DENSE_WEIGHT * _z(dense) + (1.0 - HYBRID_DENSE_WEIGHT) * _z(lexical)
        elif rerank_mode == "dense":
            assert dense is not None
            fused = _z(dense)
        else:
            fused = _z(lexical)

        boost = np.zeros(len(cand))
        if packs:
            if "packs" in rank.prefer:
                chosen = frozenset(packs)
                boost = np.fromiter(
                    (PACK_BOOST if self._packs[r] & chosen else 0.0 for r in cand.tolist()),
                    dtype=np.float64,
                    count=len(cand),
                )
            else:
                notes.append(
                    "selected packs are not a preference here: the surface has no `prefer packs`"
                )
        score = fused + boost

        # order: score, then the row key, so equal scores give the same order always
        order = np.lexsort((self._row_rank[cand], -score)).tolist()
        # the trace's scores, rounded to 6 places in one step per array
        rows_l = cand.tolist()
        score_l, fused_l, lexical_l = (np.round(a, 6).tolist() for a in (score, fused, lexical))
        dense_l = None if dense is None else np.round(dense.astype(np.float64), 6).tolist()
        boost_l = boost.tolist()
        seen: set[str] = set()
        ranked: list[Candidate] = []
        for i in order:
            doc = self.docs[rows_l[i]]
            if doc.id in seen:
                continue
            seen.add(doc.id)
            ranked.append(
                Candidate(
                    tool=doc.id,
                    row=doc.row,
                    position=len(ranked) + 1,
                    exposed=len(ranked) < limit,
                    dense=None if dense_l is None else dense_l[i],
                    lexical=lexical_l[i],
                    fused=fused_l[i],
                    boost=boost_l[i],
                    score=score_l[i],
                )
            )
        exposed = tuple(c.tool for c in ranked[:limit])
        last = ranked[min(limit, len(ranked)) - 1]
        nxt = ranked[limit] if len(ranked) > limit else None
        cut = Cut(
            limit=limit,
            last_exposed=last.tool,
            last_score=last.score or 0.0,
            first_excluded=nxt.tool if nxt else None,
            first_excluded_score=nxt.score if nxt else None,
        )
        trace = ExposureTrace(
            rule="ranked",
            recall=recall_mode,
            rerank=rerank_mode,
            recalled=len(cand),
            candidates=tuple(ranked),
            cut=cut,
            notes=tuple(notes),
            **trace_args,
        )
        return Exposure(exposed, trace)

    def _rows_of(self, pool: list[str]) -> np.ndarray:
        if len(pool) == len(self.tool_ids):
            return np.arange(len(self.docs))
        wanted = np.zeros(len(self.tool_ids), dtype=bool)
        wanted[np.fromiter(map(self._tool_pos.__getitem__, pool), dtype=np.int64)] = True
        return np.flatnonzero(wanted[self._row_tool])

    def _dense(self, rows: np.ndarray, qv: np.ndarray) -> np.ndarray:
        assert self.matrix is not None
        # one product: over the whole matrix when P is most of it (no copy of the rows),
        # over P's rows otherwise
        if len(rows) == len(self.docs):
            return self._product(self.matrix, qv)
        if 2 * len(rows) >= len(self.docs):
            return self._product(self.matrix, qv)[rows]
        return self._product(self.matrix[rows], qv)

    def _product(self, matrix: np.ndarray, qv: np.ndarray) -> np.ndarray:
        scores = getattr(self.embedder, "scores", None)
        if scores is not None:
            return np.asarray(scores(matrix, qv), dtype=np.float32)
        return matrix @ qv

    def _query_vector(
        self, query: str, given: np.ndarray | None, notes: list[str]
    ) -> np.ndarray | None:
        if self.matrix is None:
            notes.append(
                "ranked lexically: " + (self.dense_note or "this build has no tool embeddings")
            )
            return None
        if given is not None:
            qv = np.asarray(given, dtype=np.float32).reshape(-1)
        elif self.embedder is not None:
            try:
                qv = np.asarray(self.embedder(query), dtype=np.float32).reshape(-1)
            except ImportError as exc:  # the embed extra is missing (EmbeddingUnavailableError)
                notes.append(f"ranked lexically: {exc}")
                return None
        else:
            notes.append("ranked lexically: no query embedder was given")
            return None
        if qv.shape[0] != self.matrix.shape[1]:
            raise ValueError(
                f"query vector has {qv.shape[0]} dimensions, the tool embeddings "
                f"{self.matrix.shape[1]}"
            )
        norm = float(np.linalg.norm(qv))
        return qv / norm if norm > 0 else qv


def load_tool_embeddings(directory: str | Path) -> tuple[np.ndarray, list[str]] | None:
    """The build-time embeddings a generated package ships (`compiler.embed.
    save_tool_embeddings`), or None when the build had none (it then ranks lexically)."""
    folder = Path(directory)
    try:
        matrix = np.load(folder / EMBEDDINGS_FILE, allow_pickle=False)
        ids = json.loads((folder / EMBEDDING_IDS_FILE).read_text("utf-8"))
    except FileNotFoundError:
        return None
    return np.ascontiguousarray(matrix, dtype=np.float32), [str(i) for i in ids]


def _align(
    docs: Sequence[ToolDoc], embeddings: np.ndarray, ids: Sequence[str] | None
) -> np.ndarray:
    if embeddings.ndim != 2:
        raise ValueError("tool embeddings must be a matrix, one row per tool")
    matrix = embeddings.astype(np.float32, copy=False)
    if ids is None:
        if len(matrix) != len(docs):
            raise ValueError(f"{len(matrix)} embeddings for {len(docs)} index rows and no ids")
        return np.ascontiguousarray(matrix)
    pos = {key: i for i, key in enumerate(ids)}
    order: list[int] = []
    missing: list[str] = []
    for doc in docs:
        i = pos.get(doc.row, pos.get(doc.id))
        if i is None:
            missing.append(doc.row)
        else:
            order.append(i)
    if missing:
        raise ValueError(f"no embedding for {len(missing)} tools: {', '.join(missing[:5])}")
    if order == list(range(len(matrix))):
        return np.ascontiguousarray(matrix)
    return np.ascontiguousarray(matrix[np.asarray(order, dtype=np.int64)])


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores (unordered); all of them when k covers the array."""
    if k >= len(scores):
        return np.arange(len(scores))
    return np.argpartition(-scores, k - 1)[:k]


def _z(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    std = float(x.std())
    if not math.isfinite(std) or std < 1e-12:
        return np.zeros_like(x)
    return (x - x.mean()) / std


def _split_available(
    ordered: list[str], available: Availability | None
) -> tuple[list[str], dict[str, str]]:
    if available is None:
        return ordered, {}
    pool: list[str] = []
    reasons: dict[str, str] = {}
    lookup: Callable[[str], Any]
    if callable(available):
        lookup = available
    else:
        mapping = available
        lookup = lambda t: mapping.get(t, NO_AVAILABILITY_REASON)  # noqa: E731
    for tool in ordered:
        ok, reason = _availability(lookup(tool))
        if ok:
            pool.append(tool)
        else:
            reasons[tool] = reason
    return pool, reasons


def _availability(value: Any) -> tuple[bool, str]:
    if value is True:
        return True, ""
    if value is False or value is None:
        return False, "unavailable"
    if isinstance(value, str):
        return False, value
    if hasattr(value, "available"):
        if value.available:
            return True, ""
        reason = getattr(value, "reason", None)
        if reason is None and getattr(value, "reasons", None):
            reason = "; ".join(str(r) for r in value.reasons)
        return False, str(reason or "unavailable")
    return bool(value), "" if value else "unavailable"
