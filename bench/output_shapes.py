"""What an output's shape costs a result: checking it and indexing its values for provenance.

    .venv/bin/python bench/output_shapes.py [--rounds 5] [--items 500]

One result of `--items` records (id, payee, amount, a note, and two fields the spec does not
list), declared four ways: wrapped in a closed record (`output { items: list<{ … all … }> }`,
the only way before output shapes), as a bare list of closed records, as a bare list of open
records listing three fields (`...`), and as `any`. Each case is timed whole, as a call's result
is handled: `Validator.run` on the output, then `ProvenanceIndex.add_value` with the tool's
schema. The cases run interleaved, once a round; the best of `--rounds` is shown, and each case's
ratio to the wrapped one.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from harnessc.runtime.judge.normalize import Validator
from harnessc.runtime.judge.provenance import ProvenanceIndex, Source
from harnessc.runtime.model import Field, Schema, Type

S, F = Type(name="string"), Type(name="float")
ALL = (
    Field(name="id", type=S),
    Field(name="payee", type=S),
    Field(name="amount", type=F),
    Field(name="note", type=S, trust="untrusted"),
    Field(name="iban", type=S),
    Field(name="memo", type=S),
)
LISTED = ALL[:3]


def _record(fields: tuple[Field, ...], open_: bool = False) -> Type:
    return Type(name="object", fields=fields, open=open_)


SHAPES: dict[str, Schema] = {
    "wrapped": Schema(fields=(Field(name="items", type=Type(name="list", item=_record(ALL))),)),
    "bare list": Schema(shape=Type(name="list", item=_record(ALL))),
    "open records": Schema(shape=Type(name="list", item=_record(LISTED, open_=True))),
    "any": Schema(shape=Type(name="any")),
}


def _items(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"b-{i}",
            "payee": f"ACME-{i:05d}",
            "amount": 10.5 + i,
            "note": f"bill number {i} for the water supply",
            "iban": f"DE89{i:018d}",
            "memo": "paid by standing order",
        }
        for i in range(n)
    ]


def _case(schema: Schema, data: Any) -> Callable[[], None]:
    validator = Validator(schema)

    def run() -> None:
        checked, errors = validator.run(data)
        assert not errors, errors[:1]
        ProvenanceIndex().add_value(checked, Source("trusted", 1, "bills.list"), schema)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--items", type=int, default=500)
    options = parser.parse_args()
    items = _items(options.items)
    runs = {
        name: _case(schema, {"items": items} if name == "wrapped" else items)
        for name, schema in SHAPES.items()
    }
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(options.rounds):  # the cases interleaved: a round runs each once
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - started)
    base = best["wrapped"]
    print(f"{options.items} records, best of {options.rounds}: check + index, ratio to wrapped")
    for name, seconds in best.items():
        print(f"  {name:<13} {seconds * 1000:8.2f} ms  {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()
