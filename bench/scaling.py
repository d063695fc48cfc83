"""Parse + fmt time against file size, from 1 KiB to the 8 MiB limit, for shapes that stress it.

    .venv/bin/python bench/scaling.py [--max-kib 8192] [--shapes names,nesting,...]

Shapes: `names` (huge bad names where a keyword belongs: the syntax error's did-you-mean),
`nesting` (rules whose conditions nest 60 levels deep), `rules` (many rules), `strings` (long
strings), `comments` (long comments), `unknown` (many unknown keywords). For each size it prints
the parse and fmt time (best of --repeat) and microseconds per KiB; the `ratio` column is the
time per KiB divided by that of the first size at or over 64 KiB, so linear growth keeps it
near 1 (small sizes are dominated by fixed costs).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from harnessc.dsl.files import MAX_FILE_BYTES
from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source


def _repeat(unit: Callable[[int], str], size: int) -> str:
    parts, total, i = [], 0, 0
    while total < size:
        piece = unit(i)
        parts.append(piece)
        total += len(piece)
        i += 1
    return "".join(parts)


def names(size: int) -> str:
    name = ("summaryeffectsriktimoupn" * (size // 24 + 2))[: max(16, size // 2)]
    return _repeat(lambda i: f'tool t{i} {{\n  {name[: size // 2 - 40]}{i} "x"\n}}\n', size)


def nesting(size: int) -> str:
    cond = "(" * 60 + "args.a == 1" + ")" * 60
    head = 'tool t { summary "s"\n  effects read\n  input { a: int }\n}\npolicy p {\n'
    return head + _repeat(lambda i: f"  r{i}: allow t when {cond}\n", size) + "}\n"


def rules(size: int) -> str:
    head = 'tool t { summary "s"\n  effects read\n  input { a: int }\n}\npolicy p {\n'
    return head + _repeat(lambda i: f"  r{i}: allow t when args.a == {i}\n", size) + "}\n"


def strings(size: int) -> str:
    body = "word " * (size // 10)
    return _repeat(lambda i: f'connection c{i} "{body}"\n', size)


def comments(size: int) -> str:
    body = "note " * (size // 10)
    return _repeat(lambda i: f"# {body}\nconnection c{i}\n", size)


def unknown(size: int) -> str:
    return _repeat(lambda i: f'tool t{i} {{\n  sumary{i} "x"\n}}\n', size)


SHAPES = {f.__name__: f for f in (names, nesting, rules, strings, comments, unknown)}


def best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-kib", type=int, default=MAX_FILE_BYTES // 1024)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    parse_source(Source("warm.harness", "connection c\n"))  # the grammar's tables, built once
    sizes = []
    kib = 1
    while kib < args.max_kib:
        sizes.append(kib)
        kib *= 4
    sizes.append(args.max_kib)
    print(f"{'shape':9} {'KiB':>6} {'parse s':>9} {'fmt s':>9} {'us/KiB':>9} {'ratio':>6}")
    for shape in args.shapes.split(","):
        base = None
        for kib in sizes:
            text = SHAPES[shape](kib * 1024)
            source = Source(f"{shape}.harness", text)
            parse = best(args.repeat, lambda source=source: parse_source(source))
            fmt = best(args.repeat, lambda source=source: format_source(source))
            per_kib = (parse + fmt) / (len(text) / 1024) * 1e6
            if base is None and kib >= 64:
                base = per_kib
            ratio = f"{per_kib / base:6.2f}" if base else "     -"
            print(f"{shape:9} {len(text) // 1024:6} {parse:9.4f} {fmt:9.4f} {per_kib:9.1f} {ratio}")


if __name__ == "__main__":
    main()
