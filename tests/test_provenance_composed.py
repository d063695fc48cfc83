"""A line's total is composed from its parts (language.md §7.4): inside one record of a result
or a fact, a count (an `int` from 2 to 1000) times another number of the same record, both of
the same kind of source, is a value of that source, with its parts in the evidence. Nothing
else is composed: not across records or results, not sums, not secret fields, not a count out
of range, not parts of different trust."""

from __future__ import annotations

from pathlib import Path

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, PendingCall
from harnessc.runtime.judge.provenance import ProvenanceIndex, Source
from harnessc.runtime.model import Field, Schema, Type
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples

ORDER = {
    "id": "A-55812",
    "items": [
        {"sku": "MUG-02", "price": 24.9, "qty": 1},
        {"sku": "TEA-100", "price": 15.5, "qty": 3},
    ],
}


def _index(data: object, kind: str = "trusted", schema: Schema | None = None) -> ProvenanceIndex:
    index = ProvenanceIndex()
    index.add_value(data, Source(kind, 7, "orders.get"), schema)
    return index


def test_a_count_times_a_price_of_one_record_is_of_its_source() -> None:
    index = _index(ORDER)
    found = index.lookup(46.5)
    assert found is not None and found.kinds == {"trusted"}
    assert [s.composed for s in found.sources] == ["3 × 15.5"]
    assert index.kinds_of("46.50") == {"trusted"}  # a number in any form, as any other


def test_nothing_else_is_composed() -> None:
    index = _index(ORDER)
    assert index.lookup(24.9 * 3) is None  # a price of one record, the count of another
    assert index.lookup(24.9 + 15.5) is None  # no sums
    assert index.lookup(46.5 * 2) is None
    # a count out of range, and one that is a float, compose nothing
    assert _index({"price": 2.0, "qty": 1001}).lookup(2002) is None
    assert _index({"price": 2.0, "qty": 3.0}).lookup(6) is None
    # a user's values are matched, never composed
    said = ProvenanceIndex()
    said.add_value({"price": 15.5, "qty": 3}, Source("user", 1))
    assert said.lookup(46.5) is None


def test_parts_of_different_trust_or_secret_compose_nothing() -> None:
    schema = Schema(
        fields=(
            Field(name="price", type=Type(name="float"), trust="trusted"),
            Field(name="qty", type=Type(name="int")),
            Field(name="pin", type=Type(name="int"), secret=True),
            Field(name="fee", type=Type(name="float")),
        )
    )
    index = _index({"price": 15.5, "qty": 3, "pin": 4321, "fee": 2.5}, "untrusted", schema)
    assert index.lookup(46.5) is None  # a trusted price, an untrusted count
    assert index.lookup(4321 * 3) is None  # a secret is never a part
    assert index.kinds_of(7.5) == {"untrusted"}  # 3 × 2.5: both untrusted


@settings(max_examples=examples(100), deadline=None)
@given(
    count=st.integers(min_value=2, max_value=1000),
    cents=st.integers(min_value=1, max_value=10**7),
)
def test_every_line_total_is_found_exactly(count: int, cents: int) -> None:
    price = cents / 100
    index = _index({"items": [{"unit": price, "n": count}]})
    total = round(count * cents) / 100  # the product in cents, exact
    assert index.kinds_of(total) == {"trusted"}


SPEC = """\
harness shop {
  version "1.0.0"
  summary "Refunds orders as support agents ask."
}

tool orders.get {
  summary "An order and its items."
  effects read
  input { id: string }
  output { id: string, items: list<{ sku: string, price: float, qty: int }> }
  trust trusted
}

tool tickets.read {
  summary "A ticket a customer wrote."
  effects read
  input { id: string }
  output { text: string, lines: list<{ price: float, qty: int }> }
}

tool orders.refund {
  summary "Refund an amount of an order."
  effects write external
  input { order: string, amount: float }
}

surface shop_tools {
  expose orders.get, tickets.read, orders.refund
}

policy support {
  default deny
  reads: allow orders.get, tickets.read
  refund: allow orders.refund when args.amount from user or args.amount from trusted
}

agent helper {
  persona "A support assistant."
  surface shop_tools
  policy support
}
"""


def test_a_refund_of_a_line_is_allowed_and_the_evidence_names_its_parts(tmp_path: Path) -> None:
    path = tmp_path / "shop.harness"
    path.write_text(SPEC, encoding="utf-8")
    spec = check([path]).model
    assert spec is not None
    h = Harness(spec)
    h.bind("orders.get", lambda args: ORDER)
    h.bind("tickets.read", lambda args: {"text": "refund me", "lines": [{"price": 99.0, "qty": 9}]})
    h.bind("orders.refund", lambda args: {})
    s = h.session("helper", actor={"user": "u-1", "role": "agent"}, task="t-1")
    s.user_said("Refund the three packs of tea on A-55812, they were stale.")
    got = []
    for i, (tool, args) in enumerate(
        [
            ("orders.get", {"id": "A-55812"}),
            ("tickets.read", {"id": "T-1"}),
            ("orders.refund", {"order": "A-55812", "amount": 46.5}),  # 3 × 15.5, trusted
            ("orders.refund", {"order": "A-55812", "amount": 891.0}),  # 9 × 99, a ticket's
            ("orders.refund", {"order": "A-55812", "amount": 74.7}),  # 3 × 24.9: two lines
        ]
    ):
        call = s.normalize(tool, f"c-{i}", args)
        assert isinstance(call, PendingCall)
        decision = s.decide(call)
        got.append(decision.effect)
        if i == 2:
            assert any("3 × 15.5 in the result of `orders.get`" in e for e in decision.evidence)
        if decision.effect == "allow":
            s.invoke(call)
    assert got == ["allow", "allow", "allow", "deny", "deny"]
