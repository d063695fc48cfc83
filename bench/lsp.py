"""Latency of `harnessc lsp` on the remediation example: keystroke to diagnostics (target:
200 ms), and each kind of request (target for hover, completion and rename: 50 ms), as p95.

    .venv/bin/python bench/lsp.py [--keystrokes 30] [--requests 30]

Starts the server as an editor does (a subprocess on stdio), opens
examples/remediation/remediation.harness and types into it, one character at a time, waiting
for each keystroke's diagnostics before the next: the time is from sending `didChange` to
receiving `publishDiagnostics` for that version, debounce included. Three kinds of typing:

- `comment`: a word typed into a comment (the spec stays valid: a full lint, the policy
  analysis answered from its cache on disk);
- `reason`: a word typed into the first rule reason (the model changes at each keystroke);
- `error`: a tool id broken and fixed in turn (H201 published, then none).

Then each kind of request, `--requests` times on the clean document, answered in turn: hover
and go to definition on a tool id in a rule, completion after `allow `, rename of that tool id
(and `prepareRename`), semantic tokens (full, then the delta from the result before), formatting
(the whole document, and a range of one line), inlay hints over the document, the outline
(`documentSymbol`), and workspace symbols (`workspace/symbol`, every spec under the repository:
the examples, the standard library, the tests' specs) for a query and for everything.

Prints the median and the 95th percentile of each, and the load average before and after: on a
loaded machine the figures grow with the load, so read them together.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from harnessc.compiler.lsp.client import StdioClient

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "remediation" / "remediation.harness"
TARGET_MS = 200
REQUEST_TARGET_MS = 50


def keystrokes(text: str, kind: str, count: int) -> list[str]:
    """The document's text after each of `count` keystrokes."""
    if kind == "comment":
        anchor = "# Verify: read the change back"
        where = text.index(anchor) + len("# Verify:")
        return [text[:where] + " " + "x" * (n + 1) + text[where:] for n in range(count)]
    if kind == "reason":
        anchor = 'reason "'
        where = text.index(anchor) + len(anchor)
        return [text[:where] + " " + "x" * (n + 1) + text[where:] for n in range(count)]
    broken = text.replace("  allow change.get\n", "  allow change.gett\n", 1)
    return [broken if n % 2 == 0 else text for n in range(count)]


def measure(client: StdioClient, uri: str, texts: list[str], version: int) -> list[float]:
    times: list[float] = []
    for text in texts:
        version += 1
        start = time.perf_counter()
        client.change(uri, text, version)
        client.diagnostics(uri, version, timeout=120)
        times.append((time.perf_counter() - start) * 1000)
    return times


def requests(client: StdioClient, uri: str, text: str) -> dict[str, tuple[str, dict]]:
    """Each request kind measured: its method and parameters."""
    before = text[: text.index("  allow change.get\n") + len("  allow ")]
    line, character = before.count("\n"), len(before) - before.rfind("\n") - 1
    document = {"uri": uri}
    at = {"textDocument": document, "position": {"line": line, "character": character + 3}}
    after_allow = {"textDocument": document, "position": {"line": line, "character": character}}
    return {
        "hover": ("textDocument/hover", at),
        "definition": ("textDocument/definition", at),
        "completion": ("textDocument/completion", after_allow),
        "rename": ("textDocument/rename", {**at, "newName": "change.fetch"}),
        "prepareRename": ("textDocument/prepareRename", at),
        "tokens full": ("textDocument/semanticTokens/full", {"textDocument": document}),
        "formatting": (
            "textDocument/formatting",
            {"textDocument": document, "options": {"tabSize": 2, "insertSpaces": True}},
        ),
        "range format": (
            "textDocument/rangeFormatting",
            {
                "textDocument": document,
                "range": {
                    "start": {"line": line, "character": 0},
                    "end": {"line": line + 1, "character": 0},
                },
                "options": {"tabSize": 2, "insertSpaces": True},
            },
        ),
        "inlay hints": (
            "textDocument/inlayHint",
            {
                "textDocument": document,
                "range": {
                    "start": {"line": 0, "character": 0},
                    "end": {"line": text.count("\n") + 1, "character": 0},
                },
            },
        ),
        "outline": ("textDocument/documentSymbol", {"textDocument": document}),
        "symbol query": ("workspace/symbol", {"query": "change"}),
        "symbol all": ("workspace/symbol", {"query": ""}),
    }


def timed(client: StdioClient, method: str, params: dict, count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        client.request(method, params, timeout=120)
        times.append((time.perf_counter() - start) * 1000)
    return times


def timed_delta(client: StdioClient, uri: str, count: int) -> list[float]:
    """`semanticTokens/full/delta` from the result before, `count` times."""
    document = {"textDocument": {"uri": uri}}
    last = client.request("textDocument/semanticTokens/full", document, timeout=120)["resultId"]
    times: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        answer = client.request(
            "textDocument/semanticTokens/full/delta",
            {**document, "previousResultId": last},
            timeout=120,
        )
        times.append((time.perf_counter() - start) * 1000)
        last = answer["resultId"]
    return times


def print_row(kind: str, times: list[float]) -> None:
    p95 = percentile(times, 0.95)
    print(
        f"{kind:<13} {len(times):>7} {statistics.median(times):>10.1f} {p95:>8.1f}"
        f" {p95 / REQUEST_TARGET_MS:>10.2f}"
    )


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--keystrokes", type=int, default=30, help="keystrokes of each kind")
    parser.add_argument("--requests", type=int, default=30, help="requests of each kind")
    args = parser.parse_args()
    load_before = os.getloadavg()
    client = StdioClient([sys.executable, "-m", "harnessc.compiler", "lsp"], cwd=str(ROOT))
    try:
        # as an editor that watches the specs on disk (the server then keeps what it read)
        watching = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
        client.initialize(ROOT.as_uri(), watching)
        uri, text = SPEC.as_uri(), SPEC.read_text(encoding="utf-8")
        start = time.perf_counter()
        client.open(uri, text)
        opened = client.diagnostics(uri, 1, timeout=120)
        first = (time.perf_counter() - start) * 1000
        assert opened == [], f"the example should be clean: {opened}"
        print(f"{SPEC.relative_to(ROOT)}: {text.count(chr(10))} lines")
        print(f"didOpen → diagnostics (cold start of the pipeline): {first:.0f} ms")
        print(
            f"{'typing':<10} {'keystrokes':>10} {'median ms':>10} {'p95 ms':>8} {'p95/target':>11}"
        )
        version = 1
        for kind in ("comment", "reason", "error"):
            times = measure(client, uri, keystrokes(text, kind, args.keystrokes), version)
            version += len(times)
            p95 = percentile(times, 0.95)
            print(
                f"{kind:<10} {len(times):>10} {statistics.median(times):>10.0f} {p95:>8.0f}"
                f" {p95 / TARGET_MS:>11.2f}"
            )
        client.change(uri, text, version + 1)
        client.diagnostics(uri, version + 1, timeout=120)
        print(f"{'request':<13} {'count':>7} {'median ms':>10} {'p95 ms':>8} {'p95/50 ms':>10}")
        for kind, (method, params) in requests(client, uri, text).items():
            times = timed(client, method, params, args.requests)
            if kind == "tokens full":  # then the change since the last result: none
                print_row(kind, times)
                kind, times = "tokens delta", timed_delta(client, uri, args.requests)
            print_row(kind, times)
    finally:
        client.close()
    after = os.getloadavg()
    print(
        "load average before: {:.2f} {:.2f} {:.2f}, after: {:.2f} {:.2f} {:.2f} ({} cores)".format(
            *load_before, *after, os.cpu_count()
        )
    )


if __name__ == "__main__":
    main()
