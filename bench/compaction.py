"""What a compaction saves: the log's bytes and the time to open a harness on it, before and after.

    .venv/bin/python bench/compaction.py [--sessions 400] [--calls 4] [--open-share 0.1]

Fills a SQLite log with S sessions of the desk spec below (count, a day's sum and provenance
terms), each a user message and C governed calls (normalize, decide, invoke); all but
`--open-share` of them end. Then copies the log, compacts the copy at its head
(`harnessc.runtime.log.cut.compact`) and prints, side by side:

- events, and the events' bytes in the table (the columns' lengths summed);
- the file's bytes once `VACUUM`ed (a compaction frees pages that later appends reuse; the file
  shrinks only with `VACUUM`);
- the archive's bytes;
- the time to open a `Harness` on each log (walking and folding it), the best of three, and
  their ratio;
- the time of `verify` on the compacted log alone, and across the cut with its archive.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

DESK = """
harness desk { version "1.0.0" }
tool files.delete {
  summary "Delete a file."
  effects write
  input { path: path }
}
tool payments.send {
  summary "Send a payment."
  effects external
  input { iban: string, amount: int }
}
surface all_tools { expose files.delete, payments.send }
policy desk {
  default allow
  wipe: deny files.delete when count(files.delete) > 3 { reason "too many deletions" }
  daily: deny payments.send when sum(args.amount of payments.send within 24h) > 300 {
    reason "over the daily limit"
  }
  given: deny payments.send when not args.iban from user { reason "an IBAN the user gave" }
}
agent bot { persona "A bot." surface all_tools policy desk }
"""
IBAN = "DE89370400440532013000"


def spec(folder: Path) -> object:
    from harnessc.compiler.pipeline import check

    path = folder / "desk.harness"
    path.write_text(DESK, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None
    return result.model


def fill(model: object, db: Path, sessions: int, calls: int, open_share: float) -> None:
    from harnessc.runtime import Harness, PendingCall, SQLiteStore

    h = Harness(model, store=SQLiteStore(db))  # type: ignore[arg-type]
    h.bind("files.delete", lambda args: {})
    h.bind("payments.send", lambda args: {})
    keep_open = int(sessions * open_share)
    for n in range(sessions):
        s = h.session("bot", actor={"user": f"u-{n}", "role": "agent"}, task=f"t-{n}")
        s.user_said(f"pay {IBAN} for ticket {n}")
        for c in range(calls):
            if c % 2:
                call = s.normalize("payments.send", f"c-{c}", {"iban": IBAN, "amount": 50})
            else:
                call = s.normalize("files.delete", f"c-{c}", {"path": f"/w/{n}/{c}"})
            assert isinstance(call, PendingCall)
            if s.decide(call).effect == "allow":
                s.invoke(call)
        if n >= keep_open:
            s.end()
    h.store.close()


def table_bytes(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        count, size = conn.execute(
            "SELECT count(*), sum(length(stream) + length(kind) + length(type) + length(payload)"
            " + length(time) + length(prev_hash) + length(hash) + coalesce(length(mac), 0) + 16)"
            " FROM events"
        ).fetchone()
    finally:
        conn.close()
    return int(count), int(size or 0)


def vacuumed(db: Path) -> int:
    copy = db.with_suffix(".vacuum.db")
    shutil.copy(db, copy)
    conn = sqlite3.connect(copy)
    conn.execute("VACUUM")
    conn.close()
    size = copy.stat().st_size
    copy.unlink()
    return size


def open_time(model: object, db: Path) -> float:
    from harnessc.runtime import Harness, SQLiteStore

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        h = Harness(model, store=SQLiteStore(db))  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - start)
        h.store.close()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--open-share", type=float, default=0.1)
    args = parser.parse_args()

    from harnessc.runtime import SQLiteStore
    from harnessc.runtime.log.cut import compact, read_archive, verify_across

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = spec(folder)
        whole = folder / "whole.db"
        fill(model, whole, args.sessions, args.calls, args.open_share)
        cut = folder / "cut.db"
        shutil.copy(whole, cut)
        archive = folder / "archive.jsonl"
        with SQLiteStore(cut) as store:
            done = compact(store, before=store.head()[0], archive=archive)

        events_before, bytes_before = table_bytes(whole)
        events_after, bytes_after = table_bytes(cut)
        file_before, file_after = vacuumed(whole), vacuumed(cut)
        open_before, open_after = open_time(model, whole), open_time(model, cut)
        with SQLiteStore(cut, readonly=True) as store:
            start = time.perf_counter()
            assert store.verify().ok
            verify_alone = time.perf_counter() - start
            start = time.perf_counter()
            assert verify_across(store.read(), [read_archive(archive)]).ok
            verify_whole = time.perf_counter() - start
        load = os.getloadavg()[0]
        open_sessions = int(args.sessions * args.open_share)
        print(
            f"{args.sessions} sessions × {args.calls} calls, {open_sessions} left open "
            f"(load average {load:.1f})"
        )
        print(f"{'':28} {'before':>12} {'after':>12} {'after/before':>13}")
        rows = [
            ("events", events_before, events_after),
            ("events' bytes", bytes_before, bytes_after),
            ("file bytes (vacuumed)", file_before, file_after),
        ]
        for name, a, b in rows:
            print(f"{name:28} {a:>12,} {b:>12,} {b / a:>13.3f}")
        print(
            f"{'open a harness (s)':28} {open_before:>12.3f} {open_after:>12.3f} "
            f"{open_after / open_before:>13.3f}"
        )
        print(
            f"archive: {done.archive_bytes:,} bytes, {done.archived:,} events; carried "
            f"{done.carried:,} events of {done.streams_carried} live streams"
        )
        print(
            f"verify after the cut: alone {verify_alone:.3f} s, with the archive "
            f"{verify_whole:.3f} s (ratio {verify_whole / verify_alone:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
