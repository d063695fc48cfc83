"""The spec, the upstream servers and the clients the gateway's tests share (test_gateway.py,
test_gateway_node.py, bench/gateway.py)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
SCANNER = HERE / "mcp_servers" / "scanner.py"
TRACKER = HERE / "mcp_servers" / "tracker.py"

SPEC = """
harness gw { version "1.0.0" }

mcp scanner {
  transport stdio "{scanner}"
  tool scan {
    summary "Scan a repository for known vulnerabilities."
    effects read
    input { target: string }
    output { report: string }
  }
  tool "create-issue" {
    summary "File a finding as an issue."
    effects external
    input { title: string }
  }
  tool rotate { summary "Change the tool list."; effects write; input {} }
}

mcp tracker {
  transport stdio "{tracker}"
  tool open_ticket {
    summary "Open a ticket in the tracker."
    effects write external
    input { title: string, severity: string }
  }
  tool close_ticket { summary "Close a ticket."; effects write; input { ticket: string } }
}

policy desk {
  default deny
  read: allow mcp:scanner:tool:scan
  rotate: allow mcp:scanner:tool:rotate
  secret: deny mcp:scanner:tool:create-issue when args.title startswith "SECRET" {
    reason "Findings marked SECRET are never filed in the public tracker."
  }
  issues: allow mcp:scanner:tool:create-issue
  low: allow mcp:tracker:tool:open_ticket when args.severity == "low"
  high: ask mcp:tracker:tool:open_ticket when args.severity == "high" {
    approver role "ops"
    grant once ttl 10m
    expires 1h
    reason "A high-severity ticket pages the on-call engineer: an operator approves each."
  }
}

surface desk {
  expose mcp:scanner:tool:scan, mcp:scanner:tool:create-issue, mcp:scanner:tool:rotate
  expose mcp:tracker:tool:open_ticket
}

agent assistant { surface desk; policy desk }
"""

SCAN = "mcp__scanner__scan"
ISSUE = "mcp__scanner__create-issue"
TICKET = "mcp__tracker__open_ticket"
CLOSE = "mcp__tracker__close_ticket"
OPS = {"user": "u-ops", "role": "ops"}


def write_spec(folder: Path, *, ledger: Path | None = None, tracker: str | None = None) -> Path:
    """The spec in `folder`, its upstream servers started with this Python (the tracker
    writing each call it gets to `ledger`); `tracker` replaces the tracker's command line."""
    py = sys.executable
    track = tracker or f"{py} {TRACKER}" + (f" --ledger {ledger}" if ledger else "")
    text = SPEC.replace("{scanner}", f"{py} {SCANNER}").replace("{tracker}", track)
    path = folder / "desk.harness"
    path.write_text(text, encoding="utf-8")
    return path
