"""The one normaliser and tokenizer (runtime/judge/provenance.py) and the provenance index."""

from __future__ import annotations

import string

import pytest
from harnessc.runtime.judge.provenance import (
    ProvenanceIndex,
    Source,
    extract,
    normalize,
    provenance_holds,
    tokens,
)
from harnessc.runtime.model import Field, Schema, Type
from hypothesis import given, settings
from hypothesis import strategies as st

from .budget import examples

_json_scalars = st.one_of(
    st.text(max_size=40),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
)
_words = st.text(string.ascii_letters, min_size=1, max_size=8)


@settings(max_examples=examples(500), deadline=None)
@given(value=_json_scalars)
def test_normalisation_is_idempotent(value: object) -> None:
    once = normalize(value)
    if once is not None:
        assert normalize(once) == once


@settings(max_examples=examples(300), deadline=None)
@given(value=_json_scalars)
def test_a_value_indexed_whole_is_found(value: object) -> None:
    index = ProvenanceIndex()
    index.add_value({"field": value}, Source("untrusted", 7, "t"))
    if normalize(value) is not None:
        found = index.lookup(value)
        assert found is not None and found.kinds == {"untrusted"}
        assert found.sources[0].position == 7


@settings(max_examples=examples(300), deadline=None)
@given(
    before=st.lists(_words, min_size=1, max_size=4).map(" ".join),
    after=st.lists(_words, max_size=4).map(" ".join),
    number=st.integers(0, 999),
)
def test_a_short_number_or_word_inside_text_is_not_indexed(
    before: str, after: str, number: int
) -> None:
    index = ProvenanceIndex()
    text = f"{before} {number} {after}"
    index.add_text(text, Source("user", 1))
    assert index.lookup(number) is None
    for word in (before + " " + after).split():
        if normalize(word) != normalize(text):
            assert index.lookup(word) is None


@settings(max_examples=examples(200), deadline=None)
@given(number=st.integers(1000, 10**9), words=st.lists(_words, max_size=3).map(" ".join))
def test_a_long_number_inside_text_is_found_as_a_number(number: int, words: str) -> None:
    index = ProvenanceIndex()
    index.add_text(f"{words} pay {number:,} today", Source("user", 1))
    assert index.kinds_of(number) == {"user"}
    assert index.kinds_of(float(number)) == {"user"}
    assert index.kinds_of(str(number)) == {"user"}


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("write to Bob.Smith@Example.COM today", "email", "bob.smith@example.com"),
        ("write to Bob.Smith@Example.COM today", "host", "example.com"),
        ("see https://Evil.Test/Pay?To=X.", "url", "https://evil.test/Pay?To=X"),
        ("see https://Evil.Test/Pay?To=X.", "host", "evil.test"),
        ("host www.Example.org, please", "host", "www.example.org"),
        ("iban DE89 3704 0044 0532 0130 00 now", "iban", "DE89370400440532013000"),
        ("iban DE89370400440532013000.", "iban", "DE89370400440532013000"),
        ("ticket chg-1234 and inv_2024", "id", "chg-1234"),
        ("ticket a1b2c3 open", "id", "a1b2c3"),
        ("amount 30,000.50 EUR", "number", "30000.5"),
        ('the title "Quarterly plan" was set', "quoted", "Quarterly plan"),
    ],
)
def test_tokens_of_each_kind(text: str, kind: str, value: str) -> None:
    assert (kind, value) in list(tokens(text))


def test_plain_words_and_short_ids_are_not_tokens() -> None:
    assert list(tokens("please pay the rent of 950 for flat 12b")) == []


def test_whole_values_normalise_like_their_tokens() -> None:
    assert normalize("DE89 3704 0044 0532 0130 00") == "DE89370400440532013000"
    assert normalize("HTTPS://Evil.Test/A") == "https://evil.test/A"
    assert normalize(100.0) == normalize("100") == "100"
    assert normalize(True) is None and normalize(None) is None and normalize([1]) is None


def test_extract_returns_each_token_once_in_order() -> None:
    text = "a https://x.test/a b https://x.test/a mail c@y.test and z.test"
    assert extract("urls", text) == ["https://x.test/a"]
    assert extract("hosts", text) == ["x.test", "y.test", "z.test"]
    assert extract("emails", text) == ["c@y.test"]
    assert extract("urls", 3) is None


def test_field_trust_labels_and_secret_fields() -> None:
    schema = Schema(
        fields=(
            Field(name="sender", type=Type(name="string"), trust="trusted"),
            Field(name="token", type=Type(name="string"), secret=True),
            Field(
                name="items",
                type=Type(
                    name="list",
                    item=Type(
                        name="object",
                        fields=(Field(name="ref", type=Type(name="string"), trust="trusted"),),
                    ),
                ),
            ),
        )
    )
    index = ProvenanceIndex()
    data = {
        "sender": "boss@corp.test",
        "token": "s3cr3t-value",
        "body": "from boss@corp.test",
        "items": [{"ref": "ref-000111", "note": "x-99999"}],
    }
    index.add_value(data, Source("untrusted", 3, "mail.read", frozenset({"pii"})), schema)
    assert index.kinds_of("boss@corp.test") == {"trusted", "untrusted"}
    assert index.kinds_of("ref-000111") == {"trusted"}
    assert index.kinds_of("x-99999") == {"untrusted"}
    assert index.lookup("s3cr3t-value") is None
    found = index.lookup("ref-000111")
    assert found is not None and found.labels == {"pii"}


def test_the_meaning_of_from() -> None:
    index = ProvenanceIndex()
    index.add_text("pay DE89370400440532013000", Source("user", 1))
    index.add_value(
        {"iban": "DE89370400440532013000"}, Source("untrusted", 2, "m", frozenset({"secret"}))
    )
    value = "DE89370400440532013000"
    assert provenance_holds(index, value, "user", None, False)
    assert not provenance_holds(index, value, "user", None, True)
    assert provenance_holds(index, value, "label", "secret", False)
    assert not provenance_holds(index, value, "nowhere", None, False)
    assert provenance_holds(index, "other", "nowhere", None, False)
    # an absent value satisfies none of the forms; a list is looked up whole: nowhere
    assert not any(
        provenance_holds(index, None, k, None, False) for k in ("user", "untrusted", "nowhere")
    )
    assert provenance_holds(index, [value], "nowhere", None, False)
    assert provenance_holds(None, value, "nowhere", None, False)
