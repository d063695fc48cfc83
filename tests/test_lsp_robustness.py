"""`harnessc lsp` on what editors and odd files send it: requests on documents that are not open,
lone surrogates, line breaks only the protocol counts, a document closed while it is checked, and
an imported file two open documents share."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from harnessc.compiler.lsp.client import StdioClient
from harnessc.compiler.lsp.positions import Positions
from harnessc.dsl.source import Source
from lsprotocol import types as lsp

TIMEOUT = 120  # generous: the machine may be loaded; nothing here measures time
ROOT = Path(__file__).resolve().parent.parent
LIB = 'tool lookup {\n  summary "Look."\n  use_when "Now."\n  effects nonsense\n}\n'
IMPORTER = (
    'import "./lib.harness" as lib\n\n'
    'tool {name} {{\n  summary "A."\n  use_when "Now."\n  effects read\n}}\n'
)


def start(folder: Path) -> StdioClient:
    server = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(folder))
    server.initialize(folder.as_uri())
    return server


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lsp_robust")
    (root / "lib.harness").write_text(LIB, encoding="utf-8")
    for name in ("a", "b"):
        (root / f"{name}.harness").write_text(IMPORTER.format(name=name), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def client(folder: Path) -> Iterator[StdioClient]:
    server = start(folder)
    yield server
    server.close()


def test_the_server_asks_for_whole_texts_so_its_lines_are_the_editors() -> None:
    """pygls would apply a change to a range with `str.splitlines`' lines (U+2028, a form feed…
    end one there, not in the editor): the server asks for the whole text instead."""
    server = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(ROOT))
    try:
        capabilities = server.initialize(ROOT.as_uri())["capabilities"]
    finally:
        server.close()
    assert capabilities["textDocumentSync"]["change"] == lsp.TextDocumentSyncKind.Full


@pytest.mark.parametrize(
    "method",
    [
        "textDocument/completion",
        "textDocument/formatting",
        "textDocument/documentSymbol",
        "textDocument/foldingRange",
        "textDocument/codeAction",
        "textDocument/hover",
    ],
)
def test_a_request_on_a_document_that_is_not_open_answers_nothing_and_reads_no_file(
    client: StdioClient, folder: Path, method: str
) -> None:
    fifo = folder / "pipe.harness"
    if hasattr(os, "mkfifo") and not fifo.exists():
        os.mkfifo(fifo)  # reading it would wait for a writer forever
    addresses = [
        (folder / "missing.harness").as_uri(),
        folder.as_uri(),  # a directory
        (folder / "lib.harness").as_uri(),  # a file on disk, not open
        "http://localhost" + str(folder / "lib.harness"),
        "untitled:Untitled-1",
        "",
        "not a uri",
        *([fifo.as_uri()] if fifo.exists() else []),
    ]
    for address in addresses:
        params: dict = {"textDocument": {"uri": address}}
        if method in ("textDocument/completion", "textDocument/hover"):
            params["position"] = {"line": 0, "character": 0}
        if method == "textDocument/formatting":
            params["options"] = {"tabSize": 2, "insertSpaces": True}
        if method == "textDocument/codeAction":
            params["range"] = {
                "start": {"line": 0, "character": 0},
                "end": {"line": 0, "character": 0},
            }
            params["context"] = {"diagnostics": []}
        answer = client.request(method, params, timeout=30)
        assert answer in (None, []), (address, answer)


def test_a_lone_surrogate_counts_as_one_utf16_unit() -> None:
    source = Source("x", 'tool a {\n  summary "x"  # \ud800 comment\n}\n')
    at = source.text.index("comment")
    position = Positions().position(source, at)
    assert position == lsp.Position(1, at - source.text.index("  summary"))
    assert Positions().offset(source, position) == at
    assert Positions("utf-8").units("\ud800") == 3


def test_completion_and_code_actions_in_a_document_holding_a_lone_surrogate(
    client: StdioClient, folder: Path
) -> None:
    text = 'tool a {\n  summary "x"  # \ud800 comment\n  \n}\n'
    address = (folder / "surrogate.harness").as_uri()
    client.open(address, text)
    found = client.diagnostics(address, 1, timeout=TIMEOUT)
    position = {"line": 2, "character": 2}
    answer = client.request(
        "textDocument/completion", {"textDocument": {"uri": address}, "position": position}
    )
    assert "effects" in [item["label"] for item in answer["items"]]
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 1}}
    answer = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": address}, "range": whole, "context": {"diagnostics": found}},
    )
    assert isinstance(answer, list)
    client.notify("textDocument/didClose", {"textDocument": {"uri": address}})
    assert client.diagnostics(address, timeout=TIMEOUT) == []


@pytest.mark.parametrize("br", ["\r", "\r\n", "\n"])
@pytest.mark.parametrize("other", ["\u2028", "\x0c", "\x85", "\x1e", "\x0b"])
def test_positions_end_lines_where_the_protocol_does(br: str, other: str) -> None:
    text = f"a{other}b{br}cd{br}"
    source = Source("x", text)
    positions = Positions()
    assert positions.position(source, text.index("b")) == lsp.Position(0, 2)
    assert positions.position(source, text.index("d")) == lsp.Position(1, 1)
    assert positions.offset(source, lsp.Position(1, 1)) == text.index("d")
    assert positions.offset(source, lsp.Position(0, 99)) == text.index(br)
    assert positions.offset(source, lsp.Position(2, 0)) == len(text)


def test_a_document_whose_lines_end_in_a_lone_cr_gets_its_ranges_on_the_right_lines(
    client: StdioClient, folder: Path
) -> None:
    text = (
        'tool deploy {\r  summary "Deploy."\r  use_when "Now."\r  effects read\r}\r\r'
        "surface main {\r  expose deploy, nosuch_tool\r}\r"
    )
    address = (folder / "lonecr.harness").as_uri()
    client.open(address, text)
    (found,) = client.diagnostics(address, 1, timeout=TIMEOUT)
    assert found["code"] == "H201"
    assert found["range"] == {
        "start": {"line": 7, "character": 17},
        "end": {"line": 7, "character": 28},
    }
    answer = client.request(
        "textDocument/definition",
        {"textDocument": {"uri": address}, "position": {"line": 7, "character": 10}},
    )
    assert answer["range"]["start"] == {"line": 0, "character": 5}
    client.notify("textDocument/didClose", {"textDocument": {"uri": address}})
    assert client.diagnostics(address, timeout=TIMEOUT) == []


def test_an_imported_file_keeps_its_diagnostics_while_another_open_document_imports_it(
    client: StdioClient, folder: Path
) -> None:
    library, a, b = ((folder / f"{n}.harness").as_uri() for n in ("lib", "a", "b"))
    text_a, text_b = IMPORTER.format(name="a"), IMPORTER.format(name="b")
    client.open(a, text_a)
    client.diagnostics(a, 1, timeout=TIMEOUT)
    assert [d["code"] for d in client.diagnostics(library, timeout=TIMEOUT)] == ["H301"]
    client.open(b, text_b)
    client.diagnostics(b, 1, timeout=TIMEOUT)
    assert [d["code"] for d in client.diagnostics(library, timeout=TIMEOUT)] == ["H301"]
    # a drops its import: b still imports lib
    client.change(a, text_a.replace('import "./lib.harness" as lib\n', ""), 2)
    client.diagnostics(a, 2, timeout=TIMEOUT)
    assert [d["code"] for d in client.diagnostics(library, timeout=TIMEOUT)] == ["H301"]
    client.change(a, text_a, 3)  # a imports it again
    client.diagnostics(a, 3, timeout=TIMEOUT)
    assert [d["code"] for d in client.diagnostics(library, timeout=TIMEOUT)] == ["H301"]
    # a is closed: b still imports lib
    client.notify("textDocument/didClose", {"textDocument": {"uri": a}})
    assert [d["code"] for d in client.diagnostics(library, timeout=TIMEOUT)] == ["H301"]
    assert client.diagnostics(a, timeout=TIMEOUT) == []
    # the last document that imports it is closed: nothing is said about lib any more
    client.notify("textDocument/didClose", {"textDocument": {"uri": b}})
    assert client.diagnostics(library, timeout=TIMEOUT) == []
    assert client.diagnostics(b, timeout=TIMEOUT) == []


def test_nothing_is_published_for_a_document_closed_while_it_is_checked(tmp_path: Path) -> None:
    """The first check of a fresh server takes seconds (it loads the policy analysis): the
    document is closed while it runs. A second document's check runs after it on the one
    worker, so once its diagnostics arrive, whatever the first check published has arrived."""
    example = ROOT / "examples" / "remediation"
    for name in ("remediation.harness", "scanner.harness"):
        shutil.copy(example / name, tmp_path / name)
    text = (example / "remediation.harness").read_text(encoding="utf-8")
    broken = text.replace("  expose std.workspace.*, ", "  expose std.workspace.*, no_such_tool, ")
    assert broken != text
    closed = (tmp_path / "remediation.harness").as_uri()
    after = (tmp_path / "after.harness").as_uri()
    server = start(tmp_path)
    try:
        server.open(closed, broken)
        time.sleep(0.3)  # the check has started on the worker
        server.notify("textDocument/didClose", {"textDocument": {"uri": closed}})
        server.open(after, LIB)
        published: list[dict] = []
        while (params := server.wait_for("textDocument/publishDiagnostics", timeout=TIMEOUT))[
            "uri"
        ] != after:
            published.append(params)
        # the clear at didClose comes last: nothing after it, neither for the document nor
        # for the files only it imports
        assert published[-1] == {"uri": closed, "diagnostics": []}, published
        assert all(p["uri"] == closed and p["version"] == 1 for p in published[:-1])
    finally:
        server.close()


def test_a_message_too_long_to_read_stops_the_server_with_the_reason(tmp_path: Path) -> None:
    # a broken client's Content-Length made Python fail (OverflowError), reported as H901
    import subprocess

    frame = b'Content-Length: 99999999999999999999999\r\n\r\n{"jsonrpc": "2.0"}'
    done = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "lsp"],
        input=frame,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "the client announced a message of 99,999,999,999,999,999,999,999 bytes" in err
    assert "H901" not in err and "Traceback" not in err


def _session(tmp_path: Path, *messages: dict) -> tuple[int, list[dict]]:
    """Run the server on `messages` (written at once, as a client may) and read its answers."""
    import json
    import subprocess

    frames = b""
    for message in messages:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        frames += b"Content-Length: %d\r\n\r\n" % len(body) + body
    done = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "lsp"],
        input=frames,
        capture_output=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        check=False,
    )
    answers, out = [], done.stdout
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        answers.append(json.loads(rest[:length]))
        out = rest[length:]
    return done.returncode, answers


INITIALIZE = {"id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}}
HOVER = {"textDocument": {"uri": "file:///x.harness"}, "position": {"line": 0, "character": 0}}


def test_a_request_whose_params_do_not_fit_gets_an_invalid_params_error(tmp_path: Path) -> None:
    # pygls only told the user "Error in server": the client waited for its answer for ever
    code, answers = _session(
        tmp_path,
        INITIALIZE,
        {"method": "initialized", "params": {}},
        {"id": 2, "method": "textDocument/hover", "params": {"position": HOVER["position"]}},
        {"method": "textDocument/didOpen", "params": {}},  # a notification: dropped, no popup
        {"id": 3, "method": "textDocument/hover", "params": HOVER},
        {"id": 4, "method": "shutdown"},
        {"method": "exit"},
    )
    by_id = {a["id"]: a for a in answers if "id" in a}
    assert by_id[2]["error"]["code"] == -32602  # InvalidParams
    assert "textDocument/hover" in by_id[2]["error"]["message"]
    assert by_id[3]["result"] is None and by_id[4]["result"] is None
    assert not [a for a in answers if a.get("method") == "window/showMessage"]
    assert code == 0


def test_a_request_before_initialize_is_refused_and_exit_without_shutdown_is_code_1(
    tmp_path: Path,
) -> None:
    code, answers = _session(
        tmp_path,
        {"id": 2, "method": "textDocument/hover", "params": HOVER},
        {"method": "textDocument/didOpen", "params": {}},
        {"method": "exit"},
    )
    assert [a["id"] for a in answers] == [2]
    assert answers[0]["error"]["code"] == -32002  # ServerNotInitialized
    assert code == 1  # LSP: exit without shutdown
    code, _ = _session(tmp_path, INITIALIZE, {"method": "exit"})
    assert code == 1


def test_formatting_a_long_spec_does_not_hold_up_other_requests(tmp_path: Path) -> None:
    # formatting parsed and printed on the loop that reads the editor's messages: a hover
    # sent after it waited seconds, until the whole file was formatted
    import json
    import subprocess

    text = 'harness big { version "1.0.0" }\n' + "".join(
        f'tool t{i}.run {{\n  summary   "Run {i}."\n  use_when "Now."\n  effects read\n}}\n'
        for i in range(2000)
    )
    uri = (tmp_path / "big.harness").as_uri()
    document = {"textDocument": {"uri": uri}}
    messages = [
        INITIALIZE,
        {"method": "initialized", "params": {}},
        {
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {
                    **document["textDocument"],
                    "languageId": "harness",
                    "version": 1,
                    "text": text,
                }
            },
        },
        {
            "id": 5,
            "method": "textDocument/formatting",
            "params": {**document, "options": {"tabSize": 2, "insertSpaces": True}},
        },
        {
            "id": 6,
            "method": "textDocument/hover",
            "params": {**document, **{"position": HOVER["position"]}},
        },
    ]
    server = subprocess.Popen(
        [sys.executable, "-m", "harnessc.compiler", "lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        for message in messages:
            body = json.dumps({"jsonrpc": "2.0", **message}).encode()
            server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        server.stdin.flush()
        answered: list[int] = []
        while not {5, 6} <= set(answered):
            length = 0
            while line := server.stdout.readline().strip():
                if line.startswith(b"Content-Length:"):
                    length = int(line.split(b":")[1])
            answer = json.loads(server.stdout.read(length))
            if "id" in answer:
                answered.append(answer["id"])
                if answer["id"] == 5:
                    assert answer["result"][0]["newText"].startswith("harness big {\n")
                    assert len(answer["result"]) == 2 * 2000  # a summary, a blank line: each tool
    finally:
        server.kill()
        server.wait(timeout=TIMEOUT)
        server.stdin.close()
        server.stdout.close()
    assert answered[:2] == [1, 6], answered  # the hover first, then the formatting
