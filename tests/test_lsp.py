"""`harnessc lsp` driven over stdio as an editor drives it: one server for the module, specs
written to a temporary folder, every answer read as the editor reads it (ranges, codes, edits)."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from harnessc.compiler.lsp.client import ClientError, StdioClient
from harnessc.compiler.lsp.complete import complete as complete_at
from harnessc.compiler.lsp.complete import keywords_at
from harnessc.compiler.lsp.convert import to_lsp
from harnessc.compiler.lsp.positions import Positions
from harnessc.compiler.lsp.signatures import signature_at
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from lsprotocol import types as lsp

MAIN = """\
harness demo {
  version "1.0.0"
}

import std.workspace
import "./lib.harness" as lib

fact release.freeze: bool

tool deploy {
  summary "Deploy a build to an environment."
  use_when "A build passed its tests."
  effects write external
  risk high
  input {
    environment: enum("staging", "production")
    build: string
  }
}

surface main {
  expose deploy, read_open, lib.*
}

policy release {
  default deny

  to_staging: allow deploy when args.environment == "staging"
  to_production: ask deploy when args.environment == "production" {
    approver role "release-manager"
  }
  frozen: deny deploy when not release.freeze == false {
    reason "Releases are frozen."
  }
  allow read_open
  allow lookup
}

agent shipper {
  surface main
  policy release
}
"""
LIB = """\
tool lookup {
  summary "Look a build up."
  use_when "Before a deploy."
  effects read
  input { build: string }
}
"""
TIMEOUT = 120  # generous: the machine may be loaded; nothing here measures time
versions = itertools.count(2)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lsp")
    (root / "main.harness").write_text(MAIN, encoding="utf-8")
    (root / "lib.harness").write_text(LIB, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def client(folder: Path) -> Iterator[StdioClient]:
    server = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(folder))
    result = server.initialize(folder.as_uri())
    assert result["capabilities"]["hoverProvider"]
    yield server
    server.close()


def uri(folder: Path, name: str) -> str:
    return (folder / name).as_uri()


def edit(client: StdioClient, address: str, text: str) -> list[dict]:
    """Change a document's unsaved text; the diagnostics published for that version."""
    version = next(versions)
    client.change(address, text, version)
    return client.diagnostics(address, version, timeout=TIMEOUT)


def underlined(text: str, found: dict) -> str:
    source = Source("x", text)
    positions = Positions()
    start = positions.offset(source, lsp.Position(**found["range"]["start"]))
    end = positions.offset(source, lsp.Position(**found["range"]["end"]))
    return text[start:end]


def position_of(text: str, needle: str, nth: int = 0, inside: int = 1) -> dict:
    """The position `inside` characters into the `nth` occurrence of `needle`."""
    offset = -1
    for _ in range(nth + 1):
        offset = text.index(needle, offset + 1)
    source = Source("x", text)
    position = Positions().position(source, offset + inside)
    return {"line": position.line, "character": position.character}


@pytest.fixture(scope="module")
def main(client: StdioClient, folder: Path) -> str:
    address = uri(folder, "main.harness")
    client.open(address, MAIN)
    assert client.diagnostics(address, 1, timeout=TIMEOUT) == []
    return address


# ---------------------------------------------------------------------------------------------
# Diagnostics


def test_errors_are_published_with_codes_ranges_links_and_related_locations(
    client: StdioClient, main: str
) -> None:
    broken = MAIN.replace("allow lookup", "allow lokup").replace(
        "agent shipper {", 'tool deploy {\n  summary "again"\n}\n\nagent shipper {'
    )
    found = {d["code"]: d for d in edit(client, main, broken)}
    assert set(found) == {"H201", "H202"}
    unknown = found["H201"]
    assert underlined(broken, unknown) == "lokup"
    assert unknown["severity"] == lsp.DiagnosticSeverity.Error
    assert unknown["codeDescription"]["href"] == "harnessc:explain/H201"
    assert "did you mean `lookup`?" in unknown["message"]
    twice = found["H202"]
    related = twice["relatedInformation"]
    assert related[0]["message"] == "first defined here"
    assert related[0]["location"]["uri"] == main
    assert related[0]["location"]["range"]["start"]["line"] == MAIN[: MAIN.index("deploy {")].count(
        "\n"
    )
    assert edit(client, main, MAIN) == []


def test_a_syntax_error_then_its_fix(client: StdioClient, main: str) -> None:
    unclosed = MAIN.replace("  }\n}\n\nsurface", "  }\n\nsurface")
    found = edit(client, main, unclosed)
    assert [d["code"] for d in found] == ["H102"]
    assert edit(client, main, MAIN) == []


def test_lint_warnings_are_published_and_an_ignore_comment_silences_them(
    client: StdioClient, main: str
) -> None:
    unguarded = MAIN.replace("not release.freeze == false", "release.freeze")
    found = edit(client, main, unguarded)
    assert [d["code"] for d in found] == ["L004"]
    assert found[0]["severity"] == lsp.DiagnosticSeverity.Warning
    assert underlined(unguarded, found[0]) == "release.freeze"
    silenced = unguarded.replace(
        "when release.freeze {", "when release.freeze {  # harnessc: ignore[L004] a test"
    )
    assert edit(client, main, silenced) == []
    assert edit(client, main, MAIN) == []


def test_an_unsaved_change_to_an_imported_file_rechecks_the_files_that_import_it(
    client: StdioClient, main: str, folder: Path
) -> None:
    library = uri(folder, "lib.harness")
    client.open(library, LIB)
    assert client.diagnostics(library, 1, timeout=TIMEOUT) == []
    assert client.diagnostics(main, timeout=TIMEOUT) == []  # main imports it: checked again
    renamed = LIB.replace("tool lookup", "tool find")
    client.change(library, renamed, next(versions))
    found = client.diagnostics(main, timeout=TIMEOUT)  # main imports it: checked again
    assert [(d["code"], underlined(MAIN, d)) for d in found] == [("H201", "lookup")]
    client.change(library, LIB, next(versions))
    assert client.diagnostics(main, timeout=TIMEOUT) == []
    client.notify("textDocument/didClose", {"textDocument": {"uri": library}})
    assert client.diagnostics(library, timeout=TIMEOUT) == []
    assert (folder / "lib.harness").read_text(encoding="utf-8") == LIB  # nothing saved


def test_an_imported_file_that_is_not_open_gets_its_diagnostics_from_the_importer(
    client: StdioClient, folder: Path
) -> None:
    part = folder / "part.harness"
    part.write_text(
        'tool part {\n  summary "Part."\n  use_when "Always."\n  effects reed\n}\n',
        encoding="utf-8",
    )
    importer = 'import "./part.harness"\n\npolicy p {\n  default deny\n\n  allow part\n}\n'
    (folder / "importer.harness").write_text(importer, encoding="utf-8")
    address = uri(folder, "importer.harness")
    client.open(address, importer)
    found = client.diagnostics(part.as_uri(), timeout=TIMEOUT)
    assert any("`reed`" in d["message"] for d in found), found
    part.write_text(
        'tool part {\n  summary "Part."\n  use_when "Always."\n  effects read\n}\n',
        encoding="utf-8",
    )
    client.change(address, importer + "\n", next(versions))  # the next check reads it again
    assert client.diagnostics(part.as_uri(), timeout=TIMEOUT) == []
    client.notify("textDocument/didClose", {"textDocument": {"uri": address}})
    assert client.diagnostics(address, timeout=TIMEOUT) == []


def test_a_change_on_disk_to_an_imported_file_rechecks_the_files_that_import_it(
    client: StdioClient, main: str, folder: Path
) -> None:
    library = folder / "lib.harness"
    changed = {"changes": [{"uri": library.as_uri(), "type": 2}]}
    library.write_text(LIB.replace("tool lookup", "tool find"), encoding="utf-8")
    try:
        client.notify("workspace/didChangeWatchedFiles", changed)
        found = client.diagnostics(main, timeout=TIMEOUT)
        assert [(d["code"], underlined(MAIN, d)) for d in found] == [("H201", "lookup")]
    finally:
        library.write_text(LIB, encoding="utf-8")
    client.notify("workspace/didChangeWatchedFiles", changed)
    assert client.diagnostics(main, timeout=TIMEOUT) == []


# ---------------------------------------------------------------------------------------------
# Hover, definition, references


def hover(client: StdioClient, address: str, position: dict) -> str:
    answer = client.request(
        "textDocument/hover", {"textDocument": {"uri": address}, "position": position}
    )
    return answer["contents"]["value"] if answer else ""


def test_hover_on_a_tool_shows_its_summary_effects_risk_and_input(
    client: StdioClient, main: str
) -> None:
    text = hover(client, main, position_of(MAIN, "allow deploy"[6:], inside=2))
    assert "Deploy a build to an environment." in text
    assert "effects: external write · risk: high" in text
    assert 'environment: enum("staging", "production")' in text


def test_hover_on_a_tool_shows_its_output_shape_and_the_trust_of_unlisted_fields(
    client: StdioClient, main: str
) -> None:
    shaped = MAIN.replace(
        "    build: string\n  }\n}",
        "    build: string\n  }\n  output list<{ id: string trusted, ... }>\n}",
    )
    assert shaped != MAIN
    edit(client, main, shaped)
    text = hover(client, main, position_of(shaped, "allow deploy"[6:], inside=2))
    assert "output list<{ id: string trusted, ... }>" in text
    assert "Unlisted fields (an open record's `...`, an `any`) carry the tool's trust: " in text
    assert "untrusted; a field's own trust speaks for listed fields only" in text
    edit(client, main, MAIN)


def test_hover_on_a_reference_names_what_it_refers_to_and_where(
    client: StdioClient, main: str
) -> None:
    text = hover(client, main, position_of(MAIN, "  policy release\n}", inside=10))
    assert text.startswith("**policy** `release`  \n*main.harness:25*")
    text = hover(client, main, position_of(MAIN, "when not release.freeze", inside=12))
    assert "**fact** `release.freeze`" in text and "fact release.freeze: bool" in text


def test_hover_on_a_rule_shows_its_effect_reason_and_a_call_it_decides(
    client: StdioClient, main: str
) -> None:
    text = hover(client, main, position_of(MAIN, "frozen: deny", inside=9))
    assert "`release.frozen`: **DENY**" in text
    assert "reason: Releases are frozen." in text
    assert "wins under `demo.release`" in text


def test_hover_on_a_selector_lists_the_tools_it_matches(client: StdioClient, main: str) -> None:
    text = hover(client, main, position_of(MAIN, "lib.*", inside=1))
    assert "`lib.*` selects 1 tool(s): `lookup`" in text
    globbed = MAIN.replace("allow read_open", "allow effects has read")
    edit(client, main, globbed)
    text = hover(client, main, position_of(globbed, "effects has read", inside=1))
    assert "`effects has read` selects" in text
    assert "`read_open`" in text and "`lookup`" in text and "`deploy`" not in text
    edit(client, main, MAIN)


def test_hover_on_an_expose_pattern_lists_the_tools_it_exposes(
    client: StdioClient, main: str
) -> None:
    exposing = MAIN.replace("expose deploy, read_open, lib.*", "expose deploy, kind:public")
    edit(client, main, exposing)
    text = hover(client, main, position_of(exposing, "kind:public", inside=2))
    assert "`kind:public` selects" in text
    assert "`deploy`" in text and "`lookup`" in text and "`read_open`" in text
    edit(client, main, MAIN)


def test_hover_on_a_code_in_an_ignore_comment_explains_it(client: StdioClient, main: str) -> None:
    commented = MAIN.replace("allow read_open", "allow read_open  # harnessc: ignore[L014]")
    assert edit(client, main, commented) == []
    text = hover(client, main, position_of(commented, "L014", inside=2))
    assert text.startswith("**L014**")
    assert edit(client, main, MAIN) == []


def test_hover_on_a_diagnostic_explains_its_code(client: StdioClient, main: str) -> None:
    broken = MAIN.replace("allow lookup", "allow lokup")
    edit(client, main, broken)
    text = hover(client, main, position_of(broken, "lokup", inside=2))
    assert "**H201** `unknown-name`" in text
    assert edit(client, main, MAIN) == []


def test_definition_of_a_standard_library_tool_opens_the_standard_library(
    client: StdioClient, main: str
) -> None:
    answer = client.request(
        "textDocument/definition",
        {"textDocument": {"uri": main}, "position": position_of(MAIN, "allow read_open", inside=8)},
    )
    assert answer["uri"].endswith("/workspace.harness")
    target = Path(answer["uri"].removeprefix("file://")).read_text(encoding="utf-8")
    assert underlined(target, answer) == "read_open"


def test_definition_across_a_file_import(client: StdioClient, main: str, folder: Path) -> None:
    answer = client.request(
        "textDocument/definition",
        {"textDocument": {"uri": main}, "position": position_of(MAIN, "allow lookup", inside=8)},
    )
    assert answer["uri"] == uri(folder, "lib.harness")
    assert underlined(LIB, answer) == "lookup"


def test_references_of_a_tool(client: StdioClient, main: str) -> None:
    answer = client.request(
        "textDocument/references",
        {
            "textDocument": {"uri": main},
            "position": position_of(MAIN, "tool deploy", inside=6),
            "context": {"includeDeclaration": True},
        },
    )
    lines = sorted(r["range"]["start"]["line"] for r in answer)
    expected = [
        MAIN[: MAIN.index(needle)].count("\n")
        for needle in ("tool deploy", "expose deploy", "allow deploy", "ask deploy", "deny deploy")
    ]
    assert lines == sorted(expected)


# ---------------------------------------------------------------------------------------------
# Rename


def renamed(
    client: StdioClient, address: str, text: str, needle: str, new: str, inside: int = 1
) -> dict[str, list[dict]]:
    """The edits of a rename at `needle`, by document URI."""
    answer = client.request(
        "textDocument/rename",
        {
            "textDocument": {"uri": address},
            "position": position_of(text, needle, inside=inside),
            "newName": new,
        },
    )
    return answer["changes"]


def applied(text: str, edits: list[dict]) -> str:
    return apply(text, {"edit": {"changes": {"x": edits}}}, "x")


def test_prepare_rename_names_the_span_and_refuses_where_nothing_is_renamed(
    client: StdioClient, main: str
) -> None:
    answer = client.request(
        "textDocument/prepareRename",
        {"textDocument": {"uri": main}, "position": position_of(MAIN, "ask deploy", inside=5)},
    )
    assert answer["placeholder"] == "deploy"
    assert underlined(MAIN, answer) == "deploy"
    for needle, why in (("default deny", "no name here"), ("read_open\n", "standard library")):
        with pytest.raises(ClientError, match=why):
            client.request(
                "textDocument/prepareRename",
                {"textDocument": {"uri": main}, "position": position_of(MAIN, needle, inside=2)},
            )


def test_rename_a_tool_across_files_and_its_python_executor_is_named(
    client: StdioClient, main: str, folder: Path
) -> None:
    (folder / "app.py").write_text(
        'def bind(h):\n    h.bind("lookup", print)\n    h.bind("deploy", print)\n',
        encoding="utf-8",
    )
    try:
        changes = renamed(client, main, MAIN, "allow lookup", "find_build", inside=7)
        warning = client.wait_for(
            "window/showMessage", lambda p: "find_build" in p["message"], timeout=TIMEOUT
        )
    finally:
        (folder / "app.py").unlink()
    assert applied(MAIN, changes[main]) == MAIN.replace("allow lookup", "allow find_build")
    lib = uri(folder, "lib.harness")
    assert applied(LIB, changes[lib]) == LIB.replace("tool lookup", "tool find_build")
    assert warning["type"] == lsp.MessageType.Warning
    assert "app.py:2 (`bind`)" in warning["message"] and "app.py:3" not in warning["message"]


def test_rename_edits_a_spec_that_is_not_open_but_imports_the_declaration(
    client: StdioClient, main: str, folder: Path
) -> None:
    other = 'import "./lib.harness" as lib\n\npolicy other {\n  allow lookup\n}\n'
    (folder / "other.harness").write_text(other, encoding="utf-8")
    (folder / "unrelated.harness").write_text(
        'tool lookup {\n  summary "s"\n  use_when "u"\n}\n', encoding="utf-8"
    )
    try:
        changes = renamed(client, main, MAIN, "allow lookup", "find_build", inside=7)
    finally:
        (folder / "other.harness").unlink()
        (folder / "unrelated.harness").unlink()
    assert applied(other, changes[uri(folder, "other.harness")]) == other.replace(
        "allow lookup", "allow find_build"
    )
    assert uri(folder, "unrelated.harness") not in changes  # its own `lookup`, not lib's


def test_rename_a_fact_a_rule_label_and_an_import_alias(client: StdioClient, main: str) -> None:
    changes = renamed(client, main, MAIN, "release.freeze == false", "release.frozen", inside=9)
    assert applied(MAIN, changes[main]) == MAIN.replace("release.freeze", "release.frozen")
    changes = renamed(client, main, MAIN, "frozen: deny", "freeze_all")
    assert applied(MAIN, changes[main]) == MAIN.replace("frozen: deny", "freeze_all: deny")
    expected = MAIN.replace("as lib\n", "as library\n").replace("lib.*", "library.*")
    for needle in ("as lib", "lib.*"):  # from the import or from a name read through it
        changes = renamed(client, main, MAIN, needle, "library", inside=len(needle) - 2)
        assert applied(MAIN, changes[main]) == expected


@pytest.mark.parametrize(
    ("needle", "new", "why"),
    [
        ("tool deploy", "lookup", "already the name of a tool, declared at lib.harness:1"),
        ("tool deploy", "when", "is a keyword"),
        ("tool deploy", "2fast", "not a valid tool name"),
        ("tool deploy", "std.deploy", "reserved for the standard library"),
        ("to_staging:", "frozen", "already the name of a rule label"),
        ("policy release", "ship it", "not a valid policy name"),
        ("fact release.freeze", "args.freeze", "read as the built-in `args`"),
        ("as lib", "workspace", "already names an import"),
    ],
)
def test_rename_refuses_a_name_that_would_not_mean_the_same(
    client: StdioClient, main: str, needle: str, new: str, why: str
) -> None:
    inside = needle.index(" ") + 2 if " " in needle else 1
    with pytest.raises(ClientError, match=re.escape(why)):
        renamed(client, main, MAIN, needle, new, inside=inside)


# ---------------------------------------------------------------------------------------------
# Semantic tokens


def decoded(text: str, data: list[int], legend: dict) -> list[tuple[str, str, list[str]]]:
    """(text, type, modifiers) of each token of the protocol's relative encoding."""
    lines = text.split("\n")
    found = []
    line = start = 0
    for index in range(0, len(data), 5):
        delta_line, delta_start, length, kind, bits = data[index : index + 5]
        line += delta_line
        start = start + delta_start if delta_line == 0 else delta_start
        modifiers = [m for i, m in enumerate(legend["tokenModifiers"]) if bits & (1 << i)]
        found.append((lines[line][start : start + length], legend["tokenTypes"][kind], modifiers))
    return found


SESSION = MAIN.replace(
    "  allow read_open\n",
    "  allow read_open when count(deploy within 1h) < 3 and args.path from label secret\n",
)


def test_semantic_tokens_colour_what_each_name_means(client: StdioClient, main: str) -> None:
    legend = client.capabilities["semanticTokensProvider"]["legend"]
    edit(client, main, SESSION)
    try:
        answer = client.request("textDocument/semanticTokens/full", {"textDocument": {"uri": main}})
    finally:
        edit(client, main, MAIN)
    found = decoded(SESSION, answer["data"], legend)
    meaning = {(text, kind) for text, kind, _ in found}
    for expected in [
        ("deploy", "tool"),
        ("read_open", "tool"),
        ("release.freeze", "fact"),
        ("to_staging", "rule"),
        ("release", "policy"),
        ("main", "surface"),
        ("lib", "namespace"),
        ("count", "sessionTerm"),
        ("secret", "label"),
        ("1h", "duration"),
        ("3", "number"),
        ('"staging"', "string"),
        ("when", "keyword"),
        ("==", "operator"),
        ("args", "variable"),
        ("environment", "property"),
        ("shipper", "class"),
    ]:
        assert expected in meaning, expected
    assert ("deploy", "tool", ["declaration"]) in found
    assert ("read_open", "tool", ["defaultLibrary"]) in found
    # a word is a keyword only where the grammar reads one: `default` here, not in a field
    assert ("default", "keyword") in meaning


def test_semantic_tokens_delta_is_the_change_since_the_last_result(
    client: StdioClient, main: str
) -> None:
    first = client.request("textDocument/semanticTokens/full", {"textDocument": {"uri": main}})
    changed = MAIN.replace("allow lookup", 'allow lookup\n  deny deploy when args.build == "x"')
    edit(client, main, changed)
    try:
        answer = client.request(
            "textDocument/semanticTokens/full/delta",
            {"textDocument": {"uri": main}, "previousResultId": first["resultId"]},
        )
        full = client.request("textDocument/semanticTokens/full", {"textDocument": {"uri": main}})
    finally:
        edit(client, main, MAIN)
    (change,) = answer["edits"]
    data = list(first["data"])
    data[change["start"] : change["start"] + change["deleteCount"]] = change.get("data") or []
    assert data == full["data"] and len(change.get("data") or []) < len(full["data"]) // 2
    stale = client.request(
        "textDocument/semanticTokens/full/delta",
        {"textDocument": {"uri": main}, "previousResultId": "no such result"},
    )
    assert "data" in stale  # not a delta of tokens the editor does not have: all of them


# ---------------------------------------------------------------------------------------------
# Inlay hints

HINTED = """\
tool ship {
  summary "Ship."
  use_when "Now."
  effects write
  timeout 90m
  input { environment: enum("staging", "production") }
}

policy shipping {
  default deny

  everything: deny ship {
    reason "No."
  }
  staging: allow ship when args.environment == "staging"
  allow ship when args.environment == "production" and args.environment == "staging"
}
"""


def test_inlay_hints_say_what_the_analysis_found_and_a_durations_plain_form(
    client: StdioClient, folder: Path
) -> None:
    address = uri(folder, "hinted.harness")
    client.open(address, HINTED)
    try:
        client.diagnostics(address, 1, timeout=TIMEOUT)
        answer = client.request(
            "textDocument/inlayHint",
            {
                "textDocument": {"uri": address},
                "range": {
                    "start": {"line": 0, "character": 0},
                    "end": {"line": 99, "character": 0},
                },
            },
        )
    finally:
        client.notify("textDocument/didClose", {"textDocument": {"uri": address}})
    lines = HINTED.split("\n")
    shown = [
        (lines[h["position"]["line"]][: h["position"]["character"]].strip(), h["label"])
        for h in answer
    ]
    assert shown == [
        ("timeout 90m", "= 1h30m"),
        ("staging: allow", "shadowed by `shipping.everything`"),
        ("allow", "never matches"),
    ]
    assert "can never win" in answer[1]["tooltip"]


# ---------------------------------------------------------------------------------------------
# Completion


def complete(client: StdioClient, address: str, text: str, needle: str) -> list[str]:
    """Completion at the end of `needle` in `text` (the document's unsaved text)."""
    position = position_of(text, needle, inside=len(needle))
    answer = client.request(
        "textDocument/completion", {"textDocument": {"uri": address}, "position": position}
    )
    items = answer["items"] if isinstance(answer, dict) else answer
    return [item["label"] for item in items]


def test_completion_of_tool_ids_in_a_selector(client: StdioClient, main: str) -> None:
    typing = MAIN.replace("  allow lookup\n", "  allow lookup\n  deny \n")
    edit(client, main, typing)
    labels = complete(client, main, typing, "  deny ")
    assert {"deploy", "lookup", "read_open", "write_file"} <= set(labels)
    edit(client, main, MAIN)


def test_completion_of_argument_names_and_enum_values(client: StdioClient, main: str) -> None:
    assert set(complete(client, main, MAIN, "when args.")) == {"environment", "build"}
    assert complete(client, main, MAIN, 'args.environment == "') == ["staging", "production"]


def test_completion_of_approver_roles_keywords_and_facts(client: StdioClient, main: str) -> None:
    assert complete(client, main, MAIN, 'approver role "') == ["release-manager"]
    in_condition = complete(client, main, MAIN, "frozen: deny deploy when ")
    assert "release.freeze" in in_condition
    assert {"seen", "urls", "params", "segments"} <= set(in_condition)


def test_completion_of_the_keywords_the_grammar_accepts_there(
    client: StdioClient, main: str
) -> None:
    options = complete(client, main, MAIN, '    reason "Releases are frozen."\n')
    assert set(options) == {"approver", "expires", "grant", "instead", "reason", "self_approval"}
    assert set(complete(client, main, MAIN, "  default deny\n")) >= {"allow", "ask", "deny"}
    assert "use_when" in complete(client, main, MAIN, "tool deploy {\n")
    assert "allow" not in complete(client, main, MAIN, "tool deploy {\n")
    top = complete(client, main, MAIN, "}\n\n")
    assert {"tool", "policy", "workflow", "risk_table"} <= set(top) and "allow" not in top
    assert "not" in complete(client, main, MAIN, "frozen: deny deploy when ")


def test_no_completion_while_a_comment_is_typed() -> None:
    # space is a trigger character: typing prose in a comment must not pop keywords up
    text = "policy p {\n  default deny\n  # allow this for "
    assert complete_at(None, None, text, len(text)) == []
    # a `#` inside a string is no comment, and a comment after a string is one
    reason = 'policy p {\n  default deny\n  deny x { reason "no # here" }\n  '
    assert "allow" in [i.label for i in complete_at(None, None, reason, len(reason))]
    assert complete_at(None, None, reason + "# a", len(reason) + 3) == []


def test_completion_after_from_offers_the_sources() -> None:
    """After `from` in a condition: the kinds, `label`, and `result(` with its form; after an
    `on_success … from`, a fact comes, not a source."""
    for text in (
        "policy p {\n  allow t when args.x from ",
        "policy p {\n  allow t when all r in args.to: r from tr",
    ):
        items = {i.label: i for i in complete_at(None, None, text, len(text))}
        assert list(items) == ["user", "trusted", "untrusted", "nowhere", "label", "result"]
        assert items["result"].insert_text == "result("
        assert "result[.FIELD](" in (items["result"].detail or "")
    update = "tool t {\n  on_success remove args.x from "
    assert "user" not in [i.label for i in complete_at(None, None, update, len(update))]
    typing = "policy p {\n  allow t when args.x from result.sender(mail.read when "
    found = signature_at(typing, len(typing))
    assert found is not None and found.signatures[0].label.startswith("result[.FIELD](")
    assert found.active_parameter == 2


def test_signature_help_names_the_part_being_typed(client: StdioClient, main: str) -> None:
    typing = MAIN.replace(
        "  allow lookup\n", "  allow lookup\n  deny deploy when count(deploy within 1h when \n"
    )
    edit(client, main, typing)
    position = position_of(typing, "within 1h when ", inside=len("within 1h when "))
    found = client.request(
        "textDocument/signatureHelp", {"textDocument": {"uri": main}, "position": position}
    )
    edit(client, main, MAIN)
    [signature] = found["signatures"]
    assert signature["label"] == "count(SELECTOR, … within DURATION when CONDITION)"
    assert found["activeParameter"] == 2  # the `when` part
    assert [p["label"] for p in signature["parameters"]] == [
        "SELECTOR, …",
        "within DURATION",
        "when CONDITION",
    ]


@pytest.mark.parametrize(
    ("typed", "label", "part"),
    [
        (
            "deny t when sum(args.amount",
            "sum(FIELD of SELECTOR, … within DURATION when CONDITION)",
            0,
        ),
        (
            "deny t when sum(args.amount of pay.*",
            "sum(FIELD of SELECTOR, … within DURATION when CONDITION)",
            1,
        ),
        (
            "deny t when called(a.read, b.read",
            "called(SELECTOR, … within DURATION when CONDITION)",
            0,
        ),
        ("deny t when seen(pii within", "seen(LABEL within DURATION)", 1),
        ("deny t when any u in urls(args.body", "urls(TEXT)", 0),
        ("deny t when any v in params(args.url", "params(URL_OR_TEXT)", 0),
        ("deny t when any v in segments(", "segments(URL_OR_TEXT)", 0),
        ("deny t when any u in urls(args.body)", "any VARIABLE in LIST: CONDITION", 1),
        ("deny t when all r in args.to: ", "all VARIABLE in LIST: CONDITION", 2),
        ("deny t when connected(", "connected(CONNECTION)", 0),
    ],
)
def test_signature_at_each_function_and_quantifier(typed: str, label: str, part: int) -> None:
    text = f"policy p {{\n  {typed}"
    found = signature_at(text, len(text))
    assert found is not None
    assert (found.signatures[0].label, found.active_parameter) == (label, part)


@pytest.mark.parametrize(
    "typed",
    [
        "deny t when count(a) > 3 and ",  # the call is closed
        "deny t when (a == 1",  # a parenthesised condition
        "deny t when all r in args.to: r from user",  # the body is written
        "deny t when args.x == ",
    ],
)
def test_no_signature_outside_a_form(typed: str) -> None:
    text = f"policy p {{\n  {typed}"
    assert signature_at(text, len(text)) is None


def test_keywords_at_a_half_typed_word_and_in_text_that_does_not_parse() -> None:
    text = "policy p {\n  default deny\n  al"
    assert "allow" in keywords_at(text, len(text) - 2)
    assert keywords_at("tool { {", 8) == []


# ---------------------------------------------------------------------------------------------
# Formatting, symbols, folding, code actions


def test_formatting_edits_only_the_lines_that_change(client: StdioClient, main: str) -> None:
    canonical = format_source(Source("m", MAIN)).text
    assert canonical is not None
    messy = canonical.replace("  default deny", "default    deny").replace(
        "  allow lookup", "  allow    lookup"
    )
    edit(client, main, messy)
    answer = client.request(
        "textDocument/formatting",
        {"textDocument": {"uri": main}, "options": {"tabSize": 2, "insertSpaces": True}},
    )
    assert applied(messy, answer) == format_source(Source("m", messy)).text
    assert [e["newText"] for e in answer] == ["  default deny\n", "  allow lookup\n"]
    line = messy[: messy.index("default    deny")].count("\n")
    answer = client.request(
        "textDocument/rangeFormatting",
        {
            "textDocument": {"uri": main},
            "range": {
                "start": {"line": line, "character": 0},
                "end": {"line": line, "character": 3},
            },
            "options": {"tabSize": 2, "insertSpaces": True},
        },
    )
    assert applied(messy, answer) == messy.replace("default    deny", "  default deny")
    edit(client, main, MAIN)
    canonical = format_source(Source("m", MAIN)).text
    edit(client, main, canonical)
    answer = client.request(
        "textDocument/formatting",
        {"textDocument": {"uri": main}, "options": {"tabSize": 2, "insertSpaces": True}},
    )
    assert answer == []
    edit(client, main, MAIN)


def test_document_symbols_and_folding(client: StdioClient, main: str) -> None:
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": main}})
    names = [(s["name"], s["detail"]) for s in symbols]
    assert ("deploy", "tool") in names and ("release", "policy") in names
    policy = next(s for s in symbols if s["name"] == "release")
    assert [c["name"] for c in policy["children"]][:3] == ["to_staging", "to_production", "frozen"]
    folds = client.request("textDocument/foldingRange", {"textDocument": {"uri": main}})
    starts = {f["startLine"] for f in folds}
    assert MAIN[: MAIN.index("policy release")].count("\n") in starts


def test_workspace_symbols_find_declarations_across_the_projects_specs(
    tmp_path: Path,
) -> None:
    (tmp_path / "main.harness").write_text(MAIN, encoding="utf-8")
    (tmp_path / "lib.harness").write_text(LIB, encoding="utf-8")
    # a spec no open document imports, in a folder of the workspace, and one the walk skips
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "rollback.harness").write_text(
        LIB.replace("tool lookup", "tool rollback_build"), encoding="utf-8"
    )
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "old.harness").write_text(
        LIB.replace("tool lookup", "tool stale_copy"), encoding="utf-8"
    )
    server = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(tmp_path))
    try:
        result = server.initialize(tmp_path.as_uri())
        assert result["capabilities"]["workspaceSymbolProvider"]
        address = uri(tmp_path, "main.harness")
        edited = MAIN.replace("deploy", "deploy_now")
        server.open(address, edited)  # the editor's text, not the file's

        def names(query: str) -> list[tuple[str, str | None, str]]:
            found = server.request("workspace/symbol", {"query": query}, timeout=TIMEOUT)
            return sorted(
                (f["name"], f.get("containerName"), Path(f["location"]["uri"]).name) for f in found
            )

        assert names("deploy") == [("deploy_now", None, "main.harness")]
        assert names("toprod") == [("to_production", "release", "main.harness")]
        assert names("LOOKUP") == [("lookup", None, "lib.harness")]
        assert names("rollback") == [("rollback_build", None, "rollback.harness")]
        assert names("stale") == []
        everything = names("")
        assert ("shipper", None, "main.harness") in everything
        assert not any(name.startswith("allow") for name, _, _ in everything)
    finally:
        server.close()


def actions(client: StdioClient, address: str, found: list[dict]) -> list[dict]:
    return client.request(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": address},
            "range": found[0]["range"],
            "context": {"diagnostics": found},
        },
    )


def apply(text: str, action: dict, address: str) -> str:
    source = Source("x", text)
    positions = Positions()
    edits = action["edit"]["changes"][address]
    for change in sorted(
        edits,
        key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]),
        reverse=True,
    ):
        start = positions.offset(source, lsp.Position(**change["range"]["start"]))
        end = positions.offset(source, lsp.Position(**change["range"]["end"]))
        text = text[:start] + change["newText"] + text[end:]
        source = Source("x", text)
    return text


@pytest.mark.parametrize(
    ("broken", "title"),
    [
        (MAIN.replace("allow lookup", "allow lokup"), "replace with `lookup`"),
        (MAIN.replace("  }\n}\n\nsurface", "  }\n\nsurface"), "add the missing `}`"),
        (MAIN.replace("    build: string\n  }\n", "    build: string\n"), "add the missing `}`"),
        (MAIN.replace('    reason "Releases are frozen."\n', ""), 'add `reason "…"`'),
        (
            MAIN.replace(' {\n    reason "Releases are frozen."\n  }', ""),
            'add `reason "…"`',
        ),
        (
            MAIN.replace(' {\n    approver role "release-manager"\n  }', ""),
            'add `approver role "…"`',
        ),
        (MAIN.replace('  use_when "A build passed its tests."\n', ""), 'add `use_when "…"`'),
        (MAIN.replace('  summary "Deploy a build to an environment."\n', ""), 'add `summary "…"`'),
        (
            MAIN.replace("import std.workspace\n", "import std.workspace\nimport std.mail\n"),
            "remove the import",
        ),
        (
            MAIN.replace("import std.workspace\n", "")
            .replace("expose deploy, read_open, lib.*", "expose deploy, lib.*")
            .replace("allow read_open", 'deny std.workspace.* { reason "Not here." }'),
            "add `import std.workspace`",
        ),
    ],
)
def test_a_code_action_fixes_the_diagnostic(
    client: StdioClient, main: str, broken: str, title: str
) -> None:
    found = edit(client, main, broken)
    assert len(found) == 1
    offered = actions(client, main, found)
    assert [a["title"] for a in offered] == [title]
    fixed = apply(broken, offered[0], main)
    remaining = edit(client, main, fixed)
    assert remaining == [], remaining
    edit(client, main, MAIN)


OPTIONAL = """\
tool deploy {
  summary "Deploy."
  use_when "Always."
  effects write
  input {
    environment: enum("staging", "production")
    ticket: string?
  }
}

policy release {
  default deny

  allow deploy
  no_ticket: deny deploy when args.ticket == "none" or args.environment == "production" {
    reason "A ticket is needed."
  }
}
"""


def test_a_has_guard_for_a_value_that_may_be_absent(client: StdioClient, folder: Path) -> None:
    (folder / "optional.harness").write_text(OPTIONAL, encoding="utf-8")
    address = uri(folder, "optional.harness")
    client.open(address, OPTIONAL)
    found = client.diagnostics(address, 1, timeout=TIMEOUT)
    assert [d["code"] for d in found] == ["L004"]
    offered = actions(client, address, found)
    assert [a["title"] for a in offered] == ["guard with `args has ticket`"]
    fixed = apply(OPTIONAL, offered[0], address)
    assert '(args has ticket and args.ticket == "none") or' in fixed
    assert edit(client, address, fixed) == []
    client.notify("textDocument/didClose", {"textDocument": {"uri": address}})
    assert client.diagnostics(address, timeout=TIMEOUT) == []


def test_completion_in_a_call_being_typed_and_definition_of_a_step(
    client: StdioClient, main: str
) -> None:
    typing = MAIN + "\nworkflow ship {\n  agent shipper\n  step go = call deploy("
    assert edit(client, main, typing) != []  # half typed: a syntax error
    assert set(complete(client, main, typing, "call deploy(")) == {"environment", "build"}
    typing += 'environment: "'
    edit(client, main, typing)
    assert complete(client, main, typing, 'environment: "') == ["staging", "production"]
    typing += 'staging",\n    build: "b-1",\n    '
    edit(client, main, typing)
    assert set(complete(client, main, typing, 'build: "b-1",\n    ')) == {"environment", "build"}
    flow = MAIN + (
        "\nworkflow ship {\n  agent shipper\n"
        '  step find = call lookup(build: "b-1")\n'
        '  step go = call deploy(environment: "staging", build: "b-1") after find\n}\n'
    )
    edit(client, main, flow)
    answer = client.request(
        "textDocument/definition",
        {"textDocument": {"uri": main}, "position": position_of(flow, "after find", inside=7)},
    )
    assert answer["range"]["start"]["line"] == flow[: flow.index("step find")].count("\n")
    assert underlined(flow, answer) == "find"
    text = hover(client, main, position_of(flow, "after find", inside=7))
    assert text.startswith("**step** `find`")
    assert '```harness\nstep find = call lookup(build: "b-1")\n```' in text
    edit(client, main, MAIN)


def test_shutdown_and_exit_and_asking_to_watch_specs_on_disk(folder: Path) -> None:
    server = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(folder))
    watching = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
    server.initialize(folder.as_uri(), watching)
    asked = server.asked.get(timeout=TIMEOUT)
    assert asked["method"] == "client/registerCapability"
    (registration,) = asked["params"]["registrations"]
    assert registration["method"] == "workspace/didChangeWatchedFiles"
    assert registration["registerOptions"]["watchers"] == [{"globPattern": "**/*.harness"}]
    assert server.close() == 0


def test_positions_count_utf16_units() -> None:
    source = Source("x", 'tool t { summary "héllo 😀 x" }\n')
    positions = Positions()
    offset = source.text.index("x")
    position = positions.position(source, offset)
    assert position.character == offset + 1  # the emoji is two UTF-16 units
    assert positions.offset(source, position) == offset
    assert Positions("utf-32").position(source, offset).character == offset


def test_lsp_help_succeeds_as_the_vs_code_extension_checks() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "lsp", "--help"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0
    assert "language server" in done.stdout


def test_every_request_at_every_place_of_the_example_answers_without_an_error() -> None:
    """Hover, definition, completion and the code actions' parses, in process, at a spread of
    offsets of the remediation example, as it is and cut short (half typed)."""
    from harnessc.compiler.lsp import actions, complete, navigate
    from harnessc.compiler.lsp.workspace import Workspace

    spec = (
        Path(__file__).resolve().parent.parent / "examples" / "remediation" / "remediation.harness"
    )
    text = spec.read_text(encoding="utf-8")
    specs = Workspace()
    path = str(spec.resolve())
    for version, written in enumerate((text, text[: len(text) // 2])):
        specs.open(path, version, written)
        build = specs.check(path)
        assert build is not None
        module = build.module(path)
        assert module is not None and module.source is not None
        source = module.source
        model = (specs.modelled.get(path) or build).result.model
        for offset in range(0, len(written), 211):
            navigate.hover_text(build, source, offset)
            navigate.symbol_at(build, source, offset)
            complete.complete(build, model, written, offset)
        found = [to_lsp(d, build, Positions()) for d in build.own()]
        assert actions.fixes(spec.as_uri(), source, found, Positions()) is not None
