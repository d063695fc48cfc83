"""Build-time tool embeddings for the exposure index: MiniLM vectors, cached by each text's hash.

`compute_tool_embeddings(tools)` embeds the text of every index row (`runtime.exposure.
tool_docs`: one row per tool and per operation) and returns an L2-normalised float32 matrix with
the row ids. Each vector is cached under the SHA-256 of the model name and the row's text, so a
rebuild embeds only tools whose text changed. Texts are embedded one at a time: batching pads
texts to a common length, and padding changes the last bits of a vector, so a batch would make a
tool's vector depend on its neighbours; alone, a text always gives the same bytes.

Without the `embed` extra, `build_tool_embeddings` returns no matrix and a note that says the
exposure ranker will rank lexically; the build goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from harnessc.dsl.files import cache_folder
from harnessc.runtime.exposure.embedding import (
    MODEL_NAME,
    EmbeddingUnavailableError,
    load_query_embedder,
)
from harnessc.runtime.model import Tool
from harnessc.runtime.model.exposure import EMBEDDING_IDS_FILE, EMBEDDINGS_FILE, ToolDoc, tool_docs

__all__ = [
    "ProgressPrinter",
    "ToolEmbeddings",
    "build_tool_embeddings",
    "compute_doc_embeddings",
    "compute_tool_embeddings",
    "default_cache_dir",
    "save_tool_embeddings",
    "text_key",
]

TextEmbedder = Callable[[str], np.ndarray]
Progress = Callable[[int, int], None]
"""Called with (texts embedded, texts to embed): (0, N) before the model loads, then after each."""


def default_cache_dir() -> Path:
    """`embeddings` in harnessc's cache folder (`dsl/files.py` `cache_folder`)."""
    return cache_folder() / "embeddings"


def text_key(text: str, model: str = MODEL_NAME) -> str:
    """The cache key of one text: SHA-256 of the model name and the text."""
    return hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()


def compute_tool_embeddings(
    tools: Iterable[Tool],
    *,
    cache_dir: str | Path | None = None,
    embedder: TextEmbedder | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Embeddings of `tools`' index rows: (float32 matrix, L2-normalised rows; row ids).

    Raises `EmbeddingUnavailableError` without the embed extra (unless `embedder` is given).
    """
    docs = tool_docs(tools)
    return compute_doc_embeddings(docs, cache_dir=cache_dir, embedder=embedder, progress=progress)


def compute_doc_embeddings(
    docs: Sequence[ToolDoc],
    *,
    cache_dir: str | Path | None = None,
    embedder: TextEmbedder | None = None,
    model: str = MODEL_NAME,
    progress: Progress | None = None,
) -> tuple[np.ndarray, list[str]]:
    """Like `compute_tool_embeddings`, for index rows built by the caller."""
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    texts = [d.embedding_text() for d in docs]
    keys = [text_key(t, model) for t in texts]
    vectors: dict[str, np.ndarray] = {}
    missing: list[int] = []
    for i, key in enumerate(keys):
        if key in vectors:
            continue
        cached = _read(directory, key)
        if cached is None:
            missing.append(i)
        vectors[key] = cached  # type: ignore[assignment]
    if missing:
        report = progress or (lambda done, total: None)
        todo = list(dict.fromkeys(keys[i] for i in missing))  # the same text twice: once
        text_of = {keys[i]: texts[i] for i in missing}
        report(0, len(todo))
        embed = embedder or load_query_embedder()
        for done, key in enumerate(todo, 1):
            vector = _normalised(np.asarray(embed(text_of[key]), dtype=np.float32).reshape(-1))
            vectors[key] = vector
            _write(directory, key, vector)
            report(done, len(todo))
    if not docs:
        return np.zeros((0, 384), dtype=np.float32), []
    matrix = np.stack([vectors[k] for k in keys]).astype(np.float32, copy=False)
    return np.ascontiguousarray(matrix), [d.row for d in docs]


@dataclass(frozen=True)
class ToolEmbeddings:
    """The build's tool embeddings, or None and a note saying why ranking will be lexical."""

    matrix: np.ndarray | None
    ids: list[str]
    note: str | None = None


def build_tool_embeddings(
    tools: Iterable[Tool], *, cache_dir: str | Path | None = None, progress: Progress | None = None
) -> ToolEmbeddings:
    """`compute_tool_embeddings` for `harnessc build`: without the embed extra, a note instead
    of an error (the generated package then ranks lexically)."""
    try:
        matrix, ids = compute_tool_embeddings(tools, cache_dir=cache_dir, progress=progress)
    except EmbeddingUnavailableError as exc:
        return ToolEmbeddings(None, [], f"{exc}; exposure will rank tools lexically")
    return ToolEmbeddings(matrix, ids)


def save_tool_embeddings(directory: str | Path, matrix: np.ndarray, ids: Sequence[str]) -> None:
    """Write the matrix (`.npy`, float32) and its row ids (JSON) into a generated package;
    `runtime.exposure.load_tool_embeddings` reads them back."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / EMBEDDINGS_FILE, np.asarray(matrix, dtype=np.float32), allow_pickle=False)
    (out / EMBEDDING_IDS_FILE).write_text(json.dumps(list(ids), indent=0) + "\n", "utf-8")


def _normalised(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / np.float32(norm) if norm > 0 else vector


def _path(directory: Path, key: str) -> Path:
    return directory / key[:2] / f"{key}.npy"


def _read(directory: Path, key: str) -> np.ndarray | None:
    path = _path(directory, key)
    try:
        vector = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    return vector.astype(np.float32, copy=False) if vector.ndim == 1 else None


def _write(directory: Path, key: str, vector: np.ndarray) -> None:
    path = _path(directory, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.save(fh, vector, allow_pickle=False)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs time


class ProgressPrinter:
    """`harnessc build`'s report while it embeds: a bar redrawn in place on a terminal, plain
    lines otherwise (a CI log gets the start, about every tenth and the end)."""

    WIDTH = 30

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        if total <= 0:
            return
        if self.tty:
            filled = self.WIDTH * done // total
            bar = "#" * filled + "." * (self.WIDTH - filled)
            what = " (loading the model)" if done == 0 else ""
            line = f"embedding tool texts [{bar}] {done}/{total}{what}"
            end = "\n" if done == total else ""
            self.stream.write(f"\r{line:<{self.WIDTH + 60}}{end}")
        elif done == 0:
            self.stream.write(f"embedding {total} tool texts (the model loads first)\n")
        else:
            step = -(-total // 10)  # a tenth, rounded up
            if done == total or done // step != self.shown // step:
                self.stream.write(f"embedded {done}/{total}\n")
                self.shown = done
        self.stream.flush()
