"""The docs are executed (every `harness` block of every Markdown file checks and is canonical:
tests/test_markdown_specs.py): every diagnostic code has a current page, the command-line
reference covers every command, and what the reference says about reserved
words and the standard library is what the compiler does.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from harnessc.compiler.cli import build_parser
from harnessc.dsl import syntax as s
from harnessc.dsl.codes import CODES
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source

from .test_markdown_specs import spec_blocks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def doc_files() -> list[Path]:
    files = sorted(DOCS.rglob("*.md"))
    if README.exists():
        files.append(README)
    return files


def harness_blocks(text: str) -> list[tuple[int, str]]:
    """The whole-spec `harness` blocks of a Markdown text (no `partial`, `wrong` or
    `unformatted` marker): (line of the opening fence, body). tests/test_markdown_specs.py
    checks and format-checks every block of every Markdown file."""
    return [(b.line, b.body) for b in spec_blocks(text) if not b.markers]


# ---------------------------------------------------------------------------------------------
# Generated pages


@functools.cache
def _gen_docs() -> ModuleType:
    """tools/gen_docs.py, imported by path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_every_code_has_a_page() -> None:
    gen_docs = _gen_docs()
    index = (DOCS / "diagnostics" / "index.md").read_text(encoding="utf-8")
    for code in CODES.values():
        page = gen_docs.page_name(code.code, code.slug)
        assert (DOCS / "diagnostics" / page).is_file(), f"no page for {code.code}"
        assert f"]({page})" in index, f"the index does not link {code.code}"


def test_generated_docs_are_current() -> None:
    """`python tools/gen_docs.py --check`: the diagnostic pages and the reserved-word table."""
    stale = _gen_docs().stale_files()
    assert stale == [], f"stale generated docs {stale}; run `python tools/gen_docs.py`"


def test_reserved_word_table_covers_every_position() -> None:
    """Every point where a keyword shadows a name is described, not left to the fallback."""
    rows = _gen_docs().reserved_table()
    assert rows
    unnamed = [row for row in rows if row[0].startswith("another position")]
    assert unnamed == [], "add these positions to POSITIONS in tools/gen_docs.py"


# ---------------------------------------------------------------------------------------------
# The command-line reference


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("harnessc has no subcommands")


def test_cli_doc_mentions_every_subcommand() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name in _subcommands():
        assert f"harnessc {name}" in text, f"docs/cli.md does not mention `harnessc {name}`"


@pytest.mark.parametrize(("owner", "short"), [("Harness", "h"), ("Session", "s")])
def test_the_runtime_guide_names_every_public_method(owner: str, short: str) -> None:
    from harnessc.runtime.session.harness import Harness
    from harnessc.runtime.session.sessions import Session

    cls = {"Harness": Harness, "Session": Session}[owner]
    text = (DOCS / "runtime.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in vars(cls)
        if not name.startswith("_") and not any(f"{p}.{name}" in text for p in (short, owner))
    ]
    assert missing == [], f"docs/runtime.md does not mention {owner}'s {missing}"


def test_the_cli_docs_table_lists_every_command() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    table = text.split("| command | what it does |", 1)[1].split("\n\n", 1)[0]
    # a command with actions may be listed by its action (`harnessc mcp discover`)
    listed = re.findall(
        r"^\| \[`harnessc ([a-z]+)(?: [a-z]+)*`\]\(#harnessc-\1(?:-[a-z]+)*\) \|", table, re.M
    )
    assert sorted(listed) == sorted(_subcommands())


def test_cli_doc_mentions_every_option_and_choice() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name, sub in _subcommands().items():
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, f"docs/cli.md: `{name} {option}` missing"
            for choice in action.choices or ():
                assert str(choice) in text, f"docs/cli.md: `{name}` choice `{choice}` missing"


# ---------------------------------------------------------------------------------------------
# Claims of docs/language.md §3.6 (reserved words), checked with real parses


def _parse(text: str) -> s.Module | None:
    result = parse_source(Source("claim.harness", text))
    return result.module if result.ok else None


@pytest.mark.parametrize(
    ("text", "parses"),
    [
        # values: `true` and `false` are the booleans, `not` starts a negation
        ('policy p { allow t when args.x == true { reason "r" } }', True),
        ("policy p { allow t when not args.x == 1 }", True),
        ("policy p { allow t when not == 1 }", False),
        # operators are names at the start of an operand
        ("policy p { allow t when args.op == in }", True),
        ("policy p { allow t when args.op == and or args.op == has }", True),
        # types
        ('tool t { input { a: list<string>, b: map<int>, c: enum("x") } }', True),
        ("tool t { input { a: list } }", False),
        # selectors: the sugar words, and the first selector after an effect
        ("policy p { allow risk }", False),
        ("policy p { allow effects }", False),
        ("policy p { allow call }", True),
        ("policy p { allow task }", True),
        ("policy p { allow change.get, call }", True),
        ("policy p { allow task.run }", True),
        # effects end at the next tool attribute
        ('tool t { effects read summary "x" }', True),
        # keys and dotted names are never keywords; keywords name tools and steps
        ("tool t { input { default: string, pattern: int, timeout: duration } }", True),
        ('test "t" { as actor { role: "x", task: "y" } }', True),
        ('policy p { deny: deny t { reason "r" } }', True),
        ("policy p { allow t when task.stage == tool.risk }", True),
        ('tool summary { summary "x" }', True),
        ('workflow w { step input = decide "q" }', True),
    ],
)
def test_reserved_word_claims(text: str, parses: bool) -> None:
    assert (_parse(text) is not None) is parses


def test_true_is_a_boolean_and_in_a_name_where_the_docs_say() -> None:
    module = _parse("policy p { allow t when args.x == true or args.y == in }")
    assert module is not None
    rule = module.items[0].items[0]  # type: ignore[union-attr]
    left, right = rule.when.items  # type: ignore[union-attr]
    assert isinstance(left.right, s.Bool)
    assert right.right == s.Path("in")


def test_default_allow_deny_ask_are_effects() -> None:
    module = _parse("risk_table deny { low allow }\npolicy p { default deny }")
    assert module is not None
    default = module.items[1].items[0]  # type: ignore[union-attr]
    assert default.effect == "deny" and default.table is None


# ---------------------------------------------------------------------------------------------
# The standard library section names everything the standard library declares


def _std_names() -> list[tuple[str, str]]:
    names = []
    for path in sorted((ROOT / "stdlib").glob("*.harness")):
        module = parse_source(Source(path.name, path.read_text(encoding="utf-8"))).module
        for item in module.items:
            name = getattr(item, "name", None)
            if isinstance(name, s.Name):
                names.append((path.name, name.text))
    return names


@pytest.mark.parametrize(("module", "name"), _std_names())
def test_language_doc_names_every_stdlib_declaration(module: str, name: str) -> None:
    text = (DOCS / "language.md").read_text(encoding="utf-8")
    word = re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w.])")
    spans = re.findall(r"`([^`\n]+)`", text)
    assert any(word.search(span) for span in spans), (
        f"docs/language.md does not mention `{name}` from std/{module}"
    )


# ---------------------------------------------------------------------------------------------
# Links between the docs


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lowercase, punctuation dropped, spaces as `-`."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+)$", text, re.M)}


def test_section_links_name_the_section_they_link() -> None:
    """`[§12](language.md#12-workflows)`: the number shown is the heading's, in every Markdown
    file (a section renumbered leaves no `§11` pointing at the old place)."""
    from .test_markdown_specs import markdown_files

    wrong = []
    for doc in markdown_files():
        text = doc.read_text(encoding="utf-8")
        for shown, target in re.findall(r"\[[^\]]*?§([0-9.]+)\]\(([^)]*)\)", text):
            file_part, _, anchor = target.partition("#")
            linked = (doc.parent / file_part).resolve() if file_part else doc
            number = re.match(r"[0-9]+", anchor)
            if number is None or number.group() != shown.replace(".", ""):
                wrong.append(f"{doc.relative_to(ROOT)}: §{shown} -> {target}")
            elif anchor not in _anchors(linked):
                wrong.append(f"{doc.relative_to(ROOT)}: no heading for {target}")
    assert wrong == []


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in _LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        assert linked.exists(), f"{doc.name}: broken link `{target}`"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{doc.name}: no heading for `{target}`"
