"""The exposure layer: which public, available tools a planner sees in one turn (the top-N rule).

The rule (language.md §5), exactly. Let P be the tools public on the surface and available now.

- |P| ≤ limit: expose all of P, in the order given. No embedding is computed, nothing is ranked.
- |P| > limit and the query has no terms (empty, or only function words and symbols): the first
  `limit` of P in the order given, with a note (rule `order`).
- |P| > limit: recall the `top` best rows by dense score together with the `top` best by BM25
  (their union; BM25 alone when the surface recalls lexically or no embeddings are at hand) →
  rerank them (`hybrid` fuses the dense and the lexical score, `dense` and `lexical` use one) →
  add the bounded pack boost → dedupe by tool id (a tool's operations and duplicate
  registrations are separate rows) → tools of P named verbatim in the request first → expose
  the first `limit`.

Ranking only ever orders P: it never adds a tool outside P, and it is never a permission — every
exposed tool's calls are still judged by policy. Every exposure returns a trace: the candidates
with their dense, lexical, fused and boost scores and the lists that recalled them, the cut, the
notes (a fallback to lexical ranking says why), and, for each public tool that is not
available, the reason the caller gave. Queries are read up to `QUERY_CAP` characters.

Speed: the dense side is one float32 product of the query with P's rows, with no Python loop
over tools; it only chooses the recall. Its k-th highest score is found without partitioning
them all: every eighth score is partitioned for a threshold that a few hundred scores pass, and
the k-th is the k-th of those (the lexical list's k-th BM25 score likewise). The recalled rows'
dense scores are then computed again row by row, without BLAS, so the ranking never depends on
how BLAS summed the product, and `expose_many` (one matrix product and one partition of the
samples for a batch) ranks exactly like `expose`. BM25 reads only the postings of the query's
terms. P is worked out once for a surface's tuple of ids and an `Availability` snapshot, not on
every call. The rerank, the dedupe and the trace work on the recalled rows only, and the trace's
`Candidate`s are made when first read. Tool embeddings are computed at build time
(`harnessc.compiler.embed`); only the query is embedded at run time
(`harnessc.runtime.exposure.embedding`). The product runs in numpy, or, when the embedder offers
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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from ..judge.availability import Availability as AvailabilitySnapshot
from ..model.exposure import (
    EMBEDDING_IDS_FILE,
    EMBEDDINGS_FILE,
    Candidate,
    Cut,
    Exposure,
    ExposureTrace,
    Ranked,
    ToolDoc,
    tool_docs,
)
from ..model.ir import Rank, Surface, Tool, collection_paused
from .lexical import LexicalIndex, tokenize

__all__ = [
    "EMBEDDINGS_FILE",
    "EMBEDDING_IDS_FILE",
    "HYBRID_DENSE_WEIGHT",
    "PACK_BOOST",
    "QUERY_CAP",
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

QUERY_CAP = 2_000
"""Characters of a query that ranking reads and the trace keeps (MiniLM reads 256 word pieces,
about 1,000 characters of English; BM25 gains nothing from more). The trace's `query_chars`
gives the length as given and a note says when the query was cut."""

NO_AVAILABILITY_REASON = "no availability was given for this tool"

Embedder = Callable[[str], Any]
Availability = AvailabilitySnapshot | Mapping[str, Any] | Callable[[str], Any]


class UnknownToolError(KeyError):
    """`expose` was given a tool id that the exposure index does not hold."""


# ---------------------------------------------------------------------------------------------
# The index


@dataclass(slots=True)
class _Pool:
    """P resolved against the index: the tools, their rows, and what was left out and why."""

    public: int
    tools: list[str]
    unavailable: dict[str, str]
    rows: np.ndarray | None
    """P's rows, sorted; None when P is every tool of the index."""
    row_mask: np.ndarray | None
    tool_mask: np.ndarray | None


@dataclass(slots=True)
class _Recall:
    """One query's recall, before the rerank: the lists and the rows to rescore exactly."""

    recall_mode: str
    rerank_mode: str
    k: int
    near: np.ndarray
    """The rows (of the index) near the k-th approximate dense score; empty without them."""
    lexical_list: np.ndarray
    named_rows: np.ndarray
    scored: np.ndarray
    """The sorted union of the three lists: the rows whose exact dense score is computed."""
    docs: np.ndarray
    bm25: np.ndarray
    every: np.ndarray | None
    exact: np.ndarray | None = None


@dataclass(slots=True)
class _Query:
    text: str
    chars: int
    terms: list[int]
    """The lexical index's ids of the query's terms that some row holds."""
    has_terms: bool
    named: list[int]
    """Tool positions named verbatim, in the order they came."""


class ExposureIndex:
    """Tool rows with their BM25 index and (optionally) their build-time embeddings.

    `embeddings` is a float32 matrix of L2-normalised rows and `ids` names each of its rows (a
    row key from `tool_docs`, or a tool id, which then also serves that tool's operations).
    `embedder` turns a query into a vector (`harnessc.runtime.exposure.embedding.QueryEmbedder`);
    it is called only when ranking is needed and no `query_vector` was given. If it also has
    `scores(matrix, vector)`, the query-side product of `expose` runs there instead of in numpy.
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
        n = len(self.docs)
        # each row's place in the order of row keys: the tie-break of equal scores
        self._by_rank = np.asarray(
            sorted(range(n), key=[d.row for d in self.docs].__getitem__), dtype=np.int64
        )
        self._row_rank = np.empty(n, dtype=np.int64)
        self._row_rank[self._by_rank] = np.arange(n)
        self._row_tool = np.fromiter(
            map(self._tool_pos.__getitem__, (d.id for d in self.docs)), dtype=np.int64, count=n
        )
        # a tool's own row (not one of its operations): where a tool named in a query enters
        self._tool_row = np.unique(self._row_tool, return_index=True)[1]
        self._several_rows = n > len(tool_ids)  # operations or duplicate registrations
        self._names: dict[str, int] = {}
        for d in self.docs:
            if _is_name(d.id):
                self._names.setdefault(d.id, self._tool_pos[d.id])
        for d in self.docs:
            if d.wire_name and _is_name(d.wire_name):
                self._names.setdefault(d.wire_name, self._tool_pos[d.id])
        self._packs = [frozenset(d.packs) for d in self.docs]
        self._has_packs = any(self._packs)
        self.lexical = LexicalIndex([d.fields() for d in self.docs])
        self.matrix: np.ndarray | None = None
        self._slack = 0.0
        if embeddings is not None:
            self.matrix = _align(self.docs, np.asarray(embeddings), ids)
            # INVARIANT: any float32 dot product of a unit query with a row — the big product,
            # however BLAS sums it, and the per-row rescoring (`_exact`) — is within
            # d·2⁻²⁴·|row| of the true value; so the rows within `_slack` (six times that) of
            # the k-th approximate score hold the rescoring's top k
            dim = self.matrix.shape[1]
            norms = np.einsum("ij,ij->i", self.matrix, self.matrix) if n else np.zeros(1)
            self._slack = 6.0 * dim * 2.0**-24 * float(np.sqrt(norms.max())) + 1e-9
        self._last_public: tuple[tuple[str, ...], list[str], _Pool | None, Any] | None = None

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
        with collection_paused():  # postings and documents: many small acyclic objects
            docs = tool_docs(tools)
            return cls(docs, embeddings, ids, embedder=embedder, dense_note=dense_note)

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
        `available` and `reason`; a mapping without the tool counts as unavailable. It may also
        be an `Availability` (every tool under one facts snapshot, as a session passes it):
        given the same one and the same tuple of ids again, P is not worked out again. Without
        `available`, every public tool is available. `limit` and `rank` default to `surface`'s,
        else 20 and `Rank()`. `packs` are the packs the user selected: a bounded boost when the
        surface says `prefer packs`, and a trace entry either way.
        """
        vectors = None if query_vector is None else [query_vector]
        return self.expose_many(
            public,
            [query],
            available=available,
            limit=limit,
            rank=rank,
            packs=packs,
            query_vectors=vectors,
            surface=surface,
        )[0]

    def expose_many(
        self,
        public: Iterable[str],
        queries: Sequence[str],
        *,
        available: Availability | None = None,
        limit: int | None = None,
        rank: Rank | None = None,
        packs: Iterable[str] = (),
        query_vectors: np.ndarray | Sequence[np.ndarray] | None = None,
        surface: Surface | None = None,
    ) -> list[Exposure]:
        """`expose` for each of `queries` over the same P: one matrix product for the batch,
        and the same result, query by query, as a loop of `expose`.

        `query_vectors`, when given, has one vector per query. Without them each query is
        embedded on its own (a padded batch would change a vector's last bits).

        >>> from harnessc.runtime.model import Tool
        >>> tools = [Tool(id=f"t{i}", wire_name=f"t{i}", summary=f"tool {i}") for i in range(3)]
        >>> index = ExposureIndex.from_tools(tools)
        >>> [e.tools for e in index.expose_many(["t0", "t2"], ["a", "b"], limit=1)]
        [('t0',), ('t0',)]
        """
        if limit is None:
            limit = surface.limit if surface is not None else 20
        if rank is None:
            rank = surface.rank if surface is not None else _DEFAULT_RANK
        packs = tuple(packs)
        pool = self._pool(public, available)
        if len(pool.tools) <= limit:
            # INVARIANT: the exact rule — no embedding, no rerank when P fits in the limit
            return [self._fixed(pool, self._query(q), limit, packs, "all", ()) for q in queries]
        prepared = [self._query(q) for q in queries]
        ranked = [i for i, q in enumerate(prepared) if q.has_terms]
        notes: list[str] = []
        wants_dense = rank.recall == "embedding" or rank.rerank != "lexical"
        vectors: list[np.ndarray] | None = None
        if wants_dense and ranked:
            given = None if query_vectors is None else [query_vectors[i] for i in ranked]
            vectors = self._query_vectors([prepared[i].text for i in ranked], given, notes)
        near: list[np.ndarray | None] = [None] * len(ranked)
        k = self._recall_size(pool, limit, rank)
        if vectors is not None and rank.recall == "embedding":
            stacked = vectors[0][None, :] if len(vectors) == 1 else np.stack(vectors)
            products = self._products(stacked, pool.rows)
            near = _near_many(products, k, self._slack, pool.rows)
        recalls = [
            self._recall(pool, prepared[i], k, rank, vectors is not None, near[j])
            for j, i in enumerate(ranked)
        ]
        if vectors is not None:
            # the exact dense scores of every row that may reach a rerank, query by query (a
            # gather of one query's rows stays in cache; one of the whole batch's does not)
            for r, qv in zip(recalls, vectors, strict=True):
                r.exact = self._exact(r.scored, qv)
        out: list[Exposure] = []
        slot = {i: j for j, i in enumerate(ranked)}
        for i, q in enumerate(prepared):
            if i not in slot:
                note = (
                    "the query is empty: the first `limit` tools of the surface, in its order"
                    if not q.text.strip()
                    else "the query has no terms to rank by (only function words or symbols): "
                    "the first `limit` tools of the surface, in its order"
                )
                out.append(self._fixed(pool, q, limit, packs, "order", (note,)))
                continue
            out.append(self._rank(pool, q, limit, rank, packs, recalls[slot[i]], list(notes)))
        return out

    # -- P and the query -----------------------------------------------------------------------

    def _pool(self, public: Iterable[str], available: Availability | None) -> _Pool:
        # A surface's tool ids come as the same tuple turn after turn: their order, checks and
        # rows are worked out once (a tuple cannot change under us).
        last = self._last_public
        if last is not None and public is last[0]:
            ordered, cached = last[1], last[2]
            if cached is not None and available is last[3]:
                return cached
        else:
            ordered = list(dict.fromkeys(public))
            if not all(map(self._tool_pos.__contains__, ordered)):
                unknown = [t for t in ordered if t not in self._tool_pos]
                raise UnknownToolError(f"not in the exposure index: {', '.join(unknown[:5])}")
        snapshot = isinstance(available, AvailabilitySnapshot)
        tools, unavailable = _split_available(
            ordered, available.tools if isinstance(available, AvailabilitySnapshot) else available
        )
        if len(tools) == len(self.tool_ids):
            pool = _Pool(len(ordered), tools, unavailable, None, None, None)
        else:
            tool_mask = np.zeros(len(self.tool_ids), dtype=bool)
            tool_mask[np.fromiter(map(self._tool_pos.__getitem__, tools), dtype=np.int64)] = True
            row_mask = tool_mask[self._row_tool]
            pool = _Pool(
                len(ordered), tools, unavailable, np.flatnonzero(row_mask), row_mask, tool_mask
            )
        if isinstance(public, tuple):
            # a mapping or a callable may answer otherwise next time; an `Availability` (one
            # facts snapshot, immutable) may not: its split is kept for the next call with it
            keep = available is None or snapshot
            self._last_public = (public, ordered, pool if keep else None, available)
        return pool

    def _query(self, query: str) -> _Query:
        text = query[:QUERY_CAP]
        tokens = tokenize(text)
        named: list[int] = []
        if tokens:
            names = self._names
            for chunk in _NAME.findall(text):
                for name in (chunk, chunk.strip(_NAME_EDGE)):
                    pos = names.get(name)
                    if pos is not None and pos not in named:
                        named.append(pos)
                        break
        return _Query(text, len(query), self.lexical.known(tokens), bool(tokens), named)

    def _query_vectors(
        self, texts: list[str], given: Sequence[np.ndarray] | None, notes: list[str]
    ) -> list[np.ndarray] | None:
        if self.matrix is None:
            notes.append(
                "ranked lexically: " + (self.dense_note or "this build has no tool embeddings")
            )
            return None
        if given is not None:
            raw = [np.asarray(v, dtype=np.float32).reshape(-1) for v in given]
        elif self.embedder is not None:
            try:
                raw = [np.asarray(self.embedder(t), dtype=np.float32).reshape(-1) for t in texts]
            except ImportError as exc:  # the embed extra is missing (EmbeddingUnavailableError)
                notes.append(f"ranked lexically: {exc}")
                return None
        else:
            notes.append("ranked lexically: no query embedder was given")
            return None
        out = []
        for qv in raw:
            if qv.shape[0] != self.matrix.shape[1]:
                raise ValueError(
                    f"query vector has {qv.shape[0]} dimensions, the tool embeddings "
                    f"{self.matrix.shape[1]}"
                )
            norm = math.sqrt(float(qv @ qv))
            out.append(qv / norm if norm > 0 else qv)
        return out

    def _products(self, queries: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """Approximate dense scores, one row per query over P's rows: one pass over the matrix.
        They choose the recall only; the scores that rank are recomputed exactly (`_exact`)."""
        assert self.matrix is not None
        # over the whole matrix when P is most of it (no copy of the rows), else over P's rows
        matrix = self.matrix
        if rows is not None and 2 * len(rows) < len(self.docs):
            matrix, rows = matrix[rows], None
        scores = getattr(self.embedder, "scores", None)
        if len(queries) == 1 and scores is not None:
            out = np.asarray(scores(matrix, queries[0]), dtype=np.float32)[None, :]
        elif len(queries) == 1:
            out = (matrix @ queries[0])[None, :]
        else:
            out = queries @ matrix.T
        return out if rows is None else out[:, rows]

    def _exact(self, rows: np.ndarray, qv: np.ndarray) -> np.ndarray:
        # Each row's score alone: numpy's own loop over the row's entries (einsum without
        # `optimize` never calls BLAS), the same bits whatever else is scored with it and
        # wherever the row sits; so one query and a batch rank alike even where BLAS sums the
        # big product in another order (tests/test_exposure_recall.py checks both).
        assert self.matrix is not None
        return np.einsum("ij,j->i", self.matrix.take(rows, axis=0), qv).astype(np.float64)  # type: ignore[no-any-return]

    # -- ranking -------------------------------------------------------------------------------

    def _fixed(
        self,
        pool: _Pool,
        q: _Query,
        limit: int,
        packs: tuple[str, ...],
        rule: str,
        notes: tuple[str, ...],
    ) -> Exposure:
        shown = pool.tools[:limit]
        candidates = tuple(
            Candidate(tool=t, row=t, position=i + 1, exposed=True) for i, t in enumerate(shown)
        )
        trace = ExposureTrace(
            rule=rule,
            candidates=candidates,
            notes=(*notes, *_cap_note(q)),
            **self._trace_args(pool, q, limit, packs),
        )
        return Exposure(tuple(shown), trace)

    def _trace_args(
        self, pool: _Pool, q: _Query, limit: int, packs: tuple[str, ...]
    ) -> dict[str, Any]:
        return {
            "query": q.text,
            "query_chars": q.chars,
            "limit": limit,
            "public": pool.public,
            "available": len(pool.tools),
            "unavailable": pool.unavailable,
            "packs": packs,
        }

    def _recall_size(self, pool: _Pool, limit: int, rank: Rank) -> int:
        # enough rows that at least `top` distinct tools survive the dedupe
        n_rows = len(self.docs) if pool.rows is None else len(pool.rows)
        return min(n_rows, max(rank.top, limit) + (n_rows - len(pool.tools)))

    def _recall(
        self,
        pool: _Pool,
        q: _Query,
        k: int,
        rank: Rank,
        dense_at_hand: bool,
        near: np.ndarray | None,
    ) -> _Recall:
        """One query's lists (the rows near the k-th dense score, the lexical top k, the named
        rows) and every row whose exact dense score the rerank may read."""
        recall_mode = rank.recall if dense_at_hand else "lexical"
        rerank_mode = rank.rerank if dense_at_hand else "lexical"
        rank_of = self._row_rank
        # the lexical list: rows holding a query term (in P), best first
        lexical_used = recall_mode == "lexical" or rerank_mode != "dense"
        docs, bm25, every = self.lexical.match_all(q.terms) if lexical_used else _NO_MATCH
        if pool.row_mask is not None and len(docs):
            keep = pool.row_mask[docs]
            docs, bm25 = docs[keep], bm25[keep]
        if recall_mode == "lexical":
            lexical_list = docs[_best(bm25, docs, rank_of, k)]
            if len(lexical_list) < k:  # too few rows hold a term: the rest by row key
                order = (
                    self._by_rank
                    if pool.row_mask is None
                    else self._by_rank[pool.row_mask[self._by_rank]]
                )
                held = np.zeros(len(self.docs), dtype=bool)
                held[docs] = True
                lexical_list = np.concatenate(
                    (lexical_list, order[~held[order]][: k - len(lexical_list)])
                )
        elif lexical_used:
            lexical_list = docs[_best(bm25, docs, rank_of, k)]
        else:
            lexical_list = _EMPTY
        named_rows = self._tool_row[q.named] if q.named else _EMPTY
        if q.named and pool.tool_mask is not None:
            named_rows = named_rows[pool.tool_mask[np.asarray(q.named)]]
        if near is None:
            near = _EMPTY
        scored = _union(near, lexical_list, named_rows) if dense_at_hand else _EMPTY
        return _Recall(
            recall_mode, rerank_mode, k, near, lexical_list, named_rows, scored, docs, bm25, every
        )

    def _rank(
        self,
        pool: _Pool,
        q: _Query,
        limit: int,
        rank: Rank,
        packs: tuple[str, ...],
        r: _Recall,
        notes: list[str],
    ) -> Exposure:
        recall_mode, rerank_mode, k = r.recall_mode, r.rerank_mode, r.k
        near, lexical_list, named_rows = r.near, r.lexical_list, r.named_rows
        docs, bm25, every = r.docs, r.bm25, r.every
        rank_of = self._row_rank
        lexical_used = recall_mode == "lexical" or rerank_mode != "dense"

        # the dense list: the exact top k of the rows near the k-th approximate score
        scored, exact = r.scored, r.exact
        if exact is not None and len(near) > k:
            at_near = scored.searchsorted(near)  # near ⊆ scored, both sorted
            dense_list = near[_best(exact[at_near], near, rank_of, k)]
        else:
            dense_list = near  # no more than k rows near the k-th: exactly the top k
        if exact is None:
            cand, dense = _union(dense_list, lexical_list, named_rows), None
        elif len(dense_list) == len(near):
            cand, dense = scored, exact
        else:
            cand = _union(dense_list, lexical_list, named_rows)
            dense = exact[scored.searchsorted(cand)]
        lexical = None
        if every is not None:
            lexical = every[cand]
        elif lexical_used:
            at = np.minimum(docs.searchsorted(cand), max(len(docs) - 1, 0))
            hit = docs[at] == cand if len(docs) else np.zeros(len(cand), dtype=bool)
            lexical = np.where(hit, bm25[at] if len(docs) else 0.0, 0.0)

        if rerank_mode == "hybrid":
            assert dense is not None and lexical is not None
            # w·z(dense) + (1 − w)·z(lexical), in place on the fresh arrays `_z` returns
            fused = _z(dense)
            fused *= HYBRID_DENSE_WEIGHT
            lexical_z = _z(lexical)
            lexical_z *= 1.0 - HYBRID_DENSE_WEIGHT
            fused += lexical_z
        elif rerank_mode == "dense":
            assert dense is not None
            fused = _z(dense)
        else:
            assert lexical is not None
            fused = _z(lexical)
        boost = None  # no boost: every candidate's is 0.0
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
        score = fused if boost is None else fused + boost

        # order: score, then the row key, so equal scores give the same order always; then
        # each tool's best row only; then the tools named in the request go first
        order = np.lexsort((rank_of[cand], -score))
        if self._several_rows:
            order = order[_first_of_each(self._row_tool[cand[order]])]
        named: tuple[str, ...] = ()
        if len(named_rows):
            tools = self._row_tool[cand[order]]
            named_tools = self._row_tool[named_rows]
            at_tool = {t: i for i, t in enumerate(tools.tolist())}
            front = [at_tool[t] for t in named_tools.tolist()]
            rest = np.ones(len(order), dtype=bool)
            rest[front] = False
            order = np.concatenate((order[front], order[rest]))
            named = tuple(self.tool_ids[t] for t in named_tools.tolist())
            notes.extend(
                f"`{t}` is named in the request: exposed first, whatever its score"
                for t in named[:limit]
            )
        for pos in q.named:
            tool = self.tool_ids[pos]
            if tool in pool.unavailable:
                notes.append(
                    f"`{tool}` is named in the request but not available: {pool.unavailable[tool]}"
                )

        rows = cand[order]
        sorted_score = score[order]
        exposed = _pick(self.tool_ids, self._row_tool[rows[:limit]].tolist())
        last = min(limit, len(rows)) - 1
        cut = (
            None
            if last < 0
            else Cut(
                limit=limit,
                last_exposed=exposed[last],
                last_score=round(float(sorted_score[last]), 6),
                first_excluded=(
                    self.tool_ids[int(self._row_tool[rows[limit]])] if len(rows) > limit else None
                ),
                first_excluded_score=(
                    round(float(sorted_score[limit]), 6) if len(rows) > limit else None
                ),
            )
        )
        candidates = Ranked(
            self.docs,
            limit,
            cand=cand,
            order=order,
            dense=dense,
            lexical=lexical,
            fused=fused,
            boost=boost,
            score=score,
            lists=(dense_list, lexical_list, named_rows),
        )
        trace = ExposureTrace(
            rule="ranked",
            recall=recall_mode,
            rerank=rerank_mode,
            recalled=len(cand),
            candidates=candidates,
            cut=cut,
            named=named,
            notes=(*notes, *_cap_note(q)),
            **self._trace_args(pool, q, limit, packs),
        )
        return Exposure(exposed, trace)


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


def _z(x: np.ndarray) -> np.ndarray:
    if not len(x):
        return np.zeros(0)
    centred = np.asarray(x, dtype=np.float64) - float(np.add.reduce(x)) / len(x)
    std = math.sqrt(float(centred @ centred) / len(centred))
    if not math.isfinite(std) or std < 1e-12:
        return np.zeros(len(centred))
    centred /= std  # (a fresh array: the division in place spares one)
    return centred


def _split_available(
    ordered: list[str], available: Mapping[str, Any] | Callable[[str], Any] | None
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


_DEFAULT_RANK = Rank()
_EMPTY = np.zeros(0, dtype=np.int64)
_NONE = np.zeros(0, dtype=np.float64)
_NO_MATCH: tuple[np.ndarray, np.ndarray, None] = (_EMPTY, _NONE, None)
_STRIDE = 8
"""Every how many approximate scores one is sampled to find the k-th highest (`_near_many`)."""
# a name as it may stand in a request: letters, digits and the separators of tool ids
_NAME = re.compile(r"[\w.:/#@-]+")
_NAME_EDGE = ".:/#@-"
_SEPARATORS = "._:/#-"
_HUMP = re.compile(r"[a-z][A-Z]")


def _is_name(name: str) -> bool:
    """Whether `name` reads as a tool's name in a request, not as a word: it holds a
    separator (`change.create`, `get_weather`, `mcp:git:tool:log`) or a camelCase hump. Many
    tools are named by a plain word (`record`, `sum`, `B`), and requests use those as words."""
    return any(sep in name for sep in _SEPARATORS) or _HUMP.search(name) is not None


def _cap_note(q: _Query) -> tuple[str, ...]:
    if q.chars <= QUERY_CAP:
        return ()
    return (
        f"the query has {q.chars:,} characters: ranking and this trace read the first "
        f"{QUERY_CAP:,}",
    )


def _pick(values: Sequence[str], at: list[int]) -> tuple[str, ...]:
    """`values` at the positions `at`, as a tuple (one C call for the lot)."""
    if len(at) > 1:
        return itemgetter(*at)(values)  # type: ignore[no-any-return]
    return (values[at[0]],) if at else ()


def _union(*arrays: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `arrays` (np.unique without its Python overhead)."""
    values = np.concatenate(arrays)
    values.sort()
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _first_of_each(keys: np.ndarray) -> np.ndarray:
    """The positions, in order, of the first occurrence of each distinct key."""
    if len(keys) < 2:
        return np.arange(len(keys))
    by_key = keys.argsort(kind="stable")
    ordered = keys[by_key]
    keep = np.empty(len(keys), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    first = by_key[keep]
    first.sort()
    return first


def _near_many(
    approx: np.ndarray, k: int, slack: float, rows: np.ndarray | None
) -> list[np.ndarray | None]:
    """For each row of `approx` (one query's approximate scores per row): the columns whose
    score is within `slack` of its k-th highest, in ascending order, as rows of the index
    (`rows` maps a column to its row when P is not every row)."""
    n = approx.shape[1]
    if k >= n:
        every = np.arange(n) if rows is None else rows
        return [every] * len(approx)
    thresholds = _thresholds(approx, k)
    out: list[np.ndarray | None] = []
    for i, row in enumerate(approx):
        top = _Top(row, k, None if thresholds is None else thresholds[i])
        # the floor in float32, as the scores are compared
        found = top.at_least(np.float32(float(top.kth) - slack))
        out.append(found if rows is None else rows[found])
    return out


def _thresholds(values: np.ndarray, k: int) -> np.ndarray | None:
    """For each row of `values`, a threshold at or below its k-th highest value that a few
    times k values pass: the j-th highest of every `_STRIDE`-th value (one partition of the
    sample for all rows); None when the rows are too short to sample."""
    n = values.shape[1]
    if n < 16 * k:
        return None
    sample = values[:, ::_STRIDE].copy()
    size = sample.shape[1]
    j = min(size, 2 * -(-k // _STRIDE) + 8)
    sample.partition(size - j, axis=1)
    return sample[:, size - j]


class _Top:
    """The k-th highest of `values` (0 < k < len(values)), found without partitioning them
    all: the values at or above a threshold (`_thresholds`; about 2k of them) hold the k
    highest, and their own k-th highest is the k-th. When fewer than k pass (values in a
    contrived order) or no threshold is given, the whole array is partitioned. Exact either
    way; `at_least` then reads only the values that passed."""

    __slots__ = ("kth", "passed", "threshold", "values")

    def __init__(self, values: np.ndarray, k: int, threshold: Any = None) -> None:
        self.values = values
        self.threshold = threshold
        self.passed: np.ndarray | None = None
        some = None
        if threshold is not None:
            passed = (values >= threshold).nonzero()[0]
            if len(passed) >= k:
                self.passed = passed
                some = values[passed]  # a copy: partitioned in place
        if some is None:
            some = values.copy()
        n = len(some)
        some.partition(n - k)
        self.kth = some[n - k]

    def at_least(self, floor: Any) -> np.ndarray:
        """The positions (ascending) of the values ≥ `floor`."""
        if self.passed is not None and floor >= self.threshold:
            return self.passed[self.values[self.passed] >= floor]  # type: ignore[no-any-return]
        return (self.values >= floor).nonzero()[0]  # type: ignore[no-any-return]


def _best(scores: np.ndarray, rows: np.ndarray, rank_of: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest `scores`, equal scores taken by their row's rank (lowest
    first); unordered."""
    n = len(scores)
    if k >= n:
        return np.arange(n)
    if k <= 0:
        return _EMPTY
    thresholds = _thresholds(scores[None, :], k)
    top = _Top(scores, k, None if thresholds is None else thresholds[0])
    kth = top.kth
    at_least = top.at_least(kth)
    if len(at_least) == k:
        return at_least  # no score equal to the k-th is left out: no tie to break
    held = scores[at_least]
    above = at_least[held > kth]
    ties = at_least[held == kth]
    need = k - len(above)
    # the `need` ties of lowest rank (ranks are distinct: a partition finds the same ones)
    ties = ties[rank_of[rows[ties]].argpartition(need - 1)[:need]]
    return np.concatenate((above, ties))
