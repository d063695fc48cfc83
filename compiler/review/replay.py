"""`harnessc replay` and `harnessc log divergences`: the command-line side of replay and shadow
mode. The work is the runtime's (`runtime/session/replay.py`, `runtime/session/shadow.py`); this
module compiles the spec, opens the log read-only, and prints the report.

    harnessc replay --log events.db --spec new/spec.harness [--format text|json|markdown]
                    [--fail-on widened|changed|never] [--first N] [--workers N]
    harnessc log divergences --log events.db [--format text|json] [--first N]

Exit codes of `replay`: 0 nothing widened; 1 something widened (a call that was denied or asked
is now allowed; `--fail-on changed`: any decision flipped; `never`: 0 whatever changed); 2 a
usage error, a spec that does not compile (its diagnostics printed as `check` prints them) or a
log that cannot be read to its end (the report of what was read is printed first).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from harnessc.runtime.model import Spec
    from harnessc.runtime.session.replay import ReplayReport
    from harnessc.runtime.session.shadow import DivergenceReport

__all__ = ["divergences_main", "render_replay", "replay_main"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def replay_main(args: argparse.Namespace) -> int:
    from harnessc.runtime.log.cut import archived_note
    from harnessc.runtime.session.replay import replay

    spec = load_spec(args.spec)
    if spec is None:
        return EXIT_USAGE
    archives = getattr(args, "archive", None) or ()
    store = open_log(args.log, getattr(args, "key_file", None), archives)
    if store is None:
        return EXIT_USAGE
    note = archived_note(store)
    if note is not None:  # the decisions of archived sessions are not replayed: say so
        sys.stderr.write(f"harnessc: note: {note}: `--archive FILE` replays them too\n")
    if args.workers < 1:
        sys.stderr.write("harnessc: --workers takes a number of processes, 1 or more\n")
        store.close()
        return EXIT_USAGE
    try:
        if args.workers > 1 and args.log != "memory://" and not archives:
            store.close()  # each worker opens the log itself
            report = replay(args.log, spec, first=args.first, workers=args.workers)
        else:
            report = replay(store, spec, first=args.first)
    finally:
        store.close()
    sys.stdout.write(render_replay(report, args.format))
    if report.incomplete is not None:
        sys.stderr.write(f"harnessc: {report.incomplete}\n")
        return EXIT_USAGE
    if args.fail_on == "widened" and report.widened:
        return EXIT_FAIL
    if args.fail_on == "changed" and report.flipped:
        return EXIT_FAIL
    return EXIT_OK


def load_spec(path: str, *, nothing: str = "nothing was replayed") -> Spec | None:
    """The spec to replay under: a `.harness` file or folder compiled by the pipeline
    (diagnostics printed as `check` prints them), or a spec saved as JSON (`Spec.to_json`);
    `nothing` ends the message when it does not compile."""
    from harnessc.dsl.diagnostics import has_errors
    from harnessc.dsl.render_formats import print_diagnostics
    from harnessc.runtime.model import Spec

    from ..pipeline import check

    if path.endswith(".json"):
        from harnessc.dsl.files import confined
        from pydantic import ValidationError

        refused = confined(path)
        if refused is not None:
            print_diagnostics([refused])
            sys.stderr.write(f"harnessc: `{path}` was not read; {nothing}\n")
            return None
        try:
            return Spec.from_json(Path(path).read_bytes())
        except OSError as error:
            sys.stderr.write(f"harnessc: cannot read `{path}`: {error.strerror}\n")
        except ValidationError as error:
            # never the input: the file may be anything, and its text is not ours to show
            first = error.errors(include_input=False, include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            reason = first["msg"] + (f" at `{where}`" if where else "")
            sys.stderr.write(f"harnessc: `{path}` is not a compiled spec: {reason}\n")
        except ValueError as error:
            sys.stderr.write(f"harnessc: `{path}` is not a compiled spec: {error}\n")
        return None
    result = check([path])
    if result.diagnostics:
        print_diagnostics(result.diagnostics)
    if has_errors(result.diagnostics) or result.model is None:
        sys.stderr.write(f"harnessc: `{path}` does not compile; {nothing}\n")
        return None
    return result.model


class NoLog(Exception):
    """Why a review reads no log at a target (the message says: none there, not a log, a bad
    key, a chain that does not verify)."""


def vouched_log(target: str, key_file: str | None = None, archives: Sequence[str] = ()) -> Any:
    """The event store at `target`, read-only, its chain verified (with the log key of
    `key_file` or the environment, every MAC too); `NoLog` otherwise. A review decides on what
    the log records, so only on records its chain vouches for, as the operators' commands
    do. With `archives` (files `harnessc log compact` wrote), the log and its archives joined
    into one store in memory, verified as one chain."""
    from harnessc.runtime.log.chain import ChainWatch, StoreError
    from harnessc.runtime.log.cut import joined
    from harnessc.runtime.log.integrity import LogKey, LogKeyError
    from harnessc.runtime.log.open import open_store

    path = target.removeprefix("sqlite:///")
    if "://" not in path and not Path(path).exists():
        raise NoLog(f"no event log at `{target}`")
    try:
        key = LogKey.from_file(key_file) if key_file else LogKey.from_env()
        store = open_store(target, key=key, readonly=True)
    except (StoreError, LogKeyError) as error:
        raise NoLog(str(error)) from None
    try:
        if archives:
            whole = joined(store, archives, key=key)
            store.close()
            return whole
        ChainWatch.whole(store).vouch(store)
    except StoreError as error:  # UnverifiedLog, CutError: where and why
        store.close()
        raise NoLog(str(error)) from None
    return store


def open_log(target: str, key_file: str | None = None, archives: Sequence[str] = ()) -> Any:
    """`vouched_log`, or None with the reason printed."""
    try:
        return vouched_log(target, key_file, archives)
    except NoLog as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return None


# ---------------------------------------------------------------------------------------------
# The replay report


def render_replay(report: ReplayReport, fmt: str) -> str:
    """The report as `text`, `markdown` or `json` (`ReplayReport.to_dict`, `"version": 1`)."""
    data = report.to_dict()
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return _markdown(data) if fmt == "markdown" else _text(data)


def _ids(group: dict[str, Any]) -> str:
    shown = ", ".join(f"#{d['position']} {d['decision_id']}" for d in group["decisions"])
    more = group["count"] - len(group["decisions"])
    return shown + (f", … and {more} more" if more > 0 else "")


def _rule(rule: str | None) -> str:
    return rule if rule else "(default)"


def _at(group: dict[str, Any]) -> str:
    origin = group["new"].get("origin")
    return f" ({origin})" if origin else ""


def _text(data: dict[str, Any]) -> str:
    t = data["totals"]
    out = [
        f"replay under `{data['spec']}` (policy version {data['policy_version'][:12]}): "
        f"{t['decisions']} recorded decisions, {t['replayed']} replayed, "
        f"{t['flipped']} flipped ({t['widened']} widened), {t['not_replayed']} not replayed"
    ]
    if data["by_kind"]:
        kinds = ", ".join(f"{k} {n}" for k, n in data["by_kind"].items())
        out.append(f"changes: {kinds}")
    if data["flips"]:
        out.append("")
        out.append("flipped, by tool and rule:")
        for g in data["flips"]:
            mark = "  WIDENED" if g["widened"] else ""
            out.append(
                f"  {g['tool_id']}: {g['kind']}  {_rule(g['old']['rule'])} → "
                f"{_rule(g['new']['rule'])}{_at(g)}  ×{g['count']}{mark}"
            )
            out.append(f"    {_ids(g)}")
    if data["rule_changes"]:
        out.append("")
        out.append("same effect, another rule:")
        for g in data["rule_changes"]:
            out.append(
                f"  {g['tool_id']}: {g['old']['effect']}  {_rule(g['old']['rule'])} → "
                f"{_rule(g['new']['rule'])}  ×{g['count']}"
            )
    if data["not_replayed"]:
        out.append("")
        out.append("not replayed:")
        for g in data["not_replayed"]:
            out.append(f"  {g['reason']}: {g['detail']}  ×{g['count']}")
            out.append(f"    {_ids(g)}")
    if data["incomplete"]:
        out.append("")
        out.append(f"INCOMPLETE: {data['incomplete']}")
    return "\n".join(out) + "\n"


def _markdown(data: dict[str, Any]) -> str:
    t = data["totals"]
    out = [
        f"### Replay under `{data['spec']}`",
        "",
        f"**{t['decisions']}** recorded decisions: **{t['flipped']}** would flip "
        f"(**{t['widened']}** widened), {t['unchanged']} unchanged, {t['rule_changed']} with "
        f"another rule, {t['not_replayed']} not replayed.",
    ]
    if data["flips"]:
        out += [
            "",
            "| tool | change | old rule | new rule | decisions | first |",
            "|---|---|---|---|---:|---|",
        ]
        for g in data["flips"]:
            kind = f"**{g['kind']}** (widened)" if g["widened"] else g["kind"]
            first = ", ".join(f"`{d['decision_id']}`" for d in g["decisions"][:3])
            out.append(
                f"| `{g['tool_id']}` | {kind} | `{_rule(g['old']['rule'])}` | "
                f"`{_rule(g['new']['rule'])}`{_at(g)} | {g['count']} | {first} |"
            )
    if data["not_replayed"]:
        out += ["", "| not replayed | detail | decisions |", "|---|---|---:|"]
        for g in data["not_replayed"]:
            out.append(f"| {g['reason']} | {g['detail']} | {g['count']} |")
    if data["incomplete"]:
        out += ["", f"> **Incomplete:** {data['incomplete']}"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Divergences recorded by shadow mode


def divergences_main(args: argparse.Namespace) -> int:
    from harnessc.runtime.log.cut import archived_note
    from harnessc.runtime.session.shadow import divergences

    store = open_log(args.log, getattr(args, "key_file", None))
    if store is None:
        return EXIT_USAGE
    note = archived_note(store)
    if note is not None:  # the divergences of archived sessions are not listed: say so
        sys.stderr.write(f"harnessc: note: {note}\n")
    from harnessc.runtime.log.chain import StoreError

    try:
        report = divergences(store, first=args.first)
    except StoreError as error:  # a row it cannot read: which one
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    except Exception as error:  # an unreadable log: say so, never a traceback
        sys.stderr.write(f"harnessc: the log cannot be read: {error}\n")
        return EXIT_USAGE
    finally:
        store.close()
    write_divergences(report, args.format, sys.stdout)
    return EXIT_OK


def write_divergences(report: DivergenceReport, fmt: str, out: TextIO) -> None:
    data = report.to_dict()
    if fmt == "json":
        out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    total = data["total"]
    if not total:
        out.write("no divergences recorded\n")
        return
    out.write(f"{total} divergence{'s' if total != 1 else ''} recorded by shadow mode\n")
    for g in data["groups"]:
        cand = g["candidate"]
        out.write(
            f"  {g['tool_id']}: {g['kind']}  {_rule(g['active']['rule'])} → "
            f"{_rule(cand['rule'])} (candidate {str(cand['policy_version'])[:12]})  "
            f"×{g['count']}\n"
        )
        out.write(f"    {_ids(g)}\n")
