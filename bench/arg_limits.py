"""`Session.normalize` just under and over each limit of a call's arguments (normalize.py).

    .venv/bin/python bench/arg_limits.py [--rounds 3]

Each case is one call to a session of a small spec on the in-memory store, timed whole
(`normalize`, validation, the input hash, and the REQUESTED or `call.refused` event it records);
the best of `--rounds` is shown with the outcome. A refusal must come within 50 ms; a call under
the limits is accepted as before (its cost grows with what it holds).

- `list-1m`: a `list<string>` of 1,000,000 elements (the report's case: seconds to decide);
- `entries-under`, `entries-over`: 99,998 and 99,999 strings beside another field (the
  arguments' own fields count: 100,000 and 100,001 entries);
- `text-under`, `text-over`, `text-100mb`: one string field of 1,048,576 characters, one more,
  and 100,000,000;
- `keys-over`: a `map<string>` of 1,000,000 keys;
- `repeated-over`: the same 1,000-character string 2,000 times (2 MB of JSON, 2,000 entries).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, Refusal

SPEC = """
harness limits { version "1.0.0" }
tool t.put {
  summary "Put things."
  effects write
  input { items: list<string>?, tags: map<string>?, text: string?, n: int? }
}
policy p { default deny  allow t.put }
surface s { expose t.put }
agent a { surface s; policy p }
"""

CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "list-1m": lambda: {"items": ["x"] * 1_000_000},
    "entries-under": lambda: {"items": ["x"] * 99_998, "n": 1},
    "entries-over": lambda: {"items": ["x"] * 99_999, "n": 1},
    "text-under": lambda: {"text": "x" * 1_048_576},
    "text-over": lambda: {"text": "x" * 1_048_577},
    "text-100mb": lambda: {"text": "x" * 100_000_000},
    "keys-over": lambda: {"tags": {f"k{i}": "v" for i in range(1_000_000)}},
    "repeated-over": lambda: {"items": ["y" * 1_000] * 2_000},
}


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--rounds", type=int, default=3)
    args = options.parse_args()
    folder = Path(tempfile.mkdtemp())
    (folder / "limits.harness").write_text(SPEC, encoding="utf-8")
    result = check([folder / "limits.harness"])
    assert result.ok and result.model is not None
    h = Harness(result.model)
    print(f"{'case':<16} {'best ms':>9}  outcome")
    for name, make in CASES.items():
        value = make()
        best = float("inf")
        outcome = ""
        for r in range(args.rounds):
            s = h.session("a", actor={"user": "u-1"}, task="t-1")
            started = time.perf_counter()
            answer = s.normalize("t.put", f"c-{name}-{r}", value)
            best = min(best, time.perf_counter() - started)
            outcome = (
                f"{answer.code}: {answer.message}" if isinstance(answer, Refusal) else "accepted"
            )
        print(f"{name:<16} {best * 1000:>9.2f}  {outcome[:110]}")


if __name__ == "__main__":
    main()
