"""Event store throughput: single appends, batched appends, reads and chain verification.

    .venv/bin/python bench/events.py [--events 2000] [--batch 100] [--sync FULL,NORMAL]

Prints events per second for each `synchronous` setting on a fresh SQLite file in a temporary
directory (so the numbers depend on that disk's fsync cost): `append` (one transaction, one fsync
per event), `append_many` (one transaction per batch), `read` (pages of 1,000) and `verify`
(recomputing every hash). Payloads look like a tool call's transition event.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harnessc.runtime.events import NewEvent
from harnessc.runtime.store import SQLiteStore


def event(i: int) -> NewEvent:
    return NewEvent(
        f"session-{i % 8}",
        "Tool",
        "action.transition",
        {
            "tool_call_id": f"call-{i}",
            "tool_id": "change.create",
            "from": "AUTHORIZED",
            "to": "RUNNING",
            "input_hash": f"{i:064x}",
            "args": {"service": "payments-api", "patch_ref": f"p-{i}", "evidence_refs": ["r1"]},
        },
    )


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>10,.0f} events/s"


def run(n: int, batch: int, sync: str, folder: Path) -> None:
    path = folder / f"bench-{sync}.db"
    events = [event(i) for i in range(n)]
    with SQLiteStore(path, synchronous=sync) as store:
        start = time.perf_counter()
        for e in events:
            store.append(e)
        single = time.perf_counter() - start

        start = time.perf_counter()
        for i in range(0, n, batch):
            store.append_many(events[i : i + batch])
        batched = time.perf_counter() - start

        start = time.perf_counter()
        count = sum(1 for _ in store.scan())
        read = time.perf_counter() - start

        start = time.perf_counter()
        verification = store.verify()
        verify = time.perf_counter() - start
    assert verification.ok and count == 2 * n, verification
    print(f"synchronous={sync}")
    print(f"  append                {rate(n, single)}")
    print(f"  append_many({batch:>4})     {rate(n, batched)}")
    print(f"  read                  {rate(count, read)}")
    print(f"  verify                {rate(count, verify)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sync", default="FULL,NORMAL")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for sync in args.sync.split(","):
            run(args.events, args.batch, sync.strip().upper(), Path(folder))


if __name__ == "__main__":
    main()
