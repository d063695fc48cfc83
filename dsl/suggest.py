"""Did-you-mean: the nearest candidate by scaled edit distance, or nothing.

Only called when an error is reported, never on the success path. A candidate is offered when
its distance is at most a third of the written word's length (at least 1), as rustc does, so a
short name never gets a far-fetched suggestion. A word longer than `MAX_WORD` gets none: nobody
mistypes a 40,000-character name, and the search must cost the same for any input, so that a
file of huge bad names is still checked in time linear in its size.

The syntax errors (keywords), the names, the modules and the configuration all suggest through
this one function.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_WORD = 128
"""The longest word that gets a suggestion (bounds the search at a few thousand operations per
candidate)."""


def max_distance(word: str) -> int:
    return max(1, len(word) // 3)


class _Pattern:
    """A word prepared for bit-parallel edit distance (Myers 1999, Hyyrö 2001).

    One pass over a candidate costs a handful of integer operations per character, so scanning
    ten thousand tool ids for a suggestion stays well under a tenth of a second.
    """

    __slots__ = ("high", "length", "mask", "peq")

    def __init__(self, word: str) -> None:
        peq: dict[str, int] = {}
        for i, ch in enumerate(word):
            peq[ch] = peq.get(ch, 0) | (1 << i)
        self.peq = peq
        self.length = len(word)
        self.mask = (1 << len(word)) - 1
        self.high = 1 << (len(word) - 1) if word else 0

    def distance(self, text: str) -> int:
        if not self.length:
            return len(text)
        peq, mask, high = self.peq, self.mask, self.high
        pv, mv, score = mask, 0, self.length
        for ch in text:
            eq = peq.get(ch, 0)
            xv = eq | mv
            xh = (((eq & pv) + pv) ^ pv) | eq
            ph = mv | (~(xh | pv) & mask)
            mh = pv & xh
            if ph & high:
                score += 1
            elif mh & high:
                score -= 1
            ph = ((ph << 1) | 1) & mask
            mh = (mh << 1) & mask
            pv = mh | (~(xv | ph) & mask)
            mv = ph & xv
        return score


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions each cost 1.

    >>> edit_distance("change.craete", "change.create")
    2
    """
    return _Pattern(a).distance(b)


def suggest(word: str, candidates: Iterable[str]) -> str | None:
    """The nearest candidate to `word` within the scaled distance, or None.

    Ties go to the alphabetically first candidate, so the help line is deterministic.

    >>> suggest("change.craete", ["change.create", "change.get"])
    'change.create'
    >>> suggest("deploy", ["change.create"]) is None
    True
    >>> suggest("b", ["a"]) is None
    True
    >>> suggest("tow", ["two", "one"])
    'two'
    >>> suggest("summary" * 20, ["summary" * 20 + "s"]) is None
    True
    """
    if len(word) > MAX_WORD:
        return None
    limit = max_distance(word)
    lowered = word.lower()
    letters = sorted(lowered)
    pattern = _Pattern(word)
    best: str | None = None
    best_distance = limit + 1
    for candidate in candidates:
        if candidate == word:
            continue
        if candidate.lower() == lowered:
            return candidate
        if abs(len(candidate) - len(word)) > min(best_distance, limit):
            continue
        distance = pattern.distance(candidate)
        if distance > limit and len(word) >= 3 and sorted(candidate.lower()) == letters:
            distance = limit  # the same letters in another order: `tow` for `two`
        # a candidate sharing no character position with the word is not a near match
        if distance > limit or distance >= len(word):
            continue
        if distance < best_distance or (distance == best_distance and best and candidate < best):
            best, best_distance = candidate, distance
    return best


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A help line for the nearest candidate, or None."""
    found = suggest(word, candidates)
    return f"did you mean `{found}`?" if found else None
