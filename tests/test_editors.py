"""The editor packages: the TextMate grammar (editors/harness.tmLanguage.json) classifies every
character of every spec in the repository, its keywords are the lexer's, and the VS Code
extension carries the same grammar.

The grammar runs on textmate-grammar-python (the `dev` extra), a port of vscode-textmate — the
engine VS Code itself uses — on the real Oniguruma regex library, so what is tested here is the
grammar's behaviour in an editor, not a re-reading of it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harnessc.dsl.builder import engine
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source

from .conftest import ROOT
from .test_markdown_specs import markdown_files, spec_blocks

GRAMMAR = ROOT / "editors" / "harness.tmLanguage.json"
VSCODE = ROOT / "editors" / "vscode"
SCOPE = "source.harness"

Token = tuple[int, int, str, tuple[str, ...]]  # line, column, text, scopes


@functools.cache
def _grammar() -> dict[str, Any]:
    return json.loads(GRAMMAR.read_text(encoding="utf-8"))


@functools.cache
def _parser() -> Any:
    textmate = pytest.importorskip("textmate_grammar.parsers.base")
    # the engine logs every string it steps over at WARNING; none of it is ours to read
    logging.getLogger("textmate_grammar").setLevel(logging.ERROR)
    return textmate.LanguageParser(_grammar())


def tokenize(text: str) -> list[Token]:
    parsed = _parser().parse_string(text)
    if parsed is None:
        return []
    return [(line, col, part, tuple(scopes)) for (line, col), part, scopes in parsed.flatten()]


def unclassified(text: str) -> list[str]:
    """Each stretch of non-blank text that no rule of the grammar gave a scope: `line:col text`."""
    found = []
    for line, col, part, scopes in tokenize(text):
        if scopes == (SCOPE,) and part.strip():
            lead = len(part) - len(part.lstrip())
            found.append(f"{line + 1}:{col + lead + 1} {part.strip()!r}")
    covered = "".join(part for _, _, part, _ in tokenize(text))
    if re.sub(r"\s", "", covered) != re.sub(r"\s", "", text):
        found.append("the engine's tokens do not cover the text")
    return found


# ---------------------------------------------------------------------------------------------
# Every spec of the repository


def _valid(text: str, name: str) -> bool:
    return parse_source(Source(name, text)).ok


def _spec_files() -> list[Any]:
    params = []
    for folder in ("examples", "stdlib", "tests"):
        for path in sorted((ROOT / folder).rglob("*.harness")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            # a test fixture that is not a spec (a syntax error on purpose) is not highlighted
            if folder != "tests" or _valid(text, rel):
                params.append(pytest.param(text, id=rel))
    return params


def _doc_blocks() -> list[Any]:
    params = []
    for path in markdown_files():
        rel = path.relative_to(ROOT).as_posix()
        for block in spec_blocks(path.read_text(encoding="utf-8")):
            if _valid(block.body, rel):
                params.append(pytest.param(block.body, id=f"{rel}:{block.line}"))
    return params


SPECS = _spec_files()
BLOCKS = _doc_blocks()


def test_there_are_specs_to_highlight() -> None:
    assert len(SPECS) > 100
    assert len(BLOCKS) > 50


@pytest.mark.parametrize("text", SPECS)
def test_every_character_of_each_spec_is_classified(text: str) -> None:
    assert unclassified(text) == []


@pytest.mark.parametrize("text", BLOCKS)
def test_every_character_of_each_docs_block_is_classified(text: str) -> None:
    assert unclassified(text) == []


def test_a_character_the_language_does_not_have_is_reported() -> None:
    """The check can fail: `@` and `$` outside strings and comments are no token of the language."""
    found = unclassified('tool t {\n  summary "ok @ $"  # fine @ here\n  risk @low $\n}\n')
    assert found == ["3:8 '@'", "3:13 '$'"]


# ---------------------------------------------------------------------------------------------
# What the scopes are


def _scope_of(text: str, word: str, nth: int = 0) -> str:
    hits = [scopes[-1] for _, _, part, scopes in tokenize(text) if part == word]
    return hits[nth]


SNIPPET = """\
policy release {
  default deny
  engineers_create: allow change.create when actor.role in ["engineer"] and not task has stage
  deny mcp:scanner:tool:scan, pack:release, std.workspace.*, risk >= high {
    reason "a \\"quoted\\" reason"
    grant once ttl 15m
  }
}
"""


@pytest.mark.parametrize(
    ("word", "scope"),
    [
        ("policy", "storage.type.declaration.harness"),
        ("release", "entity.name.type.harness"),
        ("default", "keyword.other.harness"),
        ("deny", "keyword.control.effect.harness"),
        ("engineers_create", "variable.other.key.harness"),
        ("change.create", "variable.other.path.harness"),
        ("when", "keyword.other.harness"),
        ("actor.role", "variable.other.path.harness"),
        ("in", "keyword.operator.word.harness"),
        ("not", "keyword.operator.word.harness"),
        ("task", "keyword.other.harness"),  # a keyword spelt alone, as the lexer may retype it
        ("stage", "variable.other.name.harness"),
        ("mcp:scanner:tool:scan", "entity.name.function.mcp.harness"),
        ("pack:release", "entity.name.function.class.harness"),
        ("std.workspace.*", "entity.name.function.glob.harness"),
        (">=", "keyword.operator.comparison.harness"),
        ('\\"', "constant.character.escape.harness"),
        ("15m", "constant.numeric.duration.harness"),
    ],
)
def test_each_token_kind_gets_its_scope(word: str, scope: str) -> None:
    assert _scope_of(SNIPPET, word) == scope


def test_a_key_outranks_a_keyword_as_in_the_lexer() -> None:
    text = "tool t {\n  input { default: string, pattern: int }\n}\n"
    assert _scope_of(text, "default") == "variable.other.key.harness"
    assert _scope_of(text, "pattern") == "variable.other.key.harness"


# ---------------------------------------------------------------------------------------------
# In step with the lexer


def _grammar_keywords() -> set[str]:
    words: set[str] = set()
    for rule in _grammar()["repository"]["keyword"]["patterns"]:
        m = re.fullmatch(r"\\b\(\?:([a-z_|]+)\)\\b\(\?!\[\.\*\]\)", rule["match"])
        assert m is not None, f"a keyword rule is not a plain list of words: {rule['match']}"
        words |= set(m.group(1).split("|"))
    return words


def test_the_grammars_keywords_are_the_lexers() -> None:
    lexer = set(engine().keyword_types)
    grammar = _grammar_keywords()
    assert sorted(lexer - grammar) == [], "keywords the grammar does not highlight"
    assert sorted(grammar - lexer) == [], "words the grammar highlights that are not keywords"


def test_the_grammar_is_registered_for_harness_files() -> None:
    grammar = _grammar()
    assert grammar["scopeName"] == SCOPE
    assert grammar["fileTypes"] == ["harness"]


# ---------------------------------------------------------------------------------------------
# The VS Code extension


def test_the_vscode_extension_carries_the_same_grammar() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    (language,) = manifest["contributes"]["languages"]
    (grammar,) = manifest["contributes"]["grammars"]
    assert language["id"] == grammar["language"] == "harness"
    assert language["extensions"] == [".harness"]
    assert (VSCODE / language["configuration"]).is_file()
    assert grammar["scopeName"] == SCOPE
    assert (VSCODE / grammar["path"]).read_bytes() == GRAMMAR.read_bytes(), (
        "copy editors/harness.tmLanguage.json into the extension (npm run vscode:prepublish)"
    )
    assert (VSCODE / manifest["main"]).is_file()


def test_the_language_configuration_knows_the_comment_and_brackets() -> None:
    config = json.loads((VSCODE / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"] == {"lineComment": "#"}
    assert ["{", "}"] in config["brackets"]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_extension_script_is_valid_javascript() -> None:
    checked = subprocess.run(
        ["node", "--check", str(VSCODE / "extension.js")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr


_ACTIVATE = r"""
const Module = require("module");
const load = Module._load;
const started = [];
const lines = [];
Module._load = function (request, parent, isMain) {
  if (request === "vscode") {
    return {
      workspace: { getConfiguration: () => ({ get: () => process.env.HARNESSC }) },
      window: { createOutputChannel: () => ({ appendLine: (l) => lines.push(l), dispose() {} }) },
    };
  }
  if (request === "vscode-languageclient/node") {
    class LanguageClient {
      constructor(id, name, server, client) { started.push({ id, server, client }); }
      start() { return Promise.resolve(); }
      stop() { return Promise.resolve(); }
    }
    return { LanguageClient, TransportKind: { stdio: 0 } };
  }
  return load.apply(this, arguments);
};
const extension = require(process.argv[1]);
extension.activate({ subscriptions: [] }).then(() => {
  console.log(JSON.stringify({ started, lines }));
});
"""


def _activate(tmp_path: Path, exit_status: int) -> dict[str, Any]:
    fake = tmp_path / "harnessc"
    fake.write_text(f'#!/bin/sh\n[ "$1" = lsp ] && exit {exit_status}\nexit 2\n')
    fake.chmod(0o755)
    ran = subprocess.run(
        ["node", "-e", _ACTIVATE, str(VSCODE / "extension.js")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", ""), "HARNESSC": str(fake)},
    )
    return json.loads(ran.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_extension_starts_harnessc_lsp_where_it_exists(tmp_path: Path) -> None:
    result = _activate(tmp_path, exit_status=0)
    (client,) = result["started"]
    assert client["server"]["run"]["command"] == str(tmp_path / "harnessc")
    assert client["server"]["run"]["args"] == ["lsp"]
    assert client["client"]["documentSelector"] == [{"language": "harness"}]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_without_a_language_server_the_extension_highlights_only(tmp_path: Path) -> None:
    result = _activate(tmp_path, exit_status=2)
    assert result["started"] == []
    assert "highlighting only" in result["lines"][0]


# ---------------------------------------------------------------------------------------------
# Vim and Neovim (editors/vim): a syntax file with the same keywords


VIM = ROOT / "editors" / "vim"


def test_the_vim_syntax_keywords_are_the_lexers() -> None:
    words: set[str] = set()
    for line in (VIM / "syntax" / "harness.vim").read_text(encoding="utf-8").splitlines():
        if line.startswith("syntax keyword "):
            words |= set(line.split()[3:])
    assert words == set(engine().keyword_types)


@pytest.mark.skipif(shutil.which("vim") is None, reason="needs vim")
def test_vim_highlights_a_spec_as_the_textmate_grammar_does(tmp_path: Path) -> None:
    spec = tmp_path / "p.harness"
    spec.write_text(
        "policy p {\n"
        '  label_x: deny mcp:s:tool:x when actor.role == "a\\"b"  # c\n'
        "  ask kind:mcp when task has stage { grant once ttl 15m }\n"
        "}\n",
        encoding="utf-8",
    )
    probes = {
        (1, 1): "harnessDeclaration",  # policy
        (2, 3): "harnessKey",  # label_x
        (2, 12): "harnessEffect",  # deny
        (2, 17): "harnessSelector",  # mcp:s:tool:x, not the keyword `mcp`
        (2, 30): "harnessKeyword",  # when
        (2, 35): "",  # actor.role: a path, not the keyword `actor`
        (2, 52): "harnessEscape",
        (2, 58): "harnessComment",
        (3, 7): "harnessSelector",  # kind:mcp
        (3, 21): "harnessKeyword",  # task, alone
        (3, 53): "harnessDuration",
    }
    out = tmp_path / "out.txt"
    script = "".join(
        f'call add(g:r, synIDattr(synID({line}, {col}, 1), "name"))|' for line, col in probes
    )
    subprocess.run(
        ["vim", "-Es", "-N", "-u", "NONE", "-i", "NONE", "--cmd", f"set rtp^={VIM}",
         "-c", "filetype plugin on", "-c", "syntax on", "-c", f"edit {spec}",
         "-c", f"let g:r = []|{script}call writefile(g:r + [&filetype, &commentstring], '{out}')",
         "-c", "qa!"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    found = out.read_text(encoding="utf-8").splitlines()
    assert found == [*probes.values(), "harness", "# %s"]
