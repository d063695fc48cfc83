"""Dense ranking with the real all-MiniLM-L6-v2 model, loaded offline (the `embed` extra).

CI installs the extra (scripts/setup.sh), so these run there; without it they are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from harnessc.compiler.embed import compute_tool_embeddings
from harnessc.runtime.exposure.embedding import QueryEmbedder, embedding_status, load_query_embedder
from harnessc.runtime.exposure.ranker import ExposureIndex, tool_docs
from harnessc.runtime.model import Rank

from .test_exposure import IDS, TOOLS

_ok, _why = embedding_status()
pytestmark = pytest.mark.skipif(not _ok, reason=f"the embed extra is not installed ({_why})")


@pytest.fixture(scope="module")
def embedder() -> QueryEmbedder:
    return load_query_embedder()


@pytest.fixture(scope="module")
def built(
    embedder: QueryEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> tuple[np.ndarray, list[str]]:
    return compute_tool_embeddings(TOOLS, cache_dir=tmp_path_factory.mktemp("cache"))


def test_model_loads_offline_on_one_torch_thread(embedder: QueryEmbedder) -> None:
    import torch

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert torch.get_num_threads() == 1
    vector = embedder("open a pull request")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


def test_build_embeddings_are_normalised_and_deterministic(
    built: tuple[np.ndarray, list[str]], tmp_path: Path
) -> None:
    matrix, ids = built
    assert matrix.shape == (len(tool_docs(TOOLS)), 384) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    fresh, fresh_ids = compute_tool_embeddings(TOOLS, cache_dir=tmp_path)  # no cache: recomputed
    assert fresh_ids == ids
    assert fresh.tobytes() == matrix.tobytes()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ship the release to the prod environment", "production.deploy"),
        ("what will the weather be like in Paris tomorrow", "weather.forecast"),
        ("write an e-mail to my manager", "mail.send"),
        ("how much is a share of AAPL right now", "stock.price"),
        ("look for known CVEs in this repo", "scanner.scan"),
    ],
)
@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_dense_ranking_finds_paraphrased_requests(
    embedder: QueryEmbedder,
    built: tuple[np.ndarray, list[str]],
    query: str,
    expected: str,
    mode: str,
) -> None:
    index = ExposureIndex.from_tools(TOOLS, *built, embedder=embedder)
    result = index.expose(IDS, query, limit=3, rank=Rank(rerank=mode))
    assert result.tools[0] == expected
    assert result.trace.recall == "embedding" and result.trace.rerank == mode
    assert result.trace.notes == ()
    assert result.trace.candidates[0].dense is not None


def test_one_query_matches_the_batch_encoder_and_the_product_matches_numpy(
    embedder: QueryEmbedder, built: tuple[np.ndarray, list[str]]
) -> None:
    matrix, _ = built
    texts = [
        "deploy the patch to production",
        "what is the weather in Paris tomorrow?",
        "x",
        # longer than the model's 256-token window: truncated the same way on both paths
        " ".join(f"step {i}: rotate the credentials of service-{i} and verify" for i in range(60)),
    ]
    batch = embedder.embed(texts)
    for text, row in zip(texts, batch, strict=True):
        vector = embedder(text)
        assert np.allclose(vector, row, atol=1e-5)
        assert np.allclose(embedder.scores(matrix, vector), matrix @ vector, atol=1e-5)
    view = matrix[::2]  # not contiguous: copied, not refused
    assert np.allclose(embedder.scores(view, batch[0]), view @ batch[0], atol=1e-5)


def test_exposure_with_the_loaded_embedder_equals_numpy_ranking(
    embedder: QueryEmbedder, built: tuple[np.ndarray, list[str]]
) -> None:
    query = "ship the release to the prod environment"
    in_torch = ExposureIndex.from_tools(TOOLS, *built, embedder=embedder)
    in_numpy = ExposureIndex.from_tools(TOOLS, *built)
    qv = embedder(query)
    for rank in (Rank(), Rank(rerank="dense"), Rank(recall="lexical")):
        a = in_torch.expose(IDS, query, limit=5, rank=rank)
        b = in_numpy.expose(IDS, query, limit=5, rank=rank, query_vector=qv)
        assert a.tools == b.tools
        for x, y in zip(a.trace.candidates, b.trace.candidates, strict=True):
            assert (x.tool, x.lexical) == (y.tool, y.lexical)
            assert x.dense == pytest.approx(y.dense, abs=1e-5)


def test_torch_threads_are_set_deliberately(embedder: QueryEmbedder) -> None:
    import torch

    try:
        two = load_query_embedder(threads=2)
        assert torch.get_num_threads() == 2
        assert np.allclose(two("open a pull request"), embedder("open a pull request"), atol=1e-5)
        load_query_embedder()  # no `threads`: the setting stays as it is
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
