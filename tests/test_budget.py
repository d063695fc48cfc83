"""The analysis's budgets (compiler/analysis/budget.py): a question's budget is counted in z3's
resource units, so the findings do not depend on the machine's load; the wall clock only aborts
a whole command, with its own exit status and a message, never as a finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harnessc.compiler.analysis.budget import (
    DEFAULT_RLIMIT,
    EXIT_TIMEOUT,
    RLIMIT_VARIABLE,
    TIMEOUT_VARIABLE,
    command_timeout_s,
    query_rlimit,
)

from .conftest import ROOT

SPEC = ROOT / "tests" / "fixtures" / "paths_under_load.harness"
BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def _lint(
    tmp_path: Path, name: str, extra: dict[str, str] | None = None, spec: Path = SPEC
) -> tuple[int, str, str]:
    env = {
        **os.environ,
        "HARNESSC_CACHE_DIR": str(tmp_path / name),  # an empty cache: every question is asked
        "HARNESSC_NO_CACHE": "1",
        # a time limit per question, as a shell may still set for older versions: not read
        "HARNESSC_QUERY_TIMEOUT_MS": "300",
        **(extra or {}),
    }
    done = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "lint", "--format", "json", str(spec)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    return done.returncode, done.stdout, done.stderr


def _findings(stdout: str) -> list[tuple[str, str]]:
    """Each diagnostic's code and everything else it says (position, labels, notes, help)."""
    return sorted((d["code"], json.dumps(d, sort_keys=True)) for d in json.loads(stdout))


def test_the_findings_are_the_same_beside_busy_processes(tmp_path: Path) -> None:
    code, out, err = _lint(tmp_path, "alone")
    assert code == 0, err
    alone = _findings(out)
    assert alone and not any(c == "L006" for c, *_ in alone)
    assert any(c == "L001" for c, *_ in alone)  # an answer only z3's questions give
    burners = []
    try:
        for _ in range(3):  # three processes burning CPU on a machine of two cores or so
            burners.append(
                subprocess.Popen([sys.executable, "-c", BURN.format(seconds=60)], cwd=tmp_path)
            )
        time.sleep(0.2)
        code, out, err = _lint(tmp_path, "busy")
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()
    assert code == 0, err
    assert _findings(out) == alone


def _large_spec(n: int) -> str:
    """N tools, each with an ALLOW over a path prefix and the actor's role: a lint of some
    seconds at 3,000 tools on any machine (parsing, resolving and analysing grow with N), so
    a limit of half a second always falls inside it, however fast the analysis becomes."""
    tools = [
        f'tool g{i // 10}.t{i} {{\n  summary "Tool {i}."\n  effects write\n  risk high\n'
        "  input {\n    path: path\n  }\n}\n"
        for i in range(n)
    ]
    rules = [
        f'  r{i}: allow g{i // 10}.t{i} when args.path startswith "/repo/{i}/" '
        'and actor.role == "dev"\n'
        for i in range(n)
    ]
    return "".join(tools) + "policy p {\n  default deny\n" + "".join(rules) + "}\n"


def test_the_wall_clock_aborts_the_command_with_its_own_status(tmp_path: Path) -> None:
    spec = tmp_path / "large.harness"
    spec.write_text(_large_spec(3000))
    start = time.monotonic()
    limits = {TIMEOUT_VARIABLE: "0.5", RLIMIT_VARIABLE: "0"}
    code, out, err = _lint(tmp_path, "abort", limits, spec=spec)
    assert code == EXIT_TIMEOUT == 124
    assert time.monotonic() - start < 60
    assert out == ""  # nothing it found: no finding, and no partial report
    assert err.startswith(
        "harnessc: aborted: the command did not finish within its wall-clock limit of 0.5 s "
        f"({TIMEOUT_VARIABLE}); nothing it found is reported."
    )
    assert f"{TIMEOUT_VARIABLE}=SECONDS" in err and "Traceback" not in err


def test_the_budgets_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(RLIMIT_VARIABLE, raising=False)
    assert query_rlimit() == DEFAULT_RLIMIT
    monkeypatch.setenv(RLIMIT_VARIABLE, "0")
    assert query_rlimit() == 0
    monkeypatch.setenv(RLIMIT_VARIABLE, "junk")
    assert query_rlimit() == DEFAULT_RLIMIT
    for raw, seconds in (("30", 30.0), ("0", 0.0), ("1.5", 1.5), ("-1", 900.0), ("nan", 900.0)):
        monkeypatch.setenv(TIMEOUT_VARIABLE, raw)
        assert command_timeout_s() == seconds


def test_the_wall_clock_limit_is_not_part_of_a_stored_result_key(monkeypatch) -> None:
    from harnessc.compiler.result_cache import ResultCache

    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    plain = ResultCache("lint", ["spec.harness"]).path
    monkeypatch.setenv(TIMEOUT_VARIABLE, "30")
    assert ResultCache("lint", ["spec.harness"]).path == plain
    monkeypatch.setenv(RLIMIT_VARIABLE, "5000")  # the budget decides answers: another entry
    assert ResultCache("lint", ["spec.harness"]).path != plain


def test_the_explanation_of_l006_gives_the_budget_in_force() -> None:
    # dsl/codes.py holds every code's text and imports nothing of the compiler: the figure it
    # writes must follow the budget the analysis applies
    from harnessc.dsl.codes import CODES

    text = CODES["L006"].explanation
    assert f"{DEFAULT_RLIMIT:,}" in text and RLIMIT_VARIABLE in text
