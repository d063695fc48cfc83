"""BM25 lexical scoring for the exposure ranker: tokenizer, field weights and an inverted index.

A tool's document is a bag of weighted fields (BM25F-style: a term's frequency in the document
is the sum over fields of its count times the field's weight, and so is the document length).
All per-document weights are computed once when the index is built; scoring a query is one
numpy scatter-add per distinct query term, with no Python loop over documents.

>>> index = LexicalIndex([{"id": "change.create", "summary": "Create a change request."},
...                       {"id": "deploy", "summary": "Deploy a service to production."}])
>>> scores = index.scores("open a change request")
>>> int(scores.argmax())
0
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["FIELD_WEIGHTS", "LexicalIndex", "tokenize"]

FIELD_WEIGHTS: Mapping[str, float] = {
    "id": 2.0,
    "summary": 1.0,
    "use_when": 1.0,
    # `not_for` names what the tool is not for, so its words point as much away from the tool
    # as toward it; they count, at half weight, because they still say what domain it is in.
    "not_for": 0.5,
    "args": 0.5,
    "arg_text": 0.5,
    "operations": 1.0,
    "packs": 0.5,
}
"""Weights tuned on BFCL (bench/exposure.py); fields not listed weigh 1."""

_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Function words that carry no topic. Kept short on purpose: a long list starts removing words
# that do name tools ("find", "get", "show" are real verbs of real tools).
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "should",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "us",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
_SUFFIXES = ("ational", "ization", "ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s")


def _stem(word: str) -> str:
    # A light suffix stripper that merges plurals and verb forms (files/file, creating/created/
    # create) without a full stemmer's surprises on identifiers: strip one suffix, then a final
    # "e", so every form of a word ends on the same stem.
    if len(word) <= 3:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix in ("ies", "ied"):
                return word[: -len(suffix)] + "y"
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                break
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def tokenize(text: str) -> list[str]:
    """Lowercase stemmed words; camelCase, snake_case, dotted and MCP ids are split into words.

    >>> tokenize("mcp:scanner:tool:scanRepos and change.create_requests")
    ['mcp', 'scanner', 'tool', 'scan', 'repo', 'chang', 'creat', 'request']
    """
    out: list[str] = []
    for chunk in _WORD.findall(text):
        parts = _CAMEL.findall(chunk) if not chunk.islower() else (chunk,)
        for part in parts:
            word = part.lower()
            if word not in _STOP:
                out.append(_stem(word))
    return out


class LexicalIndex:
    """BM25 over documents given as `{field: text}`; `scores(query)` returns one float per doc.

    `k1` and `b` are BM25's usual parameters; the defaults were tuned on BFCL.
    """

    def __init__(
        self,
        docs: Sequence[Mapping[str, str]],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        weights: Mapping[str, float] = FIELD_WEIGHTS,
    ) -> None:
        self.size = len(docs)
        freqs: list[dict[str, float]] = []
        lengths = np.zeros(self.size, dtype=np.float64)
        for i, doc in enumerate(docs):
            tf: dict[str, float] = {}
            for name, text in doc.items():
                if not text:
                    continue
                weight = weights.get(name, 1.0)
                for term in tokenize(text):
                    tf[term] = tf.get(term, 0.0) + weight
                    lengths[i] += weight
            freqs.append(tf)
        average = float(lengths.mean()) if self.size and lengths.mean() > 0 else 1.0
        norm = k1 * (1.0 - b + b * lengths / average)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, tf in enumerate(freqs):
            for term, f in tf.items():
                rows, values = postings.setdefault(term, ([], []))
                rows.append(i)
                values.append(f * (k1 + 1.0) / (f + norm[i]))
        # INVARIANT: each posting's weights already include the term's idf, so a query's score
        # is a plain sum over its terms.
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (rows, values) in postings.items():
            df = len(rows)
            idf = math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))
            self._postings[term] = (
                np.asarray(rows, dtype=np.int64),
                np.asarray(values, dtype=np.float64) * idf,
            )

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (float64, one per document)."""
        out = np.zeros(self.size, dtype=np.float64)
        for term in dict.fromkeys(tokenize(query)):
            posting = self._postings.get(term)
            if posting is not None:
                # rows are unique within one posting, so fancy-index += is exact
                out[posting[0]] += posting[1]
        return out
