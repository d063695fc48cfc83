"""Exposure: which public, available tools a planner sees in one turn (the top-N rule).

- ranker: the ranker (lexical and embedding scores, availability, the cut)
- lexical: BM25 scoring over each tool's document
- embedding: query-side embedding with all-MiniLM-L6-v2, offline (the `embed` extra)
"""

from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the names of runtime/exposure.py, which this package replaced (0.1.0)
    from .._moved import moved_names

    __getattr__ = moved_names(__name__, "ranker")
