"""BM25 lexical scoring for the exposure ranker: tokenizer, field weights and an inverted index.

A tool's document is a bag of weighted fields (BM25F-style: a term's frequency in the document
is the sum over fields of its count times the field's weight, and so is the document length).
All per-document weights are computed once when the index is built and kept as an inverted
index (for each term, the documents that hold it and their BM25 weight, idf included); scoring a
query touches only the postings of its own terms, never every document.

>>> index = LexicalIndex([{"id": "change.create", "summary": "Create a change request."},
...                       {"id": "deploy", "summary": "Deploy a service to production."}])
>>> docs, scores = index.match(index.terms("open a change request"))
>>> docs.tolist()
[0]
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

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

# Scripts written without spaces between words: Han, Hiragana, Katakana, and Hangul (spaced, but
# its words carry particles, so character bigrams match better than whole words).
_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
# Marks that belong to their letter (Indic vowel signs and viramas, Arabic and Hebrew vowels,
# Thai and Khmer signs, the kana voicing marks): Python's \w does not count them, and a word
# must not be cut at them.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06ed\u0900-\u0963\u0966-\u0dff\u0e31-\u0e3a\u0e47-\u0e4e\u0f00-\u109f"
    "\u1780-\u17ff\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\u3099\u309a"
)
# a run of letters and digits of any script (\w without the underscore), with their marks
_CHUNK = re.compile(rf"(?:[^\W_]|[{_MARKS}])+")
# inside a run: CJK characters, digits, other letters
_PIECE = re.compile(rf"[{_CJK}]+|\d+|(?:[^\W\d_{_CJK}]|[{_MARKS}])+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
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
# Marks are dropped only after letters of the scripts where they are accents or optional
# vowel points (Latin, Greek, Cyrillic; Hebrew and Arabic): elsewhere (Devanagari vowel signs,
# the kana voicing marks) a mark is part of the letter, and dropping it would merge words.
_ACCENTED = ((0x0041, 0x052F), (0x05D0, 0x05EA), (0x0620, 0x064A), (0x1E00, 0x1FFF))
_CACHE_LIMIT = 100_000


def _stem(word: str) -> str:
    # A light suffix stripper that merges plurals and verb forms (files/file, creating/created/
    # create) without a full stemmer's surprises on identifiers: strip one suffix, then a final
    # "e", so every form of a word ends on the same stem. English only: other words are kept.
    if len(word) <= 3 or not word.isascii():
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


def fold(text: str) -> str:
    """`text` with compatibility forms unified (NFKD: full-width letters, ligatures) and the
    accents of Latin, Greek and Cyrillic letters (the vowel points of Hebrew and Arabic)
    dropped; case is kept (camelCase splits on it).

    >>> fold("Crème brûlée, ﬁle, Ｆｕｌｌ, ёлка")
    'Creme brulee, file, Full, елка'
    """
    if text.isascii():
        return text
    out: list[str] = []
    base = 0
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch):
            if any(lo <= base <= hi for lo, hi in _ACCENTED):
                continue
        else:
            base = ord(ch)
        out.append(ch)
    # NFC puts back together what NFKD took apart and was kept (Hangul syllables, kana marks)
    return unicodedata.normalize("NFC", "".join(out))


def _camel(word: str) -> list[str]:
    if word.isascii():
        return _CAMEL.findall(word)
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        prev, ch = word[i - 1], word[i]
        nxt = word[i + 1] if i + 1 < len(word) else ""
        if ch.isupper() and (prev.islower() or (prev.isupper() and nxt.islower())):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts


def _analyse(chunk: str) -> tuple[str, ...]:
    """The terms of one run of folded letters and digits (cached: documents repeat words)."""
    out: list[str] = []
    for piece in _PIECE.findall(chunk):
        first = piece[0]
        if first.isdigit():
            out.append(piece)
        elif _is_cjk(first):
            # character bigrams (a lone character stands for itself)
            out.extend(
                [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]
            )
        else:
            for part in _camel(piece) if not piece.islower() else (piece,):
                word = part.casefold()
                if word not in _STOP:
                    out.append(_stem(word))
    return tuple(out)


_CJK_CHAR = re.compile(rf"[{_CJK}]")


def _is_cjk(ch: str) -> bool:
    return _CJK_CHAR.match(ch) is not None


class _Terms(dict[str, tuple[str, ...]]):
    def __missing__(self, chunk: str) -> tuple[str, ...]:
        if len(self) >= _CACHE_LIMIT:
            self.clear()  # bounded: queries bring words no document has
        terms = self[chunk] = _analyse(chunk)
        return terms


_TERMS = _Terms()


def tokenize(text: str) -> list[str]:
    """The terms of `text`: words of every script, case-folded, Latin, Greek and Cyrillic
    accents dropped, English words lightly stemmed and English function words left out;
    camelCase, snake_case, dotted and MCP ids split into words; Chinese, Japanese and Korean
    as overlapping character pairs; numbers as written.

    >>> tokenize("mcp:scanner:tool:scanRepos and change.create_requests")
    ['mcp', 'scanner', 'tool', 'scan', 'repo', 'chang', 'creat', 'request']
    >>> tokenize("Créer un fichier — создать файл — 创建文件")
    ['creer', 'un', 'fichier', 'создать', 'фаил', '创建', '建文', '文件']
    """
    # folded first: a decomposed accent is not a letter, and would split its word
    return list(chain.from_iterable(map(_TERMS.__getitem__, _CHUNK.findall(fold(text)))))


class LexicalIndex:
    """BM25 over documents given as `{field: text}`, kept as an inverted index.

    `terms(query)` gives a query's distinct known terms; `match(terms)` the documents that hold
    at least one of them (sorted) with their scores; `scores(query)` one score per document.
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
        self.size = n = len(docs)
        # a term's id is the vocabulary's size when first seen (all in C, no Python call)
        vocab: defaultdict[str, int] = defaultdict()
        vocab.default_factory = vocab.__len__
        intern = vocab.__getitem__
        term_ids: list[int] = []
        doc_ids: list[int] = []
        field_weights: list[float] = []
        for i, doc in enumerate(docs):
            for name, text in doc.items():
                if not text:
                    continue
                ids = list(map(intern, tokenize(text)))
                term_ids += ids
                doc_ids += [i] * len(ids)
                field_weights += [weights.get(name, 1.0)] * len(ids)
        self._vocab = dict(vocab)
        terms = np.asarray(term_ids, dtype=np.int64)
        owners = np.asarray(doc_ids, dtype=np.int64)
        w = np.asarray(field_weights, dtype=np.float64)
        lengths = np.bincount(owners, weights=w, minlength=n) if n else np.zeros(0)
        average = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        norm = k1 * (1.0 - b + b * lengths / average)
        # one (term, document) pair per posting, sorted by term then document; a pair's
        # frequency sums its field weights in the order the words came
        pairs, inverse = np.unique(terms * max(n, 1) + owners, return_inverse=True)
        tf = np.bincount(inverse.reshape(-1), weights=w, minlength=len(pairs))
        p_term, p_doc = np.divmod(pairs, max(n, 1))
        df = np.bincount(p_term, minlength=len(vocab))
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        # INVARIANT: each posting's weight already includes its term's idf, so a query's score
        # is a plain sum over its terms
        self._docs = p_doc
        self._weights = tf * (k1 + 1.0) / (tf + norm[p_doc]) * idf[p_term]
        self._starts = np.concatenate(([0], np.cumsum(df))).tolist()

    def terms(self, query: str) -> list[int]:
        """The distinct terms of `query` that some document holds, in the order they came."""
        return self.known(tokenize(query))

    def known(self, tokens: Iterable[str]) -> list[int]:
        """The ids of the distinct `tokens` that some document holds, in the order they came."""
        get = self._vocab.get
        return [t for t in dict.fromkeys(map(get, tokens)) if t is not None]

    def match(self, terms: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(documents holding at least one of `terms`, sorted; their BM25 scores)."""
        docs, scores, _ = self.match_all(terms)
        return docs, scores

    def match_all(self, terms: Iterable[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """`match`, and the scores of every document when they were added up in one array
        (many postings), else None."""
        starts = self._starts
        spans = [(starts[t], starts[t + 1]) for t in terms]
        if not spans:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64), None
        if len(spans) == 1:
            lo, hi = spans[0]
            return self._docs[lo:hi], self._weights[lo:hi], None
        docs = np.concatenate([self._docs[lo:hi] for lo, hi in spans])
        weights = np.concatenate([self._weights[lo:hi] for lo, hi in spans])
        # a document's score sums its terms' weights in the order the terms came, either way
        if 32 * len(docs) >= self.size:
            # many postings: add them up in one array over the documents
            out = np.bincount(docs, weights=weights, minlength=self.size)
            docs = (out > 0).nonzero()[0]  # every BM25 weight is > 0; bools scan fastest
            return docs, out[docs], out
        unique, inverse = np.unique(docs, return_inverse=True)
        return unique, np.bincount(inverse, weights=weights, minlength=len(unique)), None

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for `query` (float64, one per document).

        >>> LexicalIndex([{"id": "alpha"}, {"id": "beta"}]).scores("beta").round(3).tolist()
        [0.0, 0.953]
        """
        out = np.zeros(self.size, dtype=np.float64)
        docs, scores = self.match(self.terms(query))
        out[docs] = scores
        return out
