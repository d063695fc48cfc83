"""What per-source provenance costs a decision, and how the cost grows with the session:
`examples/bill-pay/bills.harness` (its payee rules read `from result(files.read within 1h when
args.name from user and len(ibans(result.text)) == 1)`) against the same spec with that term
replaced by `from untrusted` (a kind, one lookup) and by a prefix test of the IBAN (no session
term).

    .venv/bin/python bench/from_result.py [--reads 10,100,1000] [--calls 1000] [--rounds 3]

Each session reads `--reads` files (each naming its own IBAN; the user named the last), then
decides `--calls` payments to the last file's payee, each `Session.decide` timed alone; the
median of each round, the best of `--rounds` rounds, printed as ratios to the variant without
session terms at the same size (run side by side, so the load is shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness

ROOT = Path(__file__).resolve().parent.parent
SPEC = (ROOT / "examples" / "bill-pay" / "bills.harness").read_text(encoding="utf-8")


def replaced(text: str, by: str) -> str:
    """The spec with each `args.iban from result(…)` term (parentheses matched) replaced."""
    start = text.index("\npolicy ")  # the rules, not the header's comment
    out, found = [text[:start]], 0
    head = "args.iban from result("
    while (at := text.find(head, start)) >= 0:
        depth, end = 1, at + len(head)
        while depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        out += [text[start:at], by]
        start, found = end, found + 1
    assert found == 2, f"the example's two payee rules read the term ({found} found)"
    return "".join([*out, text[start:]])


VARIANTS = {
    "from result(…)": SPEC,
    "from untrusted": replaced(SPEC, "args.iban from untrusted"),
    "no session term": replaced(SPEC, 'args.iban startswith "IT60"'),
}


def iban(n: int) -> str:
    return f"IT60X05428111010000{n:08d}"


def decide_median(text: str, reads: int, calls: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bills.harness"
        path.write_text(text, encoding="utf-8")
        spec = check([path]).model
    assert spec is not None
    h = Harness(spec)
    h.bind("files.read", lambda args: {"text": f"Pay {iban(int(args['name'][5:-4]))} please."})
    s = h.session("payer", actor={"user": "u"}, task="t")
    s.user_said(f"Pay the bill in bill-{reads - 1}.txt.")
    for n in range(reads):
        read = s.normalize("files.read", f"r-{n}", {"name": f"bill-{n}.txt"})
        s.decide(read)  # type: ignore[arg-type]
        s.invoke(read)  # type: ignore[arg-type]
    times = []
    for i in range(calls):
        call = s.normalize("bank.transfer", f"p-{i}", {"iban": iban(reads - 1), "amount": 90.0})
        start = time.perf_counter()
        decision = s.decide(call)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
        assert decision.effect == "ask", decision
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", default="10,100,1000")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.reads.split(",")]
    print("decision, median, ratio to the same policy without session terms:")
    print(f"  {'reads':>6}  " + "  ".join(f"{name:>16}" for name in VARIANTS))
    for size in sizes:
        best = {name: float("inf") for name in VARIANTS}
        for _ in range(args.rounds):
            for name, text in VARIANTS.items():
                best[name] = min(best[name], decide_median(text, size, args.calls))
        base = best["no session term"]
        print(f"  {size:>6}  " + "  ".join(f"{best[n] / base:>15.2f}x" for n in VARIANTS))


if __name__ == "__main__":
    main()
