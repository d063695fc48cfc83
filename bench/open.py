"""Opening a log: what a `Harness` pays to open a SQLite log of 30,000 events, walking its
chain from the first event (no checkpoint) against from its last checkpoint, side by side.

    .venv/bin/python bench/open.py [--events 30000] [--rounds 5] [--key]

Builds (in a temporary folder) a log of one session's governed calls (`bench/console.py`'s
`fill`, six events a call), then a copy of it opened once by a harness and written to, so
that it ends with a `log.checkpoint` of its head then (what a harness records with its first
write after it walked 1,000 events or more past the last checkpoint). Each
round opens both, alternately, and times `Harness(spec, store=SQLiteStore(copy))`: the fold
of the whole log into the harness's projections, with the chain walked page by page before
each page is folded (all of it, or the events after the checkpoint), in turns, each after a
garbage collection. Also timed: the walk alone (`ChainWatch.check` of the whole log, rows
read included). `--key` writes and opens the log with a log key (MACs checked too). Prints
the median of the rounds in milliseconds, with the load average before and after.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.log.chain import ChainWatch
from harnessc.runtime.log.events import NewEvent
from harnessc.runtime.log.integrity import LOG_KEY_ENV

_spec = importlib.util.spec_from_file_location(
    "bench_console", Path(__file__).with_name("console.py")
)
assert _spec is not None and _spec.loader is not None
console = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(console)


def opened(spec: object, path: Path) -> tuple[float, bool]:
    """The time a harness took to open `path`, and whether it walked from a checkpoint."""
    gc.collect()
    store = SQLiteStore(path)
    start = time.perf_counter()
    h = Harness(spec, store=store)  # type: ignore[arg-type]
    took = time.perf_counter() - start
    store.close()
    return took, h._watch is not None and h._watch.resumed is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--key", action="store_true")
    args = parser.parse_args()
    if args.key:
        os.environ[LOG_KEY_ENV] = "bench-key-" + "k" * 40
    else:
        os.environ.pop(LOG_KEY_ENV, None)
    spec = console.compile_spec()
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / "plain.db"
        console.fill(spec, f"sqlite:///{plain}", args.events)
        marked = Path(folder) / "marked.db"
        shutil.copyfile(plain, marked)
        with SQLiteStore(marked) as store:
            Harness(spec, store=store)
            store.append(NewEvent("bench", "Text", "note", {}))  # with it, the checkpoint
            total = store.head()[0]
        load = os.getloadavg()
        times: dict[str, list[float]] = {"no checkpoint": [], "checkpoint": [], "walk alone": []}
        for i in range(args.rounds):
            for name, path in sorted(
                [("no checkpoint", plain), ("checkpoint", marked)], reverse=i % 2 == 1
            ):
                took, resumed = opened(spec, path)
                assert resumed == (path == marked)
                times[name].append(took)
            gc.collect()
            with SQLiteStore(plain) as store:
                start = time.perf_counter()
                assert ChainWatch(store.log_key).check(store).ok
                times["walk alone"].append(time.perf_counter() - start)
        print(f"log of {total} events, key: {'yes' if args.key else 'no'}, rounds: {args.rounds}")
        for name, found in times.items():
            print(f"  {name:14} {statistics.median(found) * 1000:8.1f} ms (median)")
        after = os.getloadavg()
        print(f"load average {load[0]:.2f} before, {after[0]:.2f} after")


if __name__ == "__main__":
    main()
