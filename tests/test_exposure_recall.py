"""The exposure ranker's recall and its edges: the union of the dense and the lexical list, tools
named in the request, Unicode queries, queries with no terms, very long queries, and batches
(`expose_many`) that rank exactly as one query at a time.

Dense scores come from the bag-of-words stand-in of tests/test_exposure.py.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
from harnessc.runtime.exposure.lexical import LexicalIndex, fold, tokenize
from harnessc.runtime.exposure.ranker import QUERY_CAP, ExposureIndex, ToolDoc, tool_docs
from harnessc.runtime.model import Rank
from hypothesis import given
from hypothesis import strategies as st

from .test_exposure import IDS, TOOLS, bag_embedder, build

# ---------------------------------------------------------------------------------------------
# Union recall


def test_a_tool_only_the_lexical_list_finds_reaches_the_rerank_and_is_exposed() -> None:
    index = build(TOOLS[:-1])
    # a query vector that points at the weather: the dense top 2 are weather-like tools
    weather = bag_embedder("weather forecast city")
    query = "revert the deployed change"
    rank = Rank(top=2)
    dense = index.expose(
        IDS[:-1], query, limit=2, rank=Rank(top=2, rerank="dense"), query_vector=weather
    )
    assert "change.revert" not in {c.tool for c in dense.trace.candidates}
    union = index.expose(IDS[:-1], query, limit=2, rank=rank, query_vector=weather)
    reverts = [c for c in union.trace.candidates if c.tool == "change.revert"]
    assert reverts and reverts[0].recalled_by == ("lexical",)
    assert reverts[0].dense is not None and reverts[0].lexical is not None
    assert "change.revert" in union.tools
    # every candidate says which list brought it
    assert all(c.recalled_by for c in union.trace.candidates)


def test_lexical_only_rows_are_scored_exactly_as_the_dense_ones() -> None:
    index = build(embedder=bag_embedder)
    result = index.expose(IDS, "post a message to slack", limit=3)
    matrix = np.stack([bag_embedder(d.embedding_text()) for d in tool_docs(TOOLS)])
    rows = {d.row: i for i, d in enumerate(tool_docs(TOOLS))}
    q = bag_embedder("post a message to slack")
    for c in result.trace.candidates:
        assert c.dense == pytest.approx(float(matrix[rows[c.row]] @ q), abs=1e-5)


# ---------------------------------------------------------------------------------------------
# A tool named in the request


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_a_tool_named_by_id_is_exposed_first_and_the_trace_says_why(mode: str) -> None:
    index = build(embedder=bag_embedder)
    query = "send the weekly numbers by email, then run db.query on the sales table"
    result = index.expose(IDS, query, limit=3, rank=Rank(rerank=mode))
    assert result.tools[0] == "db.query"
    assert result.trace.named == ("db.query",)
    first = result.trace.candidates[0]
    assert first.tool == "db.query" and "named" in first.recalled_by and first.exposed
    assert any("`db.query` is named in the request" in n for n in result.trace.notes)


def test_a_tool_named_by_wire_name_counts_and_punctuation_around_it_does_not_matter() -> None:
    index = build(embedder=bag_embedder)
    for query in (
        "weather: please call `stock_price`.",
        "use stock_price, then the weather",
        "(stock_price) for the weather",
    ):
        result = index.expose(IDS, query, limit=2)
        assert result.tools[0] == "stock.price", query
        assert result.trace.named == ("stock.price",)


def test_named_tools_outside_p_are_never_exposed() -> None:
    index = build(embedder=bag_embedder)
    available = {t: t != "db.query" or "database is down" for t in IDS}
    public = [t for t in IDS if t != "stock.price"]
    result = index.expose(
        public, "run db.query and stock.price for me", limit=3, available=available
    )
    assert not {"db.query", "stock.price"} & set(result.tools)
    assert result.trace.named == ()
    assert any(
        "`db.query` is named in the request but not available" in n for n in result.trace.notes
    )


def test_a_plain_word_that_is_also_a_tool_name_is_read_as_a_word() -> None:
    tools = [*TOOLS, *build_tools(("record", "Keep a record of an incident."))]
    ids = [t.id for t in tools]
    result = build(tools, embedder=bag_embedder).expose(ids, "what is the weather record", limit=3)
    assert result.trace.named == ()


def build_tools(*specs: tuple[str, str]) -> list:
    from .test_exposure import make_tool

    return [make_tool(tool_id, summary, ()) for tool_id, summary in specs]


# ---------------------------------------------------------------------------------------------
# Unicode


def test_tokens_of_every_script() -> None:
    assert tokenize("Créer un fichier") == ["creer", "un", "fichier"]
    assert tokenize("Crème BRÛLÉE") == tokenize("creme brulee")
    assert tokenize("Отправить письмо") == ["отправить", "письмо"]
    assert tokenize("Ёлка") == tokenize("елка")
    assert tokenize("发送电子邮件") == ["发送", "送电", "电子", "子邮", "邮件"]
    assert tokenize("天") == ["天"]
    assert tokenize("ファイルを開く") == ["ファ", "ァイ", "イル", "ルを", "を開", "開く"]
    assert tokenize("Straße") == tokenize("STRASSE")
    assert tokenize("ｆｉｌｅ") == tokenize("file")  # full-width forms
    assert tokenize("getUserName") == ["get", "user", "nam"]
    assert tokenize("ÜberPrüfung") == ["uber", "prufung"]
    assert tokenize("हिन्दी फ़ाइल") == ["हिन्दी", "फ़ाइल"]  # vowel signs stay in their word


def test_unicode_queries_match_tools_written_in_their_language() -> None:
    docs = [
        {"id": "mail.send", "summary": "发送电子邮件给同事"},
        {"id": "file.open", "summary": "Открыть файл в редакторе"},
        {"id": "cafe.order", "summary": "Commander un café crème"},
        {"id": "weather", "summary": "Get the weather forecast"},
    ]
    index = LexicalIndex(docs)
    for query, expected in (
        ("请发送一封电子邮件", 0),
        ("открыть файл", 1),
        ("OTKRYT", None),
        ("commander un cafe creme", 2),
        ("COMMANDER UN CAFÉ", 2),
    ):
        scores = index.scores(query)
        if expected is None:
            assert not scores.any()
        else:
            assert int(scores.argmax()) == expected and scores[expected] > 0, query


@given(st.text(max_size=60))
def test_tokens_are_folded_words_whatever_the_text(text: str) -> None:
    tokens = tokenize(text)
    for token in tokens:
        assert token and token == token.casefold()
        assert not any(ch.isspace() or ch in "_.,:;!?" for ch in token)
    # composed or decomposed, the same text gives the same terms
    assert tokenize(unicodedata.normalize("NFD", text)) == tokens
    assert tokenize(unicodedata.normalize("NFC", text)) == tokens
    assert tokenize(fold(text)) == tokens


# ---------------------------------------------------------------------------------------------
# Queries with no terms, and long ones


@pytest.mark.parametrize("query", ["", "   ", "what can you do for me?", "?!…", "the a an"])
def test_a_query_without_terms_exposes_the_surface_order_and_says_so(query: str) -> None:
    index = build(embedder=bag_embedder)
    public = IDS[::-1]
    available = {t: t != public[0] or "off" for t in IDS}
    result = index.expose(public, query, limit=4, available=available)
    assert result.tools == tuple(public[1:5])  # P in the surface's order, first `limit`
    assert result.trace.rule == "order"
    assert any("the first `limit` tools of the surface" in n for n in result.trace.notes)
    assert [c.position for c in result.trace.candidates] == [1, 2, 3, 4]


def test_a_long_query_is_capped_for_ranking_and_for_the_trace() -> None:
    index = build(embedder=bag_embedder)
    query = "send an email to the team " * 4_000  # 104,000 characters
    result = index.expose(IDS, query, limit=3)
    trace = result.trace
    assert trace.query == query[:QUERY_CAP] and trace.query_chars == len(query)
    assert any(f"read the first {QUERY_CAP:,}" in n for n in trace.notes)
    assert result.tools[0] == "mail.send"
    assert len(json.dumps(trace.to_dict())) < 2 * QUERY_CAP + 20_000
    short = index.expose(IDS, "send an email", limit=3).trace
    assert short.query_chars == len("send an email") and not short.notes


def test_the_query_the_embedder_sees_is_capped_too() -> None:
    seen: list[str] = []

    def embedder(text: str) -> np.ndarray:
        seen.append(text)
        return bag_embedder(text)

    build(embedder=embedder).expose(IDS, "x" * 50_000 + " email", limit=3)
    assert seen == ["x" * QUERY_CAP]


# ---------------------------------------------------------------------------------------------
# Batches


def test_expose_many_equals_a_loop_of_expose() -> None:
    index = build(embedder=bag_embedder)
    queries = [
        "send an email",
        "",
        "deploy the change to production",
        "run db.query now",
        "天气预报",
        "the a",
        "search code on github " * 200,
    ]
    for rank in (Rank(), Rank(rerank="dense"), Rank(recall="lexical", top=5)):
        many = index.expose_many(IDS, queries, limit=4, rank=rank)
        one = [index.expose(IDS, q, limit=4, rank=rank) for q in queries]
        assert [e.tools for e in many] == [e.tools for e in one]
        assert [e.trace.to_dict() for e in many] == [e.trace.to_dict() for e in one]


WORDS = [
    "send",
    "email",
    "deploy",
    "change",
    "search",
    "code",
    "file",
    "weather",
    "price",
    "the",
    "ticket",
    "run",
    "query",
    "邮件",
    "файл",
]


@st.composite
def batches(draw: st.DrawFn) -> tuple[ExposureIndex, list[str], list[str], Rank, int, np.ndarray]:
    n = draw(st.integers(3, 40))
    dim = 8
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    texts = [" ".join(draw(st.lists(st.sampled_from(WORDS), max_size=5))) for _ in range(n)]
    docs = [ToolDoc(id=f"t{i}.op", row=f"t{i}.op", summary=t) for i, t in enumerate(texts)]
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    # repeated rows: equal dense scores, broken by the row key
    for i in draw(st.lists(st.integers(1, n - 1), max_size=3)):
        matrix[i] = matrix[i - 1]
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    index = ExposureIndex(docs, matrix, [d.row for d in docs])
    public = draw(st.permutations([d.id for d in docs]))[: draw(st.integers(1, n))]
    queries = draw(
        st.lists(
            st.one_of(
                st.lists(st.sampled_from([*WORDS, "t1.op", "t2.op"]), max_size=6).map(" ".join),
                st.text(max_size=10),
            ),
            min_size=1,
            max_size=6,
        )
    )
    rank = Rank(
        recall=draw(st.sampled_from(["embedding", "lexical"])),
        rerank=draw(st.sampled_from(["hybrid", "dense", "lexical"])),
        top=draw(st.integers(1, 12)),
    )
    vectors = rng.standard_normal((len(queries), dim)).astype(np.float32)
    return index, public, queries, rank, draw(st.integers(1, 8)), vectors


@given(batches())
def test_expose_many_equals_expose_for_any_batch(
    batch: tuple[ExposureIndex, list[str], list[str], Rank, int, np.ndarray],
) -> None:
    index, public, queries, rank, limit, vectors = batch
    many = index.expose_many(public, queries, limit=limit, rank=rank, query_vectors=vectors)
    for q, v, got in zip(queries, vectors, many, strict=True):
        one = index.expose(public, q, limit=limit, rank=rank, query_vector=v)
        assert got.tools == one.tools
        assert got.trace.to_dict() == one.trace.to_dict()
        assert set(got.tools) <= set(public) and len(got.tools) == min(limit, len(public))
        # deterministic: a second run gives the same
        assert index.expose(public, q, limit=limit, rank=rank, query_vector=v).trace == one.trace


def test_a_batch_ranks_as_single_queries_where_blas_sums_differently() -> None:
    # a batched product (gemm) and a single one (gemv) differ in the last bits of most scores
    # at this size; ranking by exact rescoring makes the results identical anyway
    rng = np.random.default_rng(7)
    n, dim = 3_000, 384
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    words = [f"{a}{b}" for a in "bcdfg" for b in ("ar", "el", "ix", "on", "um")]
    docs = [
        ToolDoc(id=f"tool.n{i}", row=f"tool.n{i}", summary=" ".join(rng.choice(words, 8)))
        for i in range(n)
    ]
    index = ExposureIndex(docs, matrix, [d.row for d in docs])
    vectors = rng.standard_normal((16, dim)).astype(np.float32)
    queries = [" ".join(rng.choice(words, 3)) for _ in range(16)]
    batched = vectors @ matrix.T
    assert (batched[0] != matrix @ vectors[0]).any()  # the premise: the sums differ
    many = index.expose_many(index.tool_ids, queries, query_vectors=vectors)
    for q, v, got in zip(queries, vectors, many, strict=True):
        one = index.expose(index.tool_ids, q, query_vector=v)
        assert got.tools == one.tools
        assert got.trace.to_dict() == one.trace.to_dict()


@pytest.mark.parametrize("dim", [7, 37, 100, 384, 385])
def test_a_rows_rescored_value_does_not_depend_on_the_rows_scored_with_it(dim: int) -> None:
    rng = np.random.default_rng(dim)
    matrix = rng.standard_normal((300, dim)).astype(np.float32)
    docs = [ToolDoc(id=f"t{i}", row=f"t{i}") for i in range(300)]
    index = ExposureIndex(docs, matrix)
    q = rng.standard_normal(dim).astype(np.float32)
    for _ in range(10):
        rows = np.sort(rng.choice(300, int(rng.integers(1, 120)), replace=False))
        together = index._exact(rows, q)
        for i, row in enumerate(rows.tolist()):
            assert index._exact(np.array([row]), q)[0] == together[i]
            assert index._exact(rows[i:], q)[0] == together[i]


@pytest.mark.parametrize("layout", ["random", "sample_highest", "ties", "ascending", "descending"])
def test_the_rows_near_the_kth_score_and_the_k_best_are_exact_whatever_the_order(
    layout: str,
) -> None:
    # the k-th highest is found from a sample's threshold; scores laid out so that the sample
    # holds the highest (fewer than k pass it), or all tied, must give the same rows
    from harnessc.runtime.exposure.ranker import _best, _near_many

    rng = np.random.default_rng(3)
    n, k, slack = 4_000, 60, 1e-3
    scores = rng.standard_normal((3, n)).astype(np.float32)
    if layout == "sample_highest":
        scores[:, ::8] += 10.0
    elif layout == "ties":
        scores = np.round(scores, 1)
    elif layout == "ascending":
        scores.sort(axis=1)
    elif layout == "descending":
        scores = -np.sort(scores, axis=1)
    rank_of = rng.permutation(n)
    for row, near in zip(scores, _near_many(scores, k, slack, None), strict=True):
        floor = np.float32(float(np.sort(row)[n - k]) - slack)
        assert near is not None and near.tolist() == np.flatnonzero(row >= floor).tolist()
        lexical = row.astype(np.float64)
        by_score_then_rank = np.lexsort((rank_of, -lexical))[:k]
        got = _best(lexical, np.arange(n), rank_of, k)
        assert sorted(got.tolist()) == sorted(by_score_then_rank.tolist())
