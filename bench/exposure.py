"""Exposure ranker: retrieval quality on public BFCL data, and the speed of the top-20 rule.

    .venv/bin/pip install torch==2.13.0 && .venv/bin/pip install -e '.[embed]'   # MiniLM
    .venv/bin/pip install --no-deps bfcl-eval faiss-cpu     # bench only: never a dependency
    .venv/bin/python bench/exposure.py [--quality] [--speed] [--tune] [--repeat 200]
                                       [--torch-threads N] [--baseline CHECKOUT]

Quality: every distinct function of BFCL_v4_multiple, simple_python, simple_java,
simple_javascript and live_simple is pooled into one registry (one definition per name: BFCL
rewords a function's description between questions). Each question of those five files is a
query whose expected tool is its `possible_answer/` function; a hit is counted by tool name. The
table gives Recall@1/5/20 and MRR@20 for lexical (BM25 recall and rank), dense (MiniLM recall
and rank) and hybrid (dense ∪ lexical recall of 60 each, fused rerank), each run through
`ExposureIndex.expose` over the whole pool with limit 20, for all questions, the four tuning
files and the held-out file (live_simple: real users' requests, some not in English; never used
to choose a weight). "hybrid, tool named" asks every question again with "Use <expected
function> for this." in front. `--tune` sweeps the hybrid weight on the tuning files and shows
the held-out file beside it.

Speed: top-20 over 1,000 / 10,000 / 100,000 random unit vectors (dim 384), one query and a
batch of 64, numpy (product into a preallocated float32 output + argpartition + sort of the 20)
against faiss-cpu `IndexFlatIP`, median and best of --repeat. Then `ExposureIndex.expose` (64
queries one by one) and `expose_many` (the 64 as a batch) over the same matrices with
synthetic tool text, paired with numpy's product + argpartition, in wall-clock time with the
default threads and in the CPU time of the calling thread with BLAS on one thread (steady when
other processes share the cores), each beside `plain_rank`: the hybrid rule's steps that no
ranker of it can skip (dense and BM25 top 60, union, exact rescoring, fusion, one sort), done as
plainly as numpy allows, with none of the ranker's guarantees; then `ExposureIndex.from_tools`
for 10,000 tools (BFCL functions, repeated) with their embeddings given. Then the end-to-end
exposure of a 1,000-tool surface (the quality pool topped up with BFCL_v4_live_multiple
functions): MiniLM query embedding + ranking + trace over BFCL questions, the runtime's path
(the query-side product in torch's pool) and the product in numpy, in alternating blocks so
that both see the same load.
The thread settings used are printed first; `--torch-threads` overrides torch's (the runtime's
is `embedding.TORCH_THREADS`). `--baseline CHECKOUT` (a checkout of another commit, e.g. a
`git worktree`) adds that checkout's `ExposureIndex` to the paired runs of the `expose` (with
and without its trace dict) and `expose_many` tables, imported under another package name,
so both are timed side by side.
Tool embeddings are cached (compiler.embed) under $HARNESSC_CACHE_DIR or ~/.cache/harnessc, so
only the first run embeds the pool.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from harnessc.runtime.exposure import ranker as exposure_mod
from harnessc.runtime.exposure.ranker import ExposureIndex, ToolDoc
from harnessc.runtime.model import Rank

POOL_FILES = (
    "BFCL_v4_multiple.json",
    "BFCL_v4_simple_python.json",
    "BFCL_v4_simple_java.json",
    "BFCL_v4_simple_javascript.json",
    "BFCL_v4_live_simple.json",
)
QUESTION_FILES = (
    "BFCL_v4_multiple.json",
    "BFCL_v4_simple_python.json",
    "BFCL_v4_simple_java.json",
    "BFCL_v4_simple_javascript.json",
    "BFCL_v4_live_simple.json",
)
HELD_OUT = "BFCL_v4_live_simple.json"
"""Never looked at when choosing a weight (`--tune` picks on the other files): real users'
requests, some of them not in English, where the others are written by the benchmark's
authors."""
SPEED_EXTRA_FILE = "BFCL_v4_live_multiple.json"
"""Tops the pool up to the 1,000 tools of the end-to-end speed surface (not used for quality)."""
SURFACE_SIZE = 1_000
MORE_FUNCTION_FILES = (
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
    "BFCL_v4_live_parallel.json",
    "BFCL_v4_live_parallel_multiple.json",
    "BFCL_v4_irrelevance.json",
    "BFCL_v4_live_irrelevance.json",
)
"""With the pool's files, the functions the index-build timing repeats up to 10,000 tools."""
MODES = {
    "lexical": Rank(recall="lexical", rerank="lexical"),
    "dense": Rank(recall="embedding", rerank="dense"),
    "hybrid": Rank(),
}


# ---------------------------------------------------------------------------------------------
# Data


def bfcl_data_dir() -> Path:
    try:
        import bfcl_eval
    except ImportError:
        sys.exit(
            "bench/exposure.py needs the BFCL data: .venv/bin/pip install --no-deps bfcl-eval "
            "(a benchmark input only, not a harnessc dependency)"
        )
    return Path(bfcl_eval.__file__).parent / "data"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def function_doc(fn: dict) -> ToolDoc:
    props = (fn.get("parameters") or {}).get("properties") or {}
    arg_text = " ".join(f"{name}: {p.get('description', '')}".strip() for name, p in props.items())
    return ToolDoc(
        id=fn["name"],
        row=fn["name"],
        summary=fn.get("description", ""),
        args=tuple(props),
        arg_text=arg_text,
    )


def load_pool(data: Path, files: tuple[str, ...] = POOL_FILES) -> list[ToolDoc]:
    pool: dict[str, ToolDoc] = {}
    for name in files:
        for item in read_jsonl(data / name):
            for fn in item["function"]:
                pool.setdefault(fn["name"], function_doc(fn))
    return list(pool.values())


def load_questions(data: Path) -> list[tuple[str, str, str]]:
    """(file, query, expected tool) for every question of QUESTION_FILES."""
    out = []
    for name in QUESTION_FILES:
        answers = {a["id"]: a for a in read_jsonl(data / "possible_answer" / name)}
        for item in read_jsonl(data / name):
            turns = item["question"]
            query = " ".join(m["content"] for turn in turns for m in turn if m["role"] == "user")
            expected = next(iter(answers[item["id"]]["ground_truth"][0]))
            out.append((name, query, expected))
    return out


def pool_embeddings(docs: list[ToolDoc]) -> tuple[np.ndarray, list[str]]:
    from harnessc.compiler.embed import compute_doc_embeddings

    started = time.perf_counter()
    matrix, ids = compute_doc_embeddings(docs)
    print(
        f"tool embeddings: {matrix.shape[0]} x {matrix.shape[1]} in "
        f"{time.perf_counter() - started:.1f} s (cached by text hash)"
    )
    return matrix, ids


# ---------------------------------------------------------------------------------------------
# Quality


def evaluate(
    index: ExposureIndex,
    questions: list[tuple[str, str, str]],
    qvecs: np.ndarray,
    rank: Rank,
) -> dict[str, dict[str, float]]:
    ids = list(index.tool_ids)
    per_file: dict[str, list[int | None]] = {}
    for (name, query, expected), qv in zip(questions, qvecs, strict=True):
        tools = index.expose(ids, query, limit=20, rank=rank, query_vector=qv).tools
        pos = tools.index(expected) + 1 if expected in tools else None
        per_file.setdefault(name, []).append(pos)
        per_file.setdefault("all", []).append(pos)
        per_file.setdefault("held out" if name == HELD_OUT else "tuning files", []).append(pos)
    out = {}
    for name, positions in per_file.items():
        n = len(positions)
        out[name] = {
            "n": n,
            "R@1": sum(p == 1 for p in positions) / n,
            "R@5": sum(p is not None and p <= 5 for p in positions) / n,
            "R@20": sum(p is not None for p in positions) / n,
            "MRR@20": sum(1 / p for p in positions if p is not None) / n,
        }
    return out


def print_table(rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"{'method':<32}{'n':>6}{'R@1':>8}{'R@5':>8}{'R@20':>8}{'MRR@20':>8}")
    for label, m in rows:
        print(
            f"{label:<32}{int(m['n']):>6}{m['R@1']:>8.3f}{m['R@5']:>8.3f}"
            f"{m['R@20']:>8.3f}{m['MRR@20']:>8.3f}"
        )


State = tuple[ExposureIndex, list[tuple[str, str, str]], np.ndarray]


def setup() -> State:
    """The BFCL pool's index (with its cached embeddings), the questions and their vectors."""
    from harnessc.runtime.exposure.embedding import load_query_embedder

    data = bfcl_data_dir()
    docs = load_pool(data)
    questions = load_questions(data)
    matrix, ids = pool_embeddings(docs)
    embedder = load_query_embedder()
    qvecs = embedder.embed([q for _, q, _ in questions])
    index = ExposureIndex(docs, matrix, ids, embedder=embedder)
    return index, questions, qvecs


def quality(tune: bool) -> State:
    index, questions, qvecs = state = setup()
    missing = sum(expected not in index.tool_ids for _, _, expected in questions)
    files = ", ".join(f.removeprefix("BFCL_v4_") for f in QUESTION_FILES)
    print(
        f"\nBFCL pool: {len(index.docs)} distinct functions from {len(POOL_FILES)} files; "
        f"{len(questions)} questions from {files} ({missing} expected tools missing from the "
        f"pool); held out from tuning: {HELD_OUT.removeprefix('BFCL_v4_')}"
    )
    print("each method: ExposureIndex.expose over the whole pool, limit 20\n")
    rows = []
    for mode, rank in MODES.items():
        result = evaluate(index, questions, qvecs, rank)
        for part in ("all", "tuning files", "held out"):
            rows.append((f"{mode} {part}", result[part]))
    # the same questions with the expected function named in the request, as a user who knows
    # the tool would write it: a named tool should come first
    named = [(f, f"Use {expected} for this. {q}", expected) for f, q, expected in questions]
    from harnessc.runtime.exposure.embedding import load_query_embedder

    named_vecs = load_query_embedder().embed([q for _, q, _ in named])
    rows.append(("hybrid, tool named", evaluate(index, named, named_vecs, MODES["hybrid"])["all"]))
    print_table(rows)
    if tune:
        print("\nhybrid weight sweep (dense weight; lexical gets the rest):")
        chosen = exposure_mod.HYBRID_DENSE_WEIGHT
        sweep = []
        for w in (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
            exposure_mod.HYBRID_DENSE_WEIGHT = w
            result = evaluate(index, questions, qvecs, MODES["hybrid"])
            for name in ("tuning files", "held out"):
                sweep.append((f"w={w} {name}", result[name]))
        exposure_mod.HYBRID_DENSE_WEIGHT = chosen
        print_table(sweep)
    return state


# ---------------------------------------------------------------------------------------------
# Speed


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, best) in microseconds."""
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6, min(times) * 1e6


def top20_one(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    scores = matrix @ q
    n = len(scores)
    idx = np.argpartition(scores, n - 20)[n - 20 :]
    return idx[np.argsort(-scores[idx], kind="stable")]


def top20_batch(matrix: np.ndarray, queries: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Top 20 per query: one float32 product into the preallocated (queries × tools) `out`,
    `argpartition` along each row (the 20 largest, no negated copy), then a sort of the 20."""
    np.dot(queries, matrix.T, out=out)
    n = out.shape[1]
    idx = np.argpartition(out, n - 20, axis=1)[:, n - 20 :]
    part = np.take_along_axis(out, idx, axis=1)
    return np.take_along_axis(idx, np.argsort(-part, axis=1, kind="stable"), axis=1)


def thread_settings() -> str:
    """The thread pools this process runs with: torch's, the BLAS and OpenMP libraries loaded
    (threadpoolctl, when installed: it comes with sentence-transformers), the variables."""
    parts = []
    if "torch" in sys.modules:
        import torch

        parts.append(f"torch intra-op {torch.get_num_threads()}")
    try:
        from threadpoolctl import threadpool_info

        for i in threadpool_info():  # named by the package that ships the library
            folder = Path(i["filepath"]).parent  # numpy.libs/…, torch/lib/…
            libs = folder.name.endswith(".libs")
            owner = folder.name.removesuffix(".libs") if libs else folder.parent.name
            arch = f" {i['architecture']}" if i.get("architecture") else ""
            parts.append(f"{i['internal_api']}{arch} ({owner}) {i['num_threads']}")
    except ImportError:
        parts.append("threadpoolctl not installed")
    variables = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
    set_vars = [f"{v}={os.environ[v]}" for v in variables if v in os.environ]
    parts.append(" ".join(set_vars) or "no thread variables set")
    return "; ".join(parts)


def speed(repeat: int, quality_state: State | None, baseline: Any = None) -> None:
    try:
        import faiss
    except ImportError:
        faiss = None
        print("faiss-cpu is not installed: .venv/bin/pip install --no-deps faiss-cpu")
    print(f"\nspeed: top-20 of random unit vectors, dim 384, median (best) of {repeat} runs, µs")
    print(f"threads: {thread_settings()}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    # numpy runs first, for every size, before faiss starts its OpenMP pool: faiss's threads
    # keep spinning after a search and slow whatever runs next on these two cores
    rng = np.random.default_rng(0)
    data = {}
    for n in (1_000, 10_000, 100_000):
        matrix = rng.standard_normal((n, 384), dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        queries = rng.standard_normal((64, 384), dtype=np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        data[n] = (matrix, queries, max(5, repeat // (10 if n >= 100_000 else 1)))
    cells: dict[int, list] = {}
    for n, (matrix, queries, reps) in data.items():
        q = queries[0].copy()
        out = np.empty((len(queries), n), dtype=np.float32)
        cells[n] = [
            timed(lambda m=matrix, v=q: top20_one(m, v), reps),
            None,
            timed(lambda m=matrix, v=queries, o=out: top20_batch(m, v, o), max(5, reps // 4)),
            None,
        ]
        try:  # the same on one BLAS thread: steadier when other processes share the cores
            from threadpoolctl import threadpool_limits

            with threadpool_limits(1):
                cells[n].append(timed(lambda m=matrix, v=q: top20_one(m, v), reps))
                cells[n].append(
                    timed(
                        lambda m=matrix, v=queries, o=out: top20_batch(m, v, o),
                        max(5, reps // 4),
                    )
                )
        except ImportError:
            cells[n] += [None, None]
        expected = np.stack([top20_one(matrix, v) for v in queries])
        assert (top20_batch(matrix, queries, out) == expected).all(), "batch and one disagree"
    if faiss is not None:
        for n, (matrix, queries, reps) in data.items():
            q = queries[0].copy()
            flat = faiss.IndexFlatIP(384)
            flat.add(matrix)
            cells[n][1] = timed(lambda f=flat, v=q[None, :]: f.search(v, 20), reps)
            cells[n][3] = timed(lambda f=flat, v=queries: f.search(v, 20), max(5, reps // 4))
            same = set(flat.search(q[None, :], 20)[1][0]) == set(top20_one(matrix, q).tolist())
            assert same, "numpy and faiss disagree on the top 20"
    print(
        f"{'tools':>8}{'numpy 1':>18}{'faiss 1':>18}{'numpy 64':>20}{'faiss 64':>20}"
        f"{'numpy 1, 1 thr':>18}{'numpy 64, 1 thr':>20}"
    )
    for n, row in cells.items():
        t = [f"{c[0]:,.0f} ({c[1]:,.0f})" if c else "-" for c in row]
        print(f"{n:>8,}{t[0]:>18}{t[1]:>18}{t[2]:>20}{t[3]:>20}{t[4]:>18}{t[5]:>20}")

    exposure_speed(data, baseline)
    questions = quality_state[1] if quality_state else load_questions(bfcl_data_dir())
    end_to_end(questions, repeat)


def made_up_word(i: int) -> str:
    """A word of letters only (the tokenizer splits letters from digits), one per number."""
    letters = ""
    while True:
        i, r = divmod(i, 26)
        letters += "bcdfghjklmnpqrstvwxzaeiouy"[r]
        if i == 0:
            return "q" + letters + "x"


def synthetic_docs(n: int, rng: np.random.Generator) -> list[ToolDoc]:
    """`n` tool rows with text drawn from a Zipf-like vocabulary of 5,000 made-up words (BM25
    then sees common and rare terms as in real descriptions)."""
    vocab = np.array([made_up_word(i) for i in range(5_000)])
    p = 1.0 / np.arange(1, 5_001)
    p /= p.sum()
    words = vocab[rng.choice(5_000, size=(n, 24), p=p)]
    return [
        ToolDoc(
            id=f"{made_up_word(i % 97)}.{made_up_word(i)}",
            row=f"{made_up_word(i % 97)}.{made_up_word(i)}",
            summary=" ".join(w[:16]),
            arg_text=" ".join(w[16:]),
            args=("target", "limit"),
        )
        for i, w in enumerate(words)
    ]


def paired(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
    per: int = 1,
) -> dict[str, tuple[float, float]]:
    """(median, best) µs of each function (divided by `per`), run in turn within every
    repetition, so that all of them see the same load."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            started = clock()
            fn()
            times[name].append((clock() - started) / per)
    return {k: (statistics.median(v) * 1e6, min(v) * 1e6) for k, v in times.items()}


def expose_loop(
    index: ExposureIndex, public: tuple[str, ...], texts: list[str], query_vectors: np.ndarray
) -> list:
    """A batch as a loop of `expose` (for a runtime without `expose_many`)."""
    return [
        index.expose(public, t, query_vector=v) for t, v in zip(texts, query_vectors, strict=True)
    ]


def expose_one(index: ExposureIndex, public: tuple[str, ...], text: str, q: np.ndarray) -> object:
    """One exposure, its trace left as the ranker made it."""
    return index.expose(public, text, query_vector=q)


def expose_traced(index: ExposureIndex, public: tuple[str, ...], text: str, q: np.ndarray) -> dict:
    """One exposure with its whole trace made into plain data, as a session logs it."""
    return index.expose(public, text, query_vector=q).trace.to_dict()


def plain_rank(index: ExposureIndex, text: str, q: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The steps the hybrid rule cannot do without, from a query's approximate `scores`, as
    plainly as numpy does them: the dense top 60 (`top_rows`), the query's terms and the
    BM25 top 60 from their postings, the union, the exact dense score of each row of it (the
    same per-row `einsum` as the ranker), both lists z-normalised and fused, one `lexsort`,
    the first 20. No availability, no ties broken by row key, no dedupe by tool, no tool named
    in the request, no trace: what `expose` does beyond this is the price of its guarantees.
    A yardstick for the ranker's own cost, not a ranker to use: `expose` costs what this
    costs, give or take, and the batch less (one partition of samples for all the queries)."""
    assert index.matrix is not None
    k = 60
    near = top_rows(scores, k)
    docs, bm25, _ = index.lexical.match_all(index.lexical.terms(text))
    lexical_list = docs[top_rows(bm25, k)] if len(docs) > k else docs
    cand = np.union1d(near, lexical_list)
    dense = np.einsum("ij,j->i", index.matrix.take(cand, axis=0), q).astype(np.float64)
    lexical = np.zeros(len(cand))
    at = np.searchsorted(docs, cand).clip(0, max(len(docs) - 1, 0))
    if len(docs):
        hit = docs[at] == cand
        lexical[hit] = bm25[at[hit]]
    fused = 0.6 * (dense - dense.mean()) / (dense.std() or 1.0)
    fused += 0.4 * (lexical - lexical.mean()) / (lexical.std() or 1.0)
    return cand[np.lexsort((cand, -fused))[:20]]


def top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """The k highest of `scores`, unordered: a threshold from every eighth score, then a
    partition of the few hundred that pass it (a partition of all of them costs more)."""
    n = len(scores)
    if n < 16 * k:
        return np.argpartition(scores, n - k)[n - k :]
    sample = scores[::8].copy()
    j = 2 * -(-k // 8) + 8
    sample.partition(len(sample) - j)
    passed = (scores >= sample[len(sample) - j]).nonzero()[0]
    if len(passed) < k:
        return np.argpartition(scores, n - k)[n - k :]
    return passed[np.argpartition(scores[passed], len(passed) - k)[len(passed) - k :]]


def plain_one(index: ExposureIndex, text: str, q: np.ndarray) -> np.ndarray:
    """`plain_rank` of one query after its own product (a matrix-vector product, as
    `expose`)."""
    assert index.matrix is not None
    return plain_rank(index, text, q, index.matrix @ q)


def plain_many(index: ExposureIndex, texts: list[str], queries: np.ndarray) -> list:
    """`plain_rank` of each query after one matrix product for the batch (as `expose_many`)."""
    assert index.matrix is not None
    products = queries @ index.matrix.T
    return [plain_rank(index, t, q, p) for t, q, p in zip(texts, queries, products, strict=True)]


def loop(fn: Callable[..., object], *args_lists: object) -> Callable[[], None]:
    """Call `fn` once per item of the zipped argument lists."""
    rows = list(zip(*args_lists, strict=True))  # type: ignore[call-overload]

    def run() -> None:
        for row in rows:
            fn(*row)

    return run


def load_baseline(checkout: str) -> Any:
    """The `harnessc.runtime.exposure.ranker` module of another checkout, imported as the package
    `harnessc_baseline` (its relative imports stay inside that checkout)."""
    root = Path(checkout).resolve()
    name = "harnessc_baseline"
    package = types.ModuleType(name)
    package.__path__ = [str(root / "harnessc")]
    sys.modules[name] = package
    runtime = root / "runtime"
    spec = importlib.util.spec_from_file_location(
        f"{name}.runtime", runtime / "__init__.py", submodule_search_locations=[str(runtime)]
    )
    if spec is None or spec.loader is None:
        sys.exit(f"--baseline: no runtime package under {root}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{name}.runtime.exposure")


def exposure_speed(
    data: dict[int, tuple[np.ndarray, np.ndarray, int]], baseline: Any = None
) -> None:
    """`expose` and `expose_many` against numpy's product + argpartition on the same matrices,
    and the index build for 10,000 tools. Two tables: wall clock with numpy's default threads,
    then the CPU time of the calling thread with BLAS on one thread (steadier when other
    processes share the cores)."""
    rng = np.random.default_rng(1)
    cases = []
    for n, (matrix, queries, reps) in data.items():
        docs = synthetic_docs(n, rng)
        index = ExposureIndex(docs, matrix, [d.row for d in docs])
        base = None
        if baseline is not None:
            base_docs = [baseline.ToolDoc(**dataclasses.asdict(d)) for d in docs]
            base = baseline.ExposureIndex(base_docs, matrix, [d.row for d in docs])
        words = [made_up_word(i) for i in rng.integers(0, 400, size=(len(queries), 6)).ravel()]
        texts = [" ".join(words[i * 6 : (i + 1) * 6]) for i in range(len(queries))]
        cases.append((n, index, base, matrix, queries, texts, max(3, reps // 16)))
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    print(
        "\nExposureIndex against numpy on the same matrices: synthetic tool text, limit 20, "
        "hybrid (dense and lexical recall of 60 each, rescoring, rerank, dedupe); the 64 "
        "queries one by one (per query) and as one batch; median (best) µs, paired runs; "
        "`plain`: the ratio of the rule's unavoidable steps written plainly in numpy "
        "(`plain_rank`), without the ranker's guarantees"
    )
    exposure_table(cases, time.perf_counter, "wall clock, default threads")
    if threadpool_limits is not None:
        with threadpool_limits(1):
            exposure_table(cases, time.thread_time, "CPU time of this thread, BLAS on 1 thread")
    build_speed(data[10_000][0])


def exposure_table(cases: list, clock: Callable[[], float], title: str) -> None:
    print(f"\n{title}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with_base = any(case[2] is not None for case in cases)
    print(
        f"{'tools':>8}{'numpy 1':>16}{'expose':>16}{'ratio':>7}{'+ trace dict':>16}"
        + (f"{'baseline':>16}{'ratio':>7}{'+ trace dict':>16}" if with_base else "")
        + f"{'plain':>7}"
        + f"{'numpy 64':>18}{'expose_many 64':>18}{'ratio':>7}"
        + (f"{'baseline 64':>18}{'ratio':>7}" if with_base else "")
        + f"{'plain':>7}"
    )
    for n, index, base, matrix, queries, texts, reps in cases:
        public = index.tool_ids
        out = np.empty((len(queries), n), dtype=np.float32)
        vectors = list(queries)
        singles = {
            "numpy": loop(top20_one, [matrix] * len(vectors), vectors),
            "expose": loop(partial(expose_one, index, public), texts, vectors),
            "trace": loop(partial(expose_traced, index, public), texts, vectors),
            "plain": loop(partial(plain_one, index), texts, vectors),
        }
        batches = {
            "numpy": partial(top20_batch, matrix, queries, out),
            "many": partial(index.expose_many, public, texts, query_vectors=queries),
            "plain": partial(plain_many, index, texts, queries),
        }
        if base is not None:
            singles["base"] = loop(partial(expose_one, base, base.tool_ids), texts, vectors)
            singles["base trace"] = loop(
                partial(expose_traced, base, base.tool_ids), texts, vectors
            )
            batch = getattr(base, "expose_many", None) or partial(expose_loop, base)
            batches["base"] = partial(batch, base.tool_ids, texts, query_vectors=queries)
        one = paired(singles, reps, clock, per=len(vectors))
        many = paired(batches, max(3, reps), clock)
        cell = {k: f"{v[0]:,.0f} ({v[1]:,.0f})" for k, v in one.items()}
        cell_many = {k: f"{v[0]:,.0f} ({v[1]:,.0f})" for k, v in many.items()}
        line = (
            f"{n:>8,}{cell['numpy']:>16}{cell['expose']:>16}"
            f"{one['expose'][0] / one['numpy'][0]:>7.2f}{cell['trace']:>16}"
        )
        if base is not None:
            line += (
                f"{cell['base']:>16}{one['base'][0] / one['numpy'][0]:>7.2f}"
                f"{cell['base trace']:>16}"
            )
        line += f"{one['plain'][0] / one['numpy'][0]:>7.2f}"
        line += (
            f"{cell_many['numpy']:>18}{cell_many['many']:>18}"
            f"{many['many'][0] / many['numpy'][0]:>7.2f}"
        )
        if base is not None:
            line += f"{cell_many['base']:>18}{many['base'][0] / many['numpy'][0]:>7.2f}"
        line += f"{many['plain'][0] / many['numpy'][0]:>7.2f}"
        print(line)


def build_speed(matrix: np.ndarray) -> None:
    """`ExposureIndex.from_tools` for 10,000 tools with their embeddings given: BFCL's
    functions (every file), repeated under new ids up to 10,000, as `Tool`s."""
    from harnessc.runtime.model import Field, Schema, Tool, Type

    data = bfcl_data_dir()
    functions: dict[str, dict] = {}
    for name in (*POOL_FILES, SPEED_EXTRA_FILE, *MORE_FUNCTION_FILES):
        for item in read_jsonl(data / name):
            for fn in item["function"]:
                functions.setdefault(fn["name"], fn)
    base = list(functions.values())
    tools = []
    for i in range(len(matrix)):
        fn = base[i % len(base)]
        props = (fn.get("parameters") or {}).get("properties") or {}
        fields = tuple(Field(name=str(p), type=Type(name="string")) for p in props)
        tool_id = fn["name"] if i < len(base) else f"{fn['name']}.copy{i // len(base)}"
        tools.append(
            Tool(
                id=tool_id,
                wire_name=tool_id.replace(".", "_"),
                summary=fn.get("description", ""),
                input=Schema(fields=fields),
            )
        )
    ids = [t.id for t in tools]
    times = []
    for _ in range(5):
        started = time.perf_counter()
        ExposureIndex.from_tools(tools, matrix, ids)
        times.append(time.perf_counter() - started)
    print(
        f"\nindex build, {len(tools):,} tools ({len(base):,} distinct BFCL functions, repeated), "
        f"embeddings given: median {statistics.median(times):.3f} s, best {min(times):.3f} s "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


def end_to_end(questions: list[tuple[str, str, str]], repeat: int) -> None:
    """Query embedding + ranking + trace on a 1,000-tool surface, the runtime's way (the product
    in the embedder's torch pool) and with the product in numpy, in alternating blocks."""
    from harnessc.runtime.exposure.embedding import load_query_embedder

    data = bfcl_data_dir()
    docs = load_pool(data, (*POOL_FILES, SPEED_EXTRA_FILE))[:SURFACE_SIZE]
    matrix, ids = pool_embeddings(docs)
    embedder = load_query_embedder()
    runtime_index = ExposureIndex(docs, matrix, ids, embedder=embedder)
    numpy_index = ExposureIndex(docs, matrix, ids)  # no embedder: the product runs in numpy
    surface = runtime_index.tool_ids  # a tuple, as a session passes its surface
    tokenizer = embedder.model.tokenizer
    texts = [q for _, q, _ in questions][: max(50, min(repeat, len(questions)))]
    tokens = [len(tokenizer(t)["input_ids"]) for t in texts]
    variants = {"runtime (product in torch)": runtime_index, "product in numpy": numpy_index}
    times: dict[str, tuple[list[float], list[float], list[float]]] = {
        name: ([], [], []) for name in variants
    }
    tokenize_t = []
    for text in texts:
        started = time.perf_counter()
        tokenizer([text], return_tensors="pt")
        tokenize_t.append(time.perf_counter() - started)
    # each variant runs all questions in a block (a numpy product leaves OpenBLAS's workers
    # spinning into whatever runs next), and the blocks alternate twice to share the load
    for _ in range(2):
        for name, index in variants.items():
            for text in texts[:5]:  # warm up
                index.expose(surface, text, limit=20, query_vector=embedder(text))
            embed_t, rank_t, total_t = times[name]
            for text in texts:
                t0 = time.perf_counter()
                qv = embedder(text)
                t1 = time.perf_counter()
                index.expose(surface, text, limit=20, query_vector=qv)
                t2 = time.perf_counter()
                embed_t.append(t1 - t0)
                rank_t.append(t2 - t1)
                total_t.append(t2 - t0)
    print(
        f"\nend-to-end exposure, {len(surface):,}-tool BFCL surface, {len(texts)} questions "
        f"(median {statistics.median(tokens):.0f} tokens, at most {max(tokens)}), "
        f"two alternating blocks per variant; threads: {thread_settings()}"
    )
    print(
        f"tokenizer alone: median {statistics.median(tokenize_t) * 1e3:.2f} ms "
        f"(part of the query embedding)"
    )
    print(
        f"{'ms, median (best)':<28}{'query embedding':>18}{'ranking and trace':>20}"
        f"{'end-to-end':>16}"
    )
    for name, columns in times.items():
        cells = [f"{statistics.median(c) * 1e3:.2f} ({min(c) * 1e3:.2f})" for c in columns]
        print(f"{name:<28}{cells[0]:>18}{cells[1]:>20}{cells[2]:>16}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", action="store_true", help="only the BFCL quality table")
    parser.add_argument("--speed", action="store_true", help="only the speed tables")
    parser.add_argument("--tune", action="store_true", help="sweep the hybrid weight")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument(
        "--torch-threads", type=int, help="torch's intra-op threads (default: the runtime's)"
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="another checkout whose ExposureIndex joins the paired expose tables",
    )
    args = parser.parse_args(argv)
    if args.torch_threads is not None:
        from harnessc.runtime.exposure.embedding import load_query_embedder

        load_query_embedder(threads=args.torch_threads)  # the model is loaded once per process
    both = not (args.quality or args.speed)
    state = None
    if args.quality or args.tune or both:
        state = quality(args.tune)
    if args.speed or both:
        speed(args.repeat, state, load_baseline(args.baseline) if args.baseline else None)


if __name__ == "__main__":
    main()
