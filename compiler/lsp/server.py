"""The language server: pygls over stdio, each request answered from the last check of its
document; checks run on one worker thread, debounced, so the editor is never kept waiting."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO
from urllib.parse import unquote

from harnessc.dsl.parser import parse_source
from harnessc.dsl.printer import format_source
from harnessc.dsl.source import Source
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcServerNotInitialized
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument

from harnessc import __version__

from . import actions, complete, edits, hints, navigate, outline, rename, tokens
from .convert import SOURCE, to_lsp
from .positions import Positions, line_starts, path_to_uri, uri_to_path
from .signatures import signature_at
from .symbols import SymbolIndex
from .workspace import Build, Workspace

DEBOUNCE_SECONDS = 0.05
"""How long a check waits for the next keystroke: typing a word checks once, at its end."""


_ANSWERED = object()
"""A message already answered while it was read (its error sent): nothing to handle."""


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, answering what JSON-RPC and LSP say it must answer: a request whose
    params do not fit its method gets the error `InvalidParams` (pygls only logged it and told
    the user, and the client waited for an answer for ever), and one before `initialize` the
    error `ServerNotInitialized` (pygls answered it as if initialized). A notification whose
    params do not fit, or that comes before `initialize` (`exit` excepted), is dropped."""

    initialize_seen = False

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcInvalidParams:
            if "id" in data and "method" in data:  # a request: its client waits for an answer
                self._answer_error(
                    data["id"], JsonRpcInvalidParams.CODE, f"invalid params for `{data['method']}`"
                )
                return _ANSWERED
            # a notification has no answer: pygls told the user "Error in server" for the
            # client's mistake; it is logged (standard error) and dropped
            logging.warning("dropped `%s`: its params do not fit it", data.get("method"))
            return _ANSWERED

    def handle_message(self, message: Any) -> None:
        if message is _ANSWERED:
            return
        method = getattr(message, "method", None)
        if not self.initialize_seen and method is not None:
            if method == lsp.INITIALIZE:
                self.initialize_seen = True
            elif method != lsp.EXIT:
                request = getattr(message, "id", None)
                if request is not None:
                    self._answer_error(
                        request,
                        JsonRpcServerNotInitialized.CODE,
                        f"`{method}` before `initialize`",
                    )
                return
        super().handle_message(message)

    def _answer_error(self, request: Any, code: int, what: str) -> None:
        self._send_response(request, error=lsp.ResponseError(code=code, message=what))


class HarnessServer(LanguageServer):
    def __init__(self) -> None:
        # the editor sends a document's whole text on each change: pygls applies a change to a
        # range with `str.splitlines`, which ends lines where the protocol does not (U+2028, a
        # form feed…), and the text it kept would drift from the editor's
        super().__init__(
            SOURCE,
            __version__,
            protocol_cls=_Protocol,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Full,
        )
        self.shutdown_asked = False
        """Whether the client sent `shutdown` (the exit code says so: LSP's 0, else 1)."""
        self.specs = Workspace()
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harnessc-check")
        self.imported: dict[str, set[str]] = {}
        """For each open document, the files it imports that its last check published
        diagnostics for (files that are not open: their own checks do not run)."""
        self.told: set[str] = set()
        """The configuration problems already shown (each is shown once)."""
        self.settled = False
        self.watching = False
        """Whether the editor says when a spec changes on disk (`didChangeWatchedFiles`)."""
        self.importers_known: dict[str, list[str]] = {}
        """The specs on disk that import a file, by file, while the editor watches the specs
        (each change it reports clears them); without watching they are looked up each time."""
        self.executors = rename.ExecutorIndex()
        """Where the project's Python binds executors by tool id (rename warns of them)."""
        self.warnings: dict[str, asyncio.Future[None]] = {}
        """The looks for Python executor bindings under way, by tool id (kept until they end)."""
        self.pieces_kept: dict[str, tuple[str, Build | None, list[tokens.Piece]]] = {}
        """The last semantic pieces of each document, with the text and build they are of."""
        self.tokens_sent: dict[str, tuple[str, list[int]]] = {}
        """The semantic tokens last sent for each document, by result id (for deltas)."""
        self.symbols = SymbolIndex()
        """The specs on disk, parsed, for workspace symbols."""

    def folders(self) -> list[str]:
        """The workspace's folders (its root when the client named no folder)."""
        folders = [
            path
            for folder in self.workspace.folders.values()
            if (path := uri_to_path(folder.uri)) is not None
        ]
        if not folders and self.workspace.root_path:
            folders = [self.workspace.root_path]
        return folders

    @property
    def positions(self) -> Positions:
        encoding = self.workspace.position_encoding
        return Positions(str(getattr(encoding, "value", encoding) or "utf-16"))

    def document_of(self, uri: str) -> TextDocument | None:
        """An open document; None for one that is not open, whose file is not read (it may be
        missing, a directory, a pipe that never ends, not a file at all)."""
        # pygls keys its documents by the unquoted URI; its `get_text_document` would read the
        # file of a document that is not open, on the thread that answers every request
        return self.workspace.text_documents.get(unquote(uri))

    def text_of(self, uri: str) -> Source | None:
        """The editor's text of an open document (None when it is not open)."""
        document = self.document_of(uri)
        if document is None:
            return None
        return Source(uri_to_path(uri) or uri, document.source)

    def build_of(self, uri: str) -> tuple[Build, Source] | None:
        """The last build of a document, and the document's source in it."""
        path = uri_to_path(uri)
        build = self.specs.builds.get(path) if path else None
        if build is None:
            return None
        module = build.module(build.path)
        if module is None or module.source is None:
            return None
        return build, module.source

    # -- checking ------------------------------------------------------------------------------

    def changed(self, uri: str, version: int | None, text: str, delay: float) -> None:
        path = uri_to_path(uri)
        if path is None:
            return
        self.specs.open(path, version, text)
        for root in self.specs.importers(path):
            self.schedule(root, delay)

    def schedule(self, root: str, delay: float) -> None:
        """Check an open document after `delay`, in place of a check not yet started."""
        task = self.pending.pop(root, None)
        if task is not None:
            task.cancel()
        self.pending[root] = asyncio.ensure_future(self.check_later(root, delay))

    async def check_later(self, path: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self.pending.pop(path, None)
        loop = asyncio.get_running_loop()
        try:
            build = await loop.run_in_executor(self.worker, self.specs.check, path)
        except Exception as error:  # a bug in harnessc: say so in the editor, keep serving
            logging.exception("checking %s", path)
            self.window_show_message(
                lsp.ShowMessageParams(lsp.MessageType.Error, f"harnessc: internal error: {error}")
            )
            return
        if build is None or path not in self.specs.texts:
            return  # closed while it was checked: its diagnostics were cleared, and stay so
        if not self.settled:
            # what the first check loaded lives as long as the server (the parser's tables,
            # the standard library, z3): out of the collector's sight, a full collection takes
            # a few milliseconds instead of a hundred, which a keystroke would otherwise wait for
            gc.freeze()
            self.settled = True
        if build.config_problem and build.config_problem not in self.told:
            self.told.add(build.config_problem)
            self.window_show_message(
                lsp.ShowMessageParams(lsp.MessageType.Warning, build.config_problem)
            )
        positions = self.positions
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=path_to_uri(path),
                version=build.version,
                diagnostics=[to_lsp(d, build, positions) for d in build.own()],
            )
        )
        # an imported file that is not open is checked only by the builds that import it:
        # its diagnostics are published from here, and cleared once no open build finds them
        found = {p: d for p, d in build.by_file().items() if p not in self.specs.texts}
        gone = self.imported.get(path, set()) - set(found)
        self.imported[path] = set(found)
        for other, diagnostics in found.items():
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(
                    uri=path_to_uri(other),
                    diagnostics=[to_lsp(d, build, positions) for d in diagnostics],
                )
            )
        self.dropped(path, gone)

    def dropped(self, root: str, files: set[str]) -> None:
        """Files a root published diagnostics for and no longer does (it stopped importing them,
        they were fixed, it was closed): each shows what another open document's build that
        still loads it says about it, or nothing."""
        positions = self.positions
        for file in sorted(files):
            if file in self.specs.texts:
                continue  # open: its own check publishes its diagnostics
            owner = next(
                (
                    build
                    for other, build in self.specs.builds.items()
                    if other != root and other in self.specs.texts and file in build.loads
                ),
                None,
            )
            diagnostics: list[lsp.Diagnostic] = []
            if owner is not None:
                found = owner.by_file().get(file, [])
                diagnostics = [to_lsp(d, owner, positions) for d in found]
                if diagnostics:
                    self.imported.setdefault(owner.path, set()).add(file)
            self.text_document_publish_diagnostics(
                lsp.PublishDiagnosticsParams(uri=path_to_uri(file), diagnostics=diagnostics)
            )


server = HarnessServer()


@server.feature(lsp.SHUTDOWN)
def shutdown(ls: HarnessServer, params: None) -> None:
    ls.shutdown_asked = True


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: HarnessServer, params: lsp.DidOpenTextDocumentParams) -> None:
    document = params.text_document
    ls.changed(document.uri, document.version, document.text, 0)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: HarnessServer, params: lsp.DidChangeTextDocumentParams) -> None:
    document = ls.document_of(params.text_document.uri)
    if document is not None:  # pygls refuses a change to a document that is not open
        ls.changed(document.uri, params.text_document.version, document.source, DEBOUNCE_SECONDS)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: HarnessServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.importers_known.clear()  # what the file imports on disk may have changed
    document = ls.document_of(params.text_document.uri)
    if document is not None:  # a save of a document that is not open says nothing to check
        ls.changed(document.uri, document.version, document.source, 0)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: HarnessServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    path = uri_to_path(uri)
    if path is not None:
        ls.specs.close(path)
        ls.dropped(path, ls.imported.pop(path, set()))
    ls.tokens_sent.pop(uri, None)
    ls.pieces_kept.pop(uri, None)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(lsp.INITIALIZED)
async def initialized(ls: HarnessServer, params: lsp.InitializedParams) -> None:
    """Ask the editor to say when a spec changes on disk (a `git checkout`, another program),
    where it can be asked."""
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace is not None else None
    if watched is None or not watched.dynamic_registration:
        return
    watcher = lsp.FileSystemWatcher(glob_pattern="**/*.harness")
    ls.watching = True
    await ls.client_register_capability_async(
        lsp.RegistrationParams(
            [
                lsp.Registration(
                    id="harnessc-specs",
                    method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=lsp.DidChangeWatchedFilesRegistrationOptions([watcher]),
                )
            ]
        )
    )


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def watched_files(ls: HarnessServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    """A spec changed on disk: check again the open documents whose builds read it (an open
    document itself is checked with the editor's text, not the file's)."""
    ls.importers_known.clear()  # a spec created, deleted or changed: its imports may differ
    roots: set[str] = set()
    for change in params.changes:
        path = uri_to_path(change.uri)
        if path is not None and path not in ls.specs.texts:
            roots.update(ls.specs.importers(path)[1:])
    for root in sorted(roots):
        ls.schedule(root, 0)


# Formatting, the outline and folding parse the document again: seconds for a spec of tens of
# thousands of lines. They run on a thread of their own, off the loop that reads the editor's
# messages, so a hover or a keystroke's diagnostics are not kept waiting behind them.


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
async def formatting(
    ls: HarnessServer, params: lsp.DocumentFormattingParams
) -> list[lsp.TextEdit] | None:
    """The formatter's text as edits of the lines that change; nothing when the file does not
    parse (the diagnostics say why) or is already canonical."""
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return None
    return await asyncio.to_thread(_formatted, source, ls.positions, None)


@server.feature(lsp.TEXT_DOCUMENT_RANGE_FORMATTING)
async def range_formatting(
    ls: HarnessServer, params: lsp.DocumentRangeFormattingParams
) -> list[lsp.TextEdit] | None:
    """The formatter's edits of the lines the range touches (the whole file is formatted: a
    declaration's layout depends on what is around it, such as alignment in a block)."""
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return None
    lines = (params.range.start.line, params.range.end.line)
    return await asyncio.to_thread(_formatted, source, ls.positions, lines)


def _formatted(
    source: Source, positions: Positions, lines: tuple[int, int] | None
) -> list[lsp.TextEdit]:
    result = format_source(source)
    if result.text is None or not result.changed:
        return []
    starts = line_starts(source.text)
    old = edits.split_lines(source.text, starts)
    new = edits.split_lines(result.text, line_starts(result.text))
    bounds = [*starts[: len(old)], len(source.text)]
    found: list[lsp.TextEdit] = []
    for hunk in edits.line_hunks(old, new):
        if lines is not None and not (
            hunk.old_start <= lines[1] and max(hunk.old_end - 1, hunk.old_start) >= lines[0]
        ):
            continue
        start = positions.position(source, bounds[hunk.old_start])
        end = positions.position(source, bounds[hunk.old_end])
        found.append(
            lsp.TextEdit(lsp.Range(start, end), "".join(new[hunk.new_start : hunk.new_end]))
        )
    return found


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
async def document_symbol(
    ls: HarnessServer, params: lsp.DocumentSymbolParams
) -> list[lsp.DocumentSymbol]:
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return []
    positions = ls.positions
    return await asyncio.to_thread(
        lambda: outline.document_symbols(parse_source(source).module, positions)
    )


@server.feature(lsp.WORKSPACE_SYMBOL)
async def workspace_symbol(
    ls: HarnessServer, params: lsp.WorkspaceSymbolParams
) -> list[lsp.WorkspaceSymbol]:
    """The declarations of the project's specs whose names match the query (its characters in
    order, case aside): the open documents, what their builds import, and every spec under the
    workspace's folders."""
    folders = ls.folders()
    open_texts: dict[str, str] = {}
    for uri, document in list(ls.workspace.text_documents.items()):
        path = uri_to_path(uri)
        if path is not None:
            open_texts[path] = document.source
    loaded = {file for build in list(ls.specs.builds.values()) for file in build.loads}
    positions = ls.positions
    return await asyncio.to_thread(
        ls.symbols.find, params.query, folders, open_texts, loaded, positions
    )


@server.feature(
    lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
    lsp.SignatureHelpOptions(trigger_characters=["(", ",", " ", ":"]),
)
def signature_help(ls: HarnessServer, params: lsp.SignatureHelpParams) -> lsp.SignatureHelp | None:
    """The form of the history term, function or quantifier being typed (`count(`, `sum(`,
    `called(`, `len(`, `all x in …:`), with the part the cursor is in."""
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return None
    return signature_at(source.text, ls.positions.offset(source, params.position))


@server.feature(lsp.TEXT_DOCUMENT_FOLDING_RANGE)
async def folding_range(
    ls: HarnessServer, params: lsp.FoldingRangeParams
) -> list[lsp.FoldingRange]:
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return []
    return await asyncio.to_thread(lambda: outline.folding_ranges(parse_source(source).module))


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: HarnessServer, params: lsp.HoverParams) -> lsp.Hover | None:
    found = ls.build_of(params.text_document.uri)
    if found is None:
        return None
    build, source = found
    text = navigate.hover_text(build, source, ls.positions.offset(source, params.position))
    if text is None:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text))


def symbol_at(
    ls: HarnessServer, params: lsp.DefinitionParams | lsp.ReferenceParams
) -> tuple[Build, navigate.Found] | None:
    """The document's last build and the symbol at the request's position."""
    found = ls.build_of(params.text_document.uri)
    if found is None:
        return None
    build, source = found
    at = navigate.symbol_at(build, source, ls.positions.offset(source, params.position))
    return (build, at) if at is not None else None


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
def definition(ls: HarnessServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    found = symbol_at(ls, params)
    if found is None:
        return None
    build, at = found
    span = at.symbol.span
    return lsp.Location(path_to_uri(build.path_of(span.source)), ls.positions.range(span))


@server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
def references(ls: HarnessServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
    """The references in every open document's build (a symbol of an imported module is
    referenced wherever a build imports it), each once."""
    found = symbol_at(ls, params)
    if found is None:
        return []
    build, at = found
    positions = ls.positions
    seen: dict[tuple[str, int], lsp.Location] = {}
    spans = navigate.everywhere(list(ls.specs.builds.values()), build, at.symbol)
    if params.context.include_declaration:
        spans.insert(0, (build, at.symbol.span))
    for owner, span in spans:
        path = owner.path_of(span.source)
        seen.setdefault((path, span.start), lsp.Location(path_to_uri(path), positions.range(span)))
    return list(seen.values())


LEGEND = lsp.SemanticTokensLegend(token_types=tokens.TYPES, token_modifiers=tokens.MODIFIERS)


async def _pieces(ls: HarnessServer, uri: str) -> tuple[list[tokens.Piece], Source] | None:
    found = await _fresh_build(ls, uri)
    source = ls.text_of(uri)
    if source is None:
        return None
    build = found[0] if found is not None else None
    if found is not None and found[1].text == source.text:
        source = found[1]  # the build's own source: its spans are the resolver's
    else:
        build = None  # a text the build did not read: its tokens alone
    kept = ls.pieces_kept.get(uri)
    if kept is not None and kept[0] == source.text and kept[1] is build:
        return kept[2], source
    found_pieces = await asyncio.to_thread(tokens.pieces, build, source)
    ls.pieces_kept[uri] = (source.text, build, found_pieces)
    return found_pieces, source


def _sent(ls: HarnessServer, uri: str, data: list[int]) -> str:
    result = tokens.result_id()
    ls.tokens_sent[uri] = (result, data)
    return result


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
async def semantic_tokens(
    ls: HarnessServer, params: lsp.SemanticTokensParams
) -> lsp.SemanticTokens | None:
    """Every token's meaning: keywords as the parser reads them, names as the resolver bound
    them (tokens.py)."""
    found = await _pieces(ls, params.text_document.uri)
    if found is None:
        return None
    data = tokens.encode(found[0], found[1], ls.positions)
    return lsp.SemanticTokens(data=data, result_id=_sent(ls, params.text_document.uri, data))


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL_DELTA, LEGEND)
async def semantic_tokens_delta(
    ls: HarnessServer, params: lsp.SemanticTokensDeltaParams
) -> lsp.SemanticTokens | lsp.SemanticTokensDelta | None:
    """The change since the tokens the editor has (`previousResultId`): one edit of the middle
    that changed; all of them when that result is not the last one sent."""
    uri = params.text_document.uri
    found = await _pieces(ls, uri)
    if found is None:
        return None
    data = tokens.encode(found[0], found[1], ls.positions)
    previous = ls.tokens_sent.get(uri)
    result = _sent(ls, uri, data)
    if previous is None or previous[0] != params.previous_result_id:
        return lsp.SemanticTokens(data=data, result_id=result)
    return lsp.SemanticTokensDelta(edits=tokens.delta(previous[1], data), result_id=result)


@server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_RANGE, LEGEND)
async def semantic_tokens_range(
    ls: HarnessServer, params: lsp.SemanticTokensRangeParams
) -> lsp.SemanticTokens | None:
    found = await _pieces(ls, params.text_document.uri)
    if found is None:
        return None
    pieces, source = found
    positions = ls.positions
    start = positions.offset(source, params.range.start)
    end = positions.offset(source, params.range.end)
    inside = [p for p in pieces if p.end > start and p.start < end]
    return lsp.SemanticTokens(data=tokens.encode(inside, source, positions))


@server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
def inlay_hint(ls: HarnessServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
    """What the analysis found about each rule in the range (never wins, shadowed, never
    matches), a duration's plainest form, the unit of a number compared with a duration."""
    found = ls.build_of(params.text_document.uri)
    if found is None:
        return []
    build, source = found
    positions = ls.positions
    start = positions.offset(source, params.range.start)
    end = positions.offset(source, params.range.end)
    return hints.hints(build, source, start, end, positions)


class RenameRefused(JsonRpcException):
    """A rename that cannot be done, and why: LSP's `RequestFailed`, its message shown."""

    CODE = -32803


async def _fresh_build(ls: HarnessServer, uri: str) -> tuple[Build, Source] | None:
    """The document's build, checked again first when its text changed since (a rename must
    not edit offsets of a text the editor no longer has)."""
    found = ls.build_of(uri)
    document = ls.document_of(uri)
    path = uri_to_path(uri)
    if document is None or path is None:
        return None
    if found is None or found[0].text != document.source:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(ls.worker, ls.specs.check, path)
        found = ls.build_of(uri)
    return found


@server.feature(lsp.TEXT_DOCUMENT_PREPARE_RENAME)
async def prepare_rename(
    ls: HarnessServer, params: lsp.PrepareRenameParams
) -> lsp.PrepareRenamePlaceholder | None:
    """The name at the cursor that a rename would change, or why none can be."""
    found = await _fresh_build(ls, params.text_document.uri)
    if found is None:
        return None
    build, source = found
    try:
        target = rename.target_at(build, source, ls.positions.offset(source, params.position))
    except rename.Refused as refused:
        raise RenameRefused(str(refused)) from None
    return lsp.PrepareRenamePlaceholder(ls.positions.range(target.span), target.span.text)


@server.feature(lsp.TEXT_DOCUMENT_RENAME, lsp.RenameOptions(prepare_provider=True))
async def rename_symbol(ls: HarnessServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
    """The edits renaming a declaration and every reference to it in the open documents and
    what they import; a warning names the Python files that bind an executor by a renamed
    tool's old id (a string the rename does not change)."""
    found = await _fresh_build(ls, params.text_document.uri)
    if found is None:
        return None
    build, source = found
    positions = ls.positions
    try:
        target = rename.target_at(build, source, positions.offset(source, params.position))
    except rename.Refused as refused:
        raise RenameRefused(str(refused)) from None
    builds = list(ls.specs.builds.values())
    if target.symbol is not None:  # the specs that are not open but read its declaration
        declared = build.path_of(target.symbol.module.source or source)
        builds += await asyncio.get_running_loop().run_in_executor(
            ls.worker, _closed_importers, ls, declared, builds
        )
    try:
        renamed = rename.edits(builds, build, target, params.new_name)
    except rename.Refused as refused:
        raise RenameRefused(str(refused)) from None
    changes: dict[str, list[lsp.TextEdit]] = {}
    for edit in renamed:
        changes.setdefault(path_to_uri(edit.path), []).append(
            lsp.TextEdit(positions.range(edit.span), edit.text)
        )
    # looked for once the edits are sent (they do not wait for it), once at a time per tool
    if rename.is_tool(target) and target.name not in ls.warnings:
        task = asyncio.ensure_future(_warn_bindings(ls, target.name, params.new_name))
        ls.warnings[target.name] = task
        task.add_done_callback(lambda _: ls.warnings.pop(target.name, None))
    return lsp.WorkspaceEdit(changes=changes)


def _closed_importers(ls: HarnessServer, declared: str, builds: list[Build]) -> list[Build]:
    """Builds of the specs under the workspace's folders that import `declared` (directly or
    through others) and that no open document's build reads: a rename edits them too."""
    loaded = {file for b in builds for file in b.loads}
    found = []
    importers = ls.importers_known.get(declared) if ls.watching else None
    if importers is None:
        importers = ls.symbols.importers(ls.folders(), declared)
        if ls.watching:
            ls.importers_known[declared] = importers
    for path in importers:
        if path not in loaded:
            closed = ls.specs.check_closed(path)
            if closed is not None:
                found.append(closed)
                loaded |= closed.loads
    return found


async def _warn_bindings(ls: HarnessServer, old: str, new: str) -> None:
    bound = await asyncio.to_thread(ls.executors.bindings, ls.folders(), old)
    if bound:
        places = ", ".join(f"{b.path}:{b.line} (`{b.call}`)" for b in bound)
        ls.window_show_message(
            lsp.ShowMessageParams(
                lsp.MessageType.Warning,
                f"tool `{old}` renamed to `{new}`: Python still binds an executor by `{old}` "
                f"at {places}; change those strings too",
            )
        )


@server.feature(
    lsp.TEXT_DOCUMENT_COMPLETION,
    lsp.CompletionOptions(trigger_characters=[".", ":", "(", '"', " "]),
)
def completion(ls: HarnessServer, params: lsp.CompletionParams) -> lsp.CompletionList | None:
    source = ls.text_of(params.text_document.uri)
    if source is None:
        return None
    offset = ls.positions.offset(source, params.position)
    found = ls.build_of(params.text_document.uri)
    build = found[0] if found else None
    modelled = ls.specs.modelled.get(uri_to_path(params.text_document.uri) or "")
    model = (build.result.model if build else None) or (modelled.result.model if modelled else None)
    items = complete.complete(build, model, source.text, offset)
    return lsp.CompletionList(is_incomplete=False, items=items)


@server.feature(
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]),
)
def code_action(ls: HarnessServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    source = ls.text_of(uri)
    if source is None:
        return []
    return actions.fixes(uri, source, params.context.diagnostics, ls.positions)


MAX_FRAME_BYTES = 256 * 1024 * 1024
"""The longest message the server reads: a spec file is at most 8 MiB, and its text escaped in
JSON at most a few times that."""


class FrameTooLarge(Exception):
    """A client announced a message longer than `MAX_FRAME_BYTES`."""


class _Frames:
    """Standard input as pygls reads it, refusing a message longer than `MAX_FRAME_BYTES`
    before it is read: a broken client's `Content-Length` would have Python allocate it all,
    or fail with `OverflowError` past the largest index."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def readline(self) -> bytes:
        return self._stream.readline()

    def read(self, size: int) -> bytes:
        if size > MAX_FRAME_BYTES:
            raise FrameTooLarge(size)
        return self._stream.read(size)


def serve(root: str | None = None) -> int:
    """Answer the editor on standard input and output until it says `exit`: 0 when it asked
    to `shutdown` first, 1 when it did not (LSP's exit codes), or when its input ended without
    `exit`, or when it sent a message too long to read (the stream cannot be read past it).
    `root`: the project root every document's imports stay inside (`--root`); by default each
    document's own (`files.project_root`)."""
    server.specs.root = root
    try:
        server.start_io(stdin=_Frames(sys.stdin.buffer))  # type: ignore[arg-type]
    except FrameTooLarge as error:
        sys.stderr.write(
            f"harnessc lsp: the client announced a message of {error.args[0]:,} bytes, more "
            f"than the {MAX_FRAME_BYTES:,} the server reads; stopped\n"
        )
        return 1
    return 0 if server.shutdown_asked else 1
