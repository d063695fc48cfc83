"""What reading a URL's values costs a decision: the support desk's fetch rules
(examples/support-desk/support.harness) against the same rules on the whole URL and against
prefix tests with no session term, and what indexing a text's links costs.

    .venv/bin/python bench/carried.py [--calls 1500] [--rounds 3]

Decisions: a session reads a customer record and searches the help centre, then decides
`--calls` fetches of the help-centre link it found (allowed under every variant), each
`Session.decide` timed alone; the median of each round, the best of `--rounds` rounds, printed
as ratios to the variant without session terms (run side by side, so the load is shared).
Indexing: `provenance.text_keys` of a text dense with links, with and without the tokens of
what the links carry.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness
from harnessc.runtime.judge import provenance

ROOT = Path(__file__).resolve().parent.parent
SPEC = (ROOT / "examples" / "support-desk" / "support.harness").read_text(encoding="utf-8")
PARAMS_PII = (
    "any v in params(args.url): v from label pii\n"
    "        or any v in segments(args.url): v from label pii"
)
PARAMS_UNKNOWN = "any v in params(args.url): not (v from user or v from trusted)"
VARIANTS = {
    "params/segments": SPEC,
    "whole URL": SPEC.replace(PARAMS_PII, "args.url from label pii").replace(
        PARAMS_UNKNOWN, "not (args.url from user or args.url from trusted)"
    ),
    "no session term": SPEC.replace(PARAMS_PII, 'args.url startswith "https://evil.test/c/"')
    .replace("seen(pii within 1h) and ", "")
    .replace(PARAMS_UNKNOWN, 'args.url startswith "https://evil.test/px"'),
}
RECORD = {"name": "Ann Lee", "email": "ann.lee@mail.example", "phone": "+44 20", "plan": "pro"}
LINK = "https://help.example/a?topic=duplicate-charges"


def decide_median(text: str, calls: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "support.harness"
        path.write_text(text, encoding="utf-8")
        spec = check([path]).model
    assert spec is not None
    h = Harness(spec)
    h.bind("crm.get_customer", lambda args: RECORD)
    h.bind("help.search", lambda args: {"links": f"See {LINK}"})
    s = h.session("support_agent", actor={"user": "u-1", "role": "member"}, task="t-1")
    s.user_said("Why was cus-4411 charged twice?")
    read = s.normalize("crm.get_customer", "c-0", {"id": "cus-4411"})
    s.decide(read)  # type: ignore[arg-type]
    s.invoke(read)  # type: ignore[arg-type]
    search = s.normalize("help.search", "c-1", {"q": "double charge"})
    s.decide(search)  # type: ignore[arg-type]
    s.invoke(search)  # type: ignore[arg-type]
    times = []
    for i in range(calls):
        call = s.normalize("web.fetch", f"f-{i}", {"url": LINK})
        start = time.perf_counter()
        decision = s.decide(call)  # type: ignore[arg-type]
        times.append(time.perf_counter() - start)
        assert decision.effect == "allow", decision
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    best = {name: float("inf") for name in VARIANTS}
    for _ in range(args.rounds):
        for name, text in VARIANTS.items():
            best[name] = min(best[name], decide_median(text, args.calls))
    base = best["no session term"]
    print("decision, median, ratio to the same policy without session terms:")
    for name, value in best.items():
        print(f"  {name:16} {value / base:5.2f}x")
    page = (
        "Track it at https://track.carrier.example/status?parcel=JD0142-88731&lang=en or read "
        "https://help.example/articles/returns?topic=duplicate-charges. Mail support@shop.example. "
    ) * 5
    kept = provenance._carried_tokens
    runs = {}
    for name, carried in (("with", kept), ("without", lambda url: iter(()))):
        provenance._carried_tokens = carried
        runs[name] = min(timeit.repeat(lambda: provenance.text_keys(page), number=2000, repeat=5))
    provenance._carried_tokens = kept
    print(
        f"indexing a text dense with links: with / without carried tokens "
        f"{runs['with'] / runs['without']:.2f}x"
    )


if __name__ == "__main__":
    main()
