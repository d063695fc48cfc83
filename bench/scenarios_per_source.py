"""What per-source provenance changes in the scenario suite, measured on three domains whose
purpose names the document: the mail and calendar assistant replies to the sender of a mail it
read, the banking assistant pays the bill in the file the user named when the file names one
payee, and the support assistant closes or escalates a ticket the agent named or read.

    .venv/bin/python bench/scenarios_per_source.py

Each domain is run as written (tests/scenarios/, unchanged: its spec was written before its
attacks), then with its recipient, payee or ticket rule rewritten with `from result…(…)` (the
edits below, nothing else), and the pairs denied / asked / through and the tasks allowed /
asked / denied of both are printed, with each miss of the rewritten spec. The rewritten specs
are not the suite's: tests/test_scenarios.py holds the suite to the specs as written.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harnessc.compiler.pipeline import check

from tests.scenarios import runner
from tests.scenarios.catalogue import DOMAINS
from tests.scenarios.runner import HERE, Report, report

EDITS: dict[str, tuple[tuple[str, str], ...]] = {
    # "Reply to the shop's mail": the sender of a mail the assistant read, by the mail's own
    # `sender` field (an address in its body is written by whoever wrote the mail).
    "mail_calendar.harness": (
        (
            "known_recipients: allow mail.send when all r in args.to: (r from user or r from "
            "trusted)",
            "known_recipients: allow mail.send\n"
            "      when all r in args.to: (r from user or r from trusted\n"
            "        or r from result.sender(mail.read within 1h))",
        ),
        (
            "      when any r in args.to: (r from untrusted only or r from nowhere) {\n"
            '    reason "Mail goes only',
            "      when any r in args.to: (r from untrusted only\n"
            "          and not r from result.sender(mail.read within 1h)\n"
            "        or r from nowhere) {\n"
            '    reason "Mail goes only',
        ),
    ),
    # "Pay the plumber's bill in plumber.txt": a payee from the file the user named, when that
    # file names one payee (a second one is someone else's word inside the bill).
    "payments.harness": (
        (
            "chosen_payee: allow bank.send when args.iban from user or args.iban from trusted",
            "chosen_payee: allow bank.send\n"
            "      when args.iban from user or args.iban from trusted\n"
            "        or args.iban from result(files.read within 1h\n"
            "          when args.name from user and len(ibans(result.text)) == 1)",
        ),
        (
            "foreign_payee: deny bank.send when args.iban from untrusted only or args.iban from "
            "nowhere {",
            "foreign_payee: deny bank.send\n"
            "      when (args.iban from untrusted only or args.iban from nowhere)\n"
            "        and not args.iban from result(files.read within 1h\n"
            "          when args.name from user and len(ibans(result.text)) == 1) {",
        ),
    ),
    # "an answer goes on a ticket the helpdesk or the agent named": the ticket the agent named,
    # or one whose own `id` a read returned (not an id another ticket's text mentions).
    "customer_support.harness": (
        (
            "handle: allow tickets.escalate, tickets.close when args.id from trusted or args.id "
            "from user",
            "handle: allow tickets.escalate, tickets.close\n"
            "      when args.id from user or args.id from result.id(tickets.read within 1h)",
        ),
    ),
}


def counts(rep: Report) -> str:
    pairs = [o.verdict for o in rep.pairs]
    tasks = [o.verdict for o in rep.tasks]
    return (
        f"{pairs.count('denied')} / {pairs.count('asked')} / {pairs.count('through')}"
        f"    {tasks.count('allowed')} / {tasks.count('asked')} / {tasks.count('denied')}"
    )


def main() -> None:
    print(f"{'domain':<18} {'spec':<22} {'pairs d / a / t':<18} tasks al / as / de")
    with tempfile.TemporaryDirectory() as folder:
        for domain in DOMAINS:
            edits = EDITS.get(domain.spec)
            if edits is None:
                continue
            print(f"{domain.name:<18} {'as written':<22} {counts(report(domain))}")
            text = (HERE / domain.spec).read_text(encoding="utf-8")
            for old, new in edits:
                assert old in text, f"{domain.spec}: {old!r} is not in the spec any more"
                text = text.replace(old, new)
            path = Path(folder) / domain.spec
            path.write_text(text, encoding="utf-8")
            result = check([path])
            assert result.ok and result.model is not None, [str(d) for d in result.diagnostics]
            runner._SPECS[domain.spec] = result.model
            rewritten = report(domain)
            runner._SPECS.pop(domain.spec)
            print(f"{'':<18} {'with result…(…)':<22} {counts(rewritten)}")
            for o in rewritten.tasks + rewritten.pairs:
                if (o.attack is None and o.verdict != "allowed") or (
                    o.attack is not None and o.verdict != "denied"
                ):
                    print(f"{'':<20}{o.verdict}: {o.name}")


if __name__ == "__main__":
    main()
