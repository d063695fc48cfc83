"""The formatter's text as small edits: the lines that changed, not the whole document, so the
editor keeps the cursor, the folds and the undo history of the lines left alone.

The line diff is a patience diff with a bound on its work: common leading and trailing lines
are set aside, lines that occur once on each side and in the same order anchor the rest, and
each stretch between two anchors is diffed the same way. Once the work done passes a few times
the lines' count, what is left of each stretch is replaced whole. A diff is never slower than
linear in the lines' count (times the log of it), whatever the texts: a general
longest-common-subsequence diff on a 20,000-line spec takes minutes."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

WORK_PER_LINE = 8
"""The work allowed per line of the two texts before the rest is replaced stretch by stretch."""


@dataclass(frozen=True)
class Hunk:
    """Old lines [old_start, old_end) become new lines [new_start, new_end)."""

    old_start: int
    old_end: int
    new_start: int
    new_end: int


def line_hunks(old: list[str], new: list[str]) -> list[Hunk]:
    """The hunks turning the lines `old` into the lines `new`, in order, none touching."""
    hunks: list[Hunk] = []
    budget = WORK_PER_LINE * (len(old) + len(new) + 1)
    stack = [(0, len(old), 0, len(new))]
    while stack:
        a0, a1, b0, b1 = stack.pop()
        while a0 < a1 and b0 < b1 and old[a0] == new[b0]:
            a0, b0 = a0 + 1, b0 + 1
        while a0 < a1 and b0 < b1 and old[a1 - 1] == new[b1 - 1]:
            a1, b1 = a1 - 1, b1 - 1
        if a0 == a1 and b0 == b1:
            continue
        if a0 == a1 or b0 == b1 or budget <= 0:
            hunks.append(Hunk(a0, a1, b0, b1))
            continue
        budget -= (a1 - a0) + (b1 - b0)
        anchors = _anchors(old, a0, a1, new, b0, b1)
        if not anchors:
            hunks.append(Hunk(a0, a1, b0, b1))
            continue
        # the stretches between anchors, pushed last first so that they are taken in order
        edges = [(a0 - 1, b0 - 1), *anchors, (a1, b1)]
        for (pa, pb), (na, nb) in reversed(list(pairwise(edges))):
            stack.append((pa + 1, na, pb + 1, nb))
    return _merged(sorted(hunks, key=lambda h: (h.old_start, h.new_start)))


def _anchors(
    old: list[str], a0: int, a1: int, new: list[str], b0: int, b1: int
) -> list[tuple[int, int]]:
    """Lines that occur once in old[a0:a1] and once in new[b0:b1], the longest run of them in
    the same order on both sides (patience sorting)."""
    in_old = Counter(old[a0:a1])
    in_new = Counter(new[b0:b1])
    where = {old[i]: i for i in range(a0, a1) if in_old[old[i]] == 1 and in_new[old[i]] == 1}
    pairs = [(where[new[j]], j) for j in range(b0, b1) if new[j] in where]
    if not pairs:
        return []
    # the longest increasing run of old positions, in new order
    tails: list[int] = []
    tail_at: list[int] = []
    before: list[int] = [-1] * len(pairs)
    for index, (i, _) in enumerate(pairs):
        at = bisect_left(tails, i)
        if at == len(tails):
            tails.append(i)
            tail_at.append(index)
        else:
            tails[at] = i
            tail_at[at] = index
        before[index] = tail_at[at - 1] if at else -1
    run: list[tuple[int, int]] = []
    index = tail_at[-1]
    while index >= 0:
        run.append(pairs[index])
        index = before[index]
    return run[::-1]


def _merged(hunks: list[Hunk]) -> list[Hunk]:
    """Hunks that meet joined into one (an edit's end is the next one's start)."""
    joined: list[Hunk] = []
    for hunk in hunks:
        last = joined[-1] if joined else None
        if last is not None and last.old_end == hunk.old_start and last.new_end == hunk.new_start:
            joined[-1] = Hunk(last.old_start, hunk.old_end, last.new_start, hunk.new_end)
        else:
            joined.append(hunk)
    return joined


def split_lines(text: str, starts: tuple[int, ...]) -> list[str]:
    """`text` cut at `starts` (the offsets of its lines), each line with its break."""
    bounds = [*starts, len(text)]
    lines = [text[bounds[i] : bounds[i + 1]] for i in range(len(starts))]
    return lines if lines and lines[-1] else lines[:-1]
