"""A list fact grown by `on_success`, one value a call: the log bytes each update writes and the
time of a governed call, as the fact grows to N values (`on_success add args.iban to
bank.payees`, a policy that reads the fact's provenance, in-memory log: the time is the
machinery's, not a disk's).

    .venv/bin/python bench/facts.py [--sizes 10,100,1000] [--baseline OTHER_CHECKOUT]

For each N it prints the bytes of `facts.updated` per update and the median microseconds of a
call (normalize, decide, invoke) over the last tenth of the N calls. Linear cost means both stay
flat as N grows. `--baseline` runs the same in another checkout of harnessc (its own
interpreter, `OTHER/.venv/bin/python`), in the same run, for side-by-side ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
harness payees { version "1.0.0" }
fact bank.payees: list<string>
tool payee.add {
  summary "Register a payee."
  effects write
  input { iban: string }
  on_success add args.iban to bank.payees
}
tool pay.send {
  summary "Send a payment."
  effects write external
  input { iban: string, amount: float }
}
surface desk { expose payee.*, pay.* }
policy bank {
  default deny
  allow payee.add when args.iban from user
  allow pay.send when args.iban from trusted
}
agent banker { surface desk; policy bank }
"""


def one(size: int) -> dict[str, float]:
    """Grow the fact to `size` values in one session; bytes per update, µs per call."""
    from harnessc.compiler.pipeline import check
    from harnessc.runtime import Harness, MemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "payees.harness"
        spec_path.write_text(SPEC, encoding="utf-8")
        result = check([spec_path])
        assert result.ok and result.model is not None
        store = MemoryStore()
        h = Harness(result.model, store=store)
        h.bind("payee.add", lambda args: {})
        ibans = [f"DE{n:020d}" for n in range(size)]
        s = h.session("banker", actor={"user": "u-1"}, said=["register " + " ".join(ibans)])
        times = []
        for n, iban in enumerate(ibans):
            start = time.perf_counter()
            call = s.normalize("payee.add", f"c-{n}", {"iban": iban})
            assert s.decide(call).effect == "allow"
            s.invoke(call)
            times.append(time.perf_counter() - start)
        written = sum(len(e.payload_json or "") for e in store.read() if e.type == "facts.updated")
    tail = times[-max(size // 10, 1) :]
    return {"bytes": written / size, "us": statistics.median(tail) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--baseline", metavar="OTHER_CHECKOUT")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    here = Path(sys.executable)
    runs = [("this", here, Path(__file__).resolve().parent.parent)]
    if args.baseline:
        other = Path(args.baseline).resolve()
        runs.append(("baseline", other / ".venv" / "bin" / "python", other))
    print(f"{'N':>6}  {'checkout':<9} {'bytes/update':>13} {'µs/call':>9}")
    for size in (int(s) for s in args.sizes.split(",")):
        for name, python, root in runs:
            out = subprocess.run(
                [str(python), __file__, "--one", str(size)],
                capture_output=True,
                text=True,
                check=True,
                cwd=root,
            )
            got = json.loads(out.stdout)
            print(f"{size:>6}  {name:<9} {got['bytes']:>13.0f} {got['us']:>9.0f}")


if __name__ == "__main__":
    main()
