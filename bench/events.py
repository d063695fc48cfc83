"""Event store throughput: single appends, batched appends, reads and chain verification.

    .venv/bin/python bench/events.py [--events N] [--batch N] [--sync FULL,NORMAL] [--threads N]

Prints events per second for each `synchronous` setting on a fresh SQLite file in a temporary
directory (so the numbers depend on that disk's fsync cost): `append` (one transaction, one fsync
per event), `append, N threads` (the same appends from N threads at once: concurrent appends
share commits), `append_many` (one transaction per batch), `read` (pages of 1,000) and `verify`
(recomputing every hash), each without and with a log key (an HMAC-SHA256 per event, and per
verified event), side by side with the keyed/plain ratio. Payloads look like a tool call's
transition event.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.integrity import LogKey
from harnessc.runtime.log.store import SQLiteStore

KEY = LogKey(b"bench-log-key-" * 4)


def event(i: int) -> NewEvent:
    """A call's move to RUNNING (the log admits each action and call once: every event is a
    call of its own)."""
    return NewEvent(
        f"session-{i % 8}",
        "Tool",
        "action.transition",
        {
            "action_id": f"act-{i}",
            "tool_call_id": f"call-{i}",
            "tool_id": "change.create",
            "from": "AUTHORIZED",
            "to": "RUNNING",
            "input_hash": f"{i:064x}",
            "args": {"service": "payments-api", "patch_ref": f"p-{i}", "evidence_refs": ["r1"]},
        },
    )


def timings(
    n: int, batch: int, sync: str, path: Path, key: LogKey | None, threads: int
) -> dict[str, float]:
    """Seconds per event of each operation on a fresh log at `path`."""
    events = [event(i) for i in range(n)]
    # each phase writes calls of its own: a second RUNNING of one call is refused
    shared = [event(n + i) for i in range(n)]
    batched = [event(2 * n + i) for i in range(n)]
    out: dict[str, float] = {}
    with SQLiteStore(path, synchronous=sync, key=key) as store:
        start = time.perf_counter()
        for e in events:
            store.append(e)
        out["append"] = (time.perf_counter() - start) / n

        share = n // threads
        pool = [
            threading.Thread(
                target=lambda part: [store.append(e) for e in part],
                args=(shared[k * share : (k + 1) * share],),
            )
            for k in range(threads)
        ]
        start = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        out[f"append, {threads} threads"] = (time.perf_counter() - start) / (share * threads)

        start = time.perf_counter()
        for i in range(0, n, batch):
            store.append_many(batched[i : i + batch])
        out[f"append_many({batch})"] = (time.perf_counter() - start) / n

        start = time.perf_counter()
        count = sum(1 for _ in store.scan())
        out["read"] = (time.perf_counter() - start) / count

        start = time.perf_counter()
        verification = store.verify()
        out["verify"] = (time.perf_counter() - start) / count
    assert verification.ok and verification.authenticated == (key is not None), verification
    assert count == 2 * n + share * threads
    return out


def run(n: int, batch: int, sync: str, folder: Path, threads: int) -> None:
    plain = timings(n, batch, sync, folder / f"plain-{sync}.db", None, threads)
    keyed = timings(n, batch, sync, folder / f"keyed-{sync}.db", KEY, threads)
    print(f"synchronous={sync}            plain events/s   keyed events/s   keyed/plain time")
    for name, seconds in plain.items():
        print(
            f"  {name:<22} {1 / seconds:>14,.0f}   {1 / keyed[name]:>14,.0f}"
            f"   {keyed[name] / seconds:>16.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--sync", default="FULL,NORMAL")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        for sync in args.sync.split(","):
            run(args.events, args.batch, sync.strip().upper(), Path(folder), args.threads)


if __name__ == "__main__":
    main()
