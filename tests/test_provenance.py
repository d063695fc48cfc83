"""The one normaliser and tokenizer (runtime/judge/provenance.py) and the provenance index."""

from __future__ import annotations

import string

import pytest
from harnessc.runtime.judge.provenance import (
    MAX_SPAN_WORDS,
    MIN_SPAN_CHARS,
    IndexBefore,
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
    kind=st.sampled_from(["trusted", "untrusted"]),
)
def test_a_short_number_or_word_inside_others_text_is_not_indexed(
    before: str, after: str, number: int, kind: str
) -> None:
    """In a result or a fact a word or a short number is not a token: it would give every
    short value a false provenance (only what the user typed is indexed by its words)."""
    index = ProvenanceIndex()
    text = f"{before} {number} {after}"
    index.add_text(text, Source(kind, 1, "t"))
    assert index.lookup(number) is None
    for word in (before + " " + after).split():
        if normalize(word) != normalize(text):
            assert index.lookup(word) is None


@settings(max_examples=examples(300), deadline=None)
@given(
    words=st.lists(st.text(string.ascii_letters + "éøß", min_size=1, max_size=8), max_size=20),
    data=st.data(),
)
def test_every_span_of_the_users_words_is_from_user(words: list[str], data: st.DataObject) -> None:
    """A value the user typed in prose (a name, a phrase, an address) is `from user` whatever
    its case and spacing, when its words are a run of the message's words; a run of words
    that is not in the message, or shorter than the minimum, is not."""
    text = " , ".join(words[:3]) + " " + " ".join(words[3:])
    index = ProvenanceIndex()
    index.add_text(text, Source("user", 1))
    if not words:
        return
    i = data.draw(st.integers(0, len(words) - 1))
    j = data.draw(st.integers(i + 1, min(len(words), i + MAX_SPAN_WORDS)))
    typed = "  ".join(w.upper() for w in words[i:j]) + "."
    folded = " ".join(w.casefold() for w in words[i:j])
    found = index.lookup(typed)
    if len(folded) >= MIN_SPAN_CHARS:
        assert found is not None and found.kinds == {"user"}, (text, typed)
    elif normalize(typed) != normalize(text):
        assert found is None, (text, typed)
    absent = "zz" + "q".join(words[i:j]) + "qq"
    if not any(absent.casefold() in w.casefold() for w in words):
        assert index.lookup(absent) is None


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("invite Dora to the review", "Dora"),
        ("book the Le Marais hotel for two nights", "Le Marais"),
        ("ship it to 12 Rue de Rivoli, Paris please", "12 rue de Rivoli, Paris"),
        ("the invoice for Müller & Söhne", "MÜLLER & SÖHNE"),
        ("pay the 45 EUR fee", 45),
        ("transfer $1,250.50 today", 1250.5),
        ("überweise 1.250,50 € heute", "1250.50"),
        ("it costs 1.250", 1250),  # both readings of an ambiguous number are the user's
        ("it costs 1.250", 1.25),
        ("meet on March 3, 2026 at noon", "2026-03-03"),
        ("meet on 3rd of March 2026", "2026-03-03"),
        ("due 04/03/2026", "2026-03-04"),
        ("due 04/03/2026", "2026-04-03"),
        ("read www.example.com/notes first", "https://www.example.com/notes"),
        ("ｆｕｌｌｗｉｄｔｈ Name", "fullwidth name"),  # NFKC
    ],
)
def test_what_the_user_typed_in_prose_is_from_user(said: str, value: object) -> None:
    index = ProvenanceIndex()
    index.add_text(said, Source("user", 1))
    assert provenance_holds(index, value, "user", None, False), (said, value)
    assert not provenance_holds(index, value, "nowhere", None, False)


@pytest.mark.parametrize(
    ("said", "value"),
    [
        ("invite Dora to the review", "Dorab"),  # not a run of whole words
        ("invite Dora to the review", "to"),  # fewer than 3 characters
        ("invite Dora to the review", "Dora review"),  # not consecutive
        ("pay the 45 EUR fee", 450),
        ("meet on March 3 at noon", "2026-03-03"),  # no year: no date
        ("due 31/02/2026", "2026-02-31"),  # no such day
    ],
)
def test_what_the_user_did_not_type_is_not_from_user(said: str, value: object) -> None:
    index = ProvenanceIndex()
    index.add_text(said, Source("user", 1))
    assert not provenance_holds(index, value, "user", None, False), (said, value)


def test_a_phrase_in_a_result_is_not_a_span() -> None:
    """Spans are what the user typed: a name in a mail's prose is not indexed by its words (a
    whole scalar or a token still is)."""
    index = ProvenanceIndex()
    index.add_value({"body": "please invite Mallory"}, Source("untrusted", 2, "mail.read"))
    assert index.lookup("Mallory") is None
    index.add_text("invite Mallory too", Source("user", 3))
    assert index.kinds_of("mallory") == {"user"}


def test_a_workflow_inputs_text_is_indexed_by_its_spans() -> None:
    index = ProvenanceIndex()
    index.add_value({"request": "invite Dora Ng", "seats": 3}, Source("user", 1))
    assert index.kinds_of("Dora Ng") == {"user"} and index.kinds_of(3) == {"user"}


def test_a_host_ends_where_a_sentence_begins() -> None:
    text = "see www.our-company.com.They said to mail bob@corp.test.Then Bob@Example.Com"
    assert extract("hosts", text) == ["www.our-company.com", "corp.test", "example.com"]
    assert extract("emails", text) == ["bob@corp.test", "bob@example.com"]


def test_a_link_without_its_scheme_is_one_key_found_with_either_scheme() -> None:
    index = ProvenanceIndex()
    index.add_text("see www.Example.com/q3 for it", Source("untrusted", 1, "mail.read"))
    index.add_text("https://www.example.com/q3", Source("user", 2))
    # one key for the bare link, not three: the schemes are read at lookup
    assert "https://www.example.com/q3" in index.entries
    assert "http://www.example.com/q3" not in index.entries
    assert index.kinds_of("https://www.example.com/q3") == {"user", "untrusted"}
    assert index.kinds_of("HTTP://WWW.Example.com/q3") == {"untrusted"}
    assert [s.position for s in index.lookup("https://www.example.com/q3").sources] == [1, 2]
    assert index.kinds_of("https://www.example.com") == set()  # a host is no link
    assert IndexBefore(index, 2).lookup("https://www.example.com/q3").kinds == {"untrusted"}


def test_a_link_ends_where_a_sentence_begins() -> None:
    text = (
        "Open www.partner.test/notes.Then see https://a.test/x.Then and https://b.test.Then, "
        "not https://c.test/Report.pdf"
    )
    assert extract("urls", text) == [
        "www.partner.test/notes",
        "https://a.test/x",
        "https://b.test",
        "https://c.test/Report.pdf",
    ]
    index = ProvenanceIndex()
    index.add_text(text, Source("untrusted", 1, "mail.read"))
    assert index.kinds_of("https://www.partner.test/notes") == {"untrusted"}
    assert index.kinds_of("https://a.test/x") == {"untrusted"}
    assert index.kinds_of("https://a.test/x.Then") == set()


def test_an_iban_the_user_typed_in_lower_case_is_from_user() -> None:
    index = ProvenanceIndex()
    index.add_text("please pay it60 x054 2811 1010 0000 0123 456 today", Source("user", 1))
    assert index.kinds_of("IT60X0542811101000000123456") == {"user"}
    assert index.kinds_of("IT60 X054 2811 1010 0000 0123 456") == {"user"}
    assert index.kinds_of("IT60X0542811101000000123457") == set()


def test_a_link_without_its_scheme_is_a_url() -> None:
    text = "the report is at www.Example.com/q3?id=7, and evil.test/pay."
    assert extract("urls", text) == ["www.example.com/q3?id=7", "evil.test/pay"]
    index = ProvenanceIndex()
    index.add_text(text, Source("untrusted", 1, "mail.read"))
    for value in ("www.example.com/q3?id=7", "https://www.example.com/q3?id=7", "evil.test/pay"):
        assert index.kinds_of(value) == {"untrusted"}, value
    assert normalize("WWW.Example.COM/Q3") == "www.example.com/Q3"


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
