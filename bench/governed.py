"""The governed call in a session, end to end: normalize, decide, (approve), invoke, on the
in-memory store and on a SQLite file, for an allowed call, an approved `once` call, a call
whose tool takes a `secret` argument (its values are scrubbed from everything recorded), and
the allowed call under a policy that also reads session state (`session`: a provenance term
and a windowed count, so each decision brings the session's ledger up to date from the log).

    .venv/bin/python bench/governed.py [--calls 2000] [--rounds 3]

Prints the median microseconds per call of the best round for each case. Executors do nothing,
so the figures are the machinery's cost. Run it on two checkouts side by side, in one shell
command, to compare them (the machines are shared: compare ratios, never lone figures).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, MemoryStore, PendingCall, SQLiteStore

SPEC = """\
harness bench { version "1.0.0" }
tool change.create {
  summary "Open a change request."
  effects write reversible
  risk medium
  input { service: string, patch: string }
}
tool ops.run {
  summary "Run an operation."
  effects external
  risk medium
  input { command: string }
}
tool vault.put {
  summary "Store a credential."
  effects write
  risk medium
  input { name: string, value: string secret }
}
surface tools { expose change.*, ops.*, vault.* }
policy bench {
  default deny
  allow change.create, vault.put
  ask ops.run { approver role "ops"; grant once ttl 10m }
}
agent runner { surface tools; policy bench }
"""
# the same spec whose policy also reads session state (the allowed call still wins)
SESSION_SPEC = SPEC.replace(
    "  allow change.create, vault.put\n",
    "  allow change.create, vault.put\n"
    '  deny change.create when args.patch from untrusted only { reason "an injected patch" }\n'
    "  ask change.create when count(change.create within 1m) > 1000000 {\n"
    '    approver role "ops"\n'
    "  }\n",
)
ACTOR = {"user": "u-1", "role": "dev"}
OPS = {"user": "u-2", "role": "ops"}


def compiled(text: str = SPEC) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.harness"
        path.write_text(text, encoding="utf-8")
        result = check([path])
        assert result.ok and result.model is not None
        return result.model


def one_round(spec: Any, store: Any, case: str, calls: int) -> float:
    h = Harness(spec, store=store)
    for tool in ("change.create", "ops.run", "vault.put"):
        h.bind(tool, lambda args: {})
    s = h.session("runner", actor=ACTOR, task="t-1")
    if case == "session":
        s.user_said("open a change for api with patch p")
    times: list[float] = []
    for i in range(calls):
        start = time.perf_counter()
        if case in ("allow", "session"):
            call = s.normalize("change.create", f"c-{i}", {"service": "api", "patch": "p"})
        elif case == "secret":
            call = s.normalize("vault.put", f"c-{i}", {"name": "db", "value": f"s3cr3t-{i:08}"})
        else:
            call = s.normalize("ops.run", f"c-{i}", {"command": "restart api"})
        assert isinstance(call, PendingCall)
        if case == "once":
            h.approve(s.request_approval(call).request_id, by=OPS)
        else:
            s.decide(call)
        result = s.invoke(call)
        times.append(time.perf_counter() - start)
        assert result.ran, result.error
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    specs = {"plain": compiled(), "session": compiled(SESSION_SPEC)}
    print(f"load average {os.getloadavg()[0]:.2f}; median µs per governed call, best round")
    for store_kind in ("memory", "sqlite"):
        for case in ("allow", "once", "secret", "session"):
            spec = specs["session" if case == "session" else "plain"]
            best = float("inf")
            for _ in range(args.rounds):
                with tempfile.TemporaryDirectory() as tmp:
                    store = (
                        MemoryStore() if store_kind == "memory" else SQLiteStore(Path(tmp) / "l.db")
                    )
                    calls = args.calls if store_kind == "memory" else max(args.calls // 4, 50)
                    best = min(best, one_round(spec, store, case, calls))
                    store.close()
            print(f"{store_kind:7} {case:7} {best:9.1f}")


if __name__ == "__main__":
    main()
