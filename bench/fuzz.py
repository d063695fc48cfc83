"""Fuzz the compiler with seeded mutants of every spec in the repository, and count what breaks.

    .venv/bin/python bench/fuzz.py --mutants 100000 [--seed 0] [--workers 2] [--build-every 20]
    .venv/bin/python bench/fuzz.py --seed 0 --only 1234     # reproduce one mutant, verbosely

Each mutant goes through parse, check and lint, the diagnostic renderers, fmt (twice, and the
result re-parsed) and, for every `--build-every`-th mutant that checks clean, build (into a
scratch folder). Prints the counts of tracebacks, internal errors (H9xx), hangs (a stage over
`--limit` seconds of CPU time or ten times as much wall time, or a worker that stops
answering) and unstable formats, the throughput and the slowest stages (in CPU time). Every
failing mutant is saved to `--save` (a `.harness` file named by seed and index, and a `.txt`
saying what happened) so it can join `tests/fuzz/corpus/`.
Exits 1 when anything was found.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.fuzzer import KINDS, Finding, Runner, Seed, make_mutant, seeds

CHUNK = 25
# a worker silent this long is stuck where the alarm cannot reach (in C): it is replaced
STUCK_SECONDS = 60.0


def _work(args: argparse.Namespace, pool: list[Seed], tasks: mp.Queue, results: mp.Queue) -> None:
    os.nice(args.nice)
    with tempfile.TemporaryDirectory(prefix="harnessc-fuzz-") as scratch:
        runner = Runner(Path(scratch), limit=args.limit)
        while True:
            chunk = tasks.get()
            if chunk is None:
                return
            for index in chunk:
                results.put(("start", os.getpid(), index))
                mutant = make_mutant(args.seed, index, pool)
                build = args.build_every > 0 and index % args.build_every == 0
                outcome = runner.run(mutant.origin, mutant.data, build=build)
                results.put(("done", os.getpid(), index, outcome.findings, outcome.seconds))


def _save(args: argparse.Namespace, pool: list[Seed], index: int, findings: list[Finding]) -> None:
    folder = Path(args.save)
    folder.mkdir(parents=True, exist_ok=True)
    mutant = make_mutant(args.seed, index, pool)
    stem = f"seed{args.seed}-{index}-{findings[0].kind}-{findings[0].stage}"
    (folder / f"{stem}.harness").write_bytes(mutant.data)
    lines = [mutant.label, ""] + [f"{f.kind} in {f.stage}:\n{f.detail}\n" for f in findings]
    (folder / f"{stem}.txt").write_text("\n".join(lines), encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    indices = list(range(args.start, args.start + args.mutants))
    # read once: a worker started later (to replace a stuck one) must draw from the same pool
    # even when the repository's specs change during the campaign
    pool = seeds()
    tasks: mp.Queue = mp.Queue()
    results: mp.Queue = mp.Queue()
    for i in range(0, len(indices), CHUNK):
        tasks.put(indices[i : i + CHUNK])
    workers: dict[int, mp.Process] = {}

    def spawn() -> None:
        tasks.put(None)  # each worker takes one stop mark when the chunks run out
        process = mp.Process(target=_work, args=(args, pool, tasks, results), daemon=True)
        process.start()
        workers[process.pid or 0] = process

    for _ in range(args.workers):
        spawn()
    counts: Counter[str] = Counter()
    by_stage: Counter[tuple[str, str]] = Counter()
    failing: set[int] = set()
    slowest: dict[str, tuple[float, int]] = {}
    running: dict[int, tuple[int, float]] = {}
    done = 0
    started = time.perf_counter()
    while done < len(indices):
        try:
            message = results.get(timeout=1.0)
        except queue.Empty:
            message = None
        now = time.perf_counter()
        if message is not None and message[0] == "start":
            running[message[1]] = (message[2], now)
        elif message is not None:
            _, pid, index, findings, seconds = message
            running.pop(pid, None)
            done += 1
            for finding in findings:
                counts[finding.kind] += 1
                by_stage[(finding.kind, finding.stage)] += 1
            if findings:
                failing.add(index)
                _save(args, pool, index, findings)
            for stage, spent in seconds.items():
                if spent > slowest.get(stage, (0.0, 0))[0]:
                    slowest[stage] = (spent, index)
            if done % args.progress == 0:
                rate = done / (now - started)
                print(f"{done} mutants, {rate:.1f}/s, {dict(counts)}", flush=True)
        for pid, (index, since) in list(running.items()):
            if now - since > STUCK_SECONDS:
                # the chunk's remaining mutants are lost with the worker; count them as done
                workers.pop(pid).kill()
                running.pop(pid)
                counts["hang"] += 1
                by_stage[("hang", "worker")] += 1
                failing.add(index)
                _save(args, pool, index, [Finding("hang", "worker", f"silent {STUCK_SECONDS:g} s")])
                lost = CHUNK - 1 - (index - args.start) % CHUNK
                done += 1 + min(lost, len(indices) - done - 1)
                spawn()
    elapsed = time.perf_counter() - started
    for process in workers.values():
        process.kill()
    print(f"\nseed {args.seed}, mutants {args.start}..{args.start + args.mutants - 1}")
    print(f"{done} mutants in {elapsed:.0f} s: {done / elapsed:.1f} mutants/s")
    for kind in KINDS:
        stages = ", ".join(f"{s}: {n}" for (k, s), n in sorted(by_stage.items()) if k == kind)
        print(f"  {kind:13} {counts[kind]:6}" + (f"   ({stages})" if stages else ""))
    print(
        "slowest stage runs (CPU): "
        + ", ".join(f"{s} {t:.2f} s (#{i})" for s, (t, i) in sorted(slowest.items()))
    )
    if failing:
        print(f"{len(failing)} failing mutants saved to {args.save}/")
    return 1 if failing else 0


def reproduce(args: argparse.Namespace) -> int:
    mutant = make_mutant(args.seed, args.only, seeds())
    print(mutant.label)
    with tempfile.TemporaryDirectory(prefix="harnessc-fuzz-") as scratch:
        outcome = Runner(Path(scratch), limit=args.limit).run(
            mutant.origin, mutant.data, build=True
        )
    for finding in outcome.findings:
        print(f"\n{finding.kind} in {finding.stage}:\n{finding.detail}")
    print("\nCPU: " + ", ".join(f"{s} {t * 1000:.1f} ms" for s, t in outcome.seconds.items()))
    if args.write:
        Path(args.write).write_bytes(mutant.data)
    return 1 if outcome.findings else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="the first mutant's index")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--build-every", type=int, default=20, help="0: never build")
    parser.add_argument("--limit", type=float, default=2.0, help="CPU seconds a stage may take")
    parser.add_argument("--nice", type=int, default=10)
    parser.add_argument("--progress", type=int, default=1000)
    parser.add_argument("--save", default="fuzz-failures")
    parser.add_argument("--only", type=int, help="run this one mutant and show what happens")
    parser.add_argument("--write", help="with --only: write the mutant to this file")
    args = parser.parse_args()
    return reproduce(args) if args.only is not None else run(args)


if __name__ == "__main__":
    sys.exit(main())
