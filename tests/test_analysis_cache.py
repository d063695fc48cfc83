"""The analysis cache (compiler/analysis/cache.py): a hit gives what a miss gives, a changed rule
re-solves only its partitions, and a damaged or unwritable cache never breaks a check."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from harnessc.compiler.analysis.budget import RLIMIT_VARIABLE
from harnessc.compiler.analysis.cache import AnalysisCache, installed_version
from harnessc.compiler.analysis.policy import PolicyAnalysis, analyse_policies
from harnessc.compiler.pipeline import check
from harnessc.dsl.builder import parser_cache_file
from harnessc.dsl.files import cache_folder
from harnessc.runtime import model as m

from .conftest import ROOT

TOOLS = "".join(
    f"""
tool ops.t{i} {{
  summary "Tool {i}."
  effects write
  risk medium
  input {{ env: enum("staging", "production"), n: int?, ref: string? }}
}}
"""
    for i in range(4)
)
POLICY = """
policy p {
  default deny
  ask_0: ask ops.t0 when args.env == "production" { approver role "owner" }
  allow_0: allow ops.t0 when args.env == "staging"
  ask_1: ask ops.t1 when args.env == "production" { approver role "owner" }
  allow_1: allow ops.t1 when args.env == "staging"
  big: deny ops.* when args.n > 100 { reason "too many" }
  late: allow ops.t2 when args.env == "production" and args.n > 100
  scratch: deny ops.t3 when args.ref matches "^tmp-" { reason "scratch refs" }
}
"""
"""Every partition but ops.t3's is answered without z3 (cells.py); a pattern needs z3."""


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.delenv("HARNESSC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def checked(tmp_path: Path, policy: str = POLICY) -> tuple[m.Spec, PolicyAnalysis]:
    """The spec's model and the analysis its check ran."""
    path = tmp_path / "spec.harness"
    path.write_text(TOOLS + textwrap.dedent(policy), encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None, [d.message for d in result.diagnostics]
    assert result.analysis is not None
    return result.model, result.analysis


def seen(analysis: PolicyAnalysis) -> str:
    """Everything a user or a generated test reads of an analysis."""
    findings = [
        (f.kind, f.policy, f.rule, f.other_rule, f.message, repr(f.example), f.exact)
        for f in analysis.findings
    ]
    return repr((findings, sorted((p, sorted(w.items())) for p, w in analysis.witnesses.items())))


def entries(home: Path) -> list[Path]:
    return sorted((home / "harnessc" / "analysis").glob("*/*.json"))


def test_a_hit_gives_the_findings_and_witnesses_of_a_miss(tmp_path: Path, cache_home: Path):
    spec, cold = checked(tmp_path)
    assert cold.queries > 0 and cold.decided > 0 and cold.cache_hits == 0
    assert len(entries(cache_home)) == cold.partitions
    warm = analyse_policies(spec)
    assert warm.queries == warm.decided == 0
    assert warm.cache_hits == warm.partitions == cold.partitions
    assert seen(warm) == seen(cold)
    assert any(f.kind == "never-wins" and f.rule == "p.late" for f in warm.findings)


def test_an_example_spec_reads_back_the_same(tmp_path: Path, cache_home: Path) -> None:
    result = check([ROOT / "examples" / "remediation" / "remediation.harness"])
    assert result.model is not None and result.analysis is not None
    assert result.analysis.cache_hits == 0
    again = analyse_policies(result.model)
    assert again.queries == 0 and again.cache_hits == again.partitions
    assert seen(again) == seen(result.analysis)


def test_a_changed_rule_solves_only_its_partitions_again(tmp_path: Path, cache_home: Path):
    _, before = checked(tmp_path)
    # ops.t0 and ops.t1 share a partition (the same rules but for their labels), t2 and t3 have
    # one each; t1's rules change, so it gets one of its own and the others are read back
    assert before.partitions == 3
    changed = POLICY.replace(
        'allow_1: allow ops.t1 when args.env == "staging"', "allow_1: allow ops.t1"
    )
    spec, after = checked(tmp_path, changed)
    assert after.partitions == 4
    assert after.cache_hits == 3 and after.decided > 0
    again = analyse_policies(spec)  # all hits now
    assert again.queries == again.decided == 0 and seen(again) == seen(after)


def test_a_damaged_entry_is_solved_again(tmp_path: Path, cache_home: Path) -> None:
    spec, cold = checked(tmp_path)
    damaged = entries(cache_home)
    for n, path in enumerate(damaged):
        path.write_bytes([b"", b"{not json", b'{"inexact": 3}', b"\xff\xfe"][n % 4])
    again = analyse_policies(spec)
    assert again.cache_hits == 0 and again.queries == cold.queries
    assert again.decided == cold.decided
    assert seen(again) == seen(cold)
    assert analyse_policies(spec).cache_hits == cold.partitions  # rewritten


def test_an_unusable_cache_folder_costs_only_the_solving(tmp_path: Path, monkeypatch):
    spec, analysis = checked(tmp_path)
    expected = seen(analysis)
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("", encoding="utf-8")
    monkeypatch.delenv("HARNESSC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    assert AnalysisCache().folder is None
    first, second = analyse_policies(spec), analyse_policies(spec)
    assert seen(first) == seen(second) == expected
    assert second.cache_hits == 0 and second.queries == first.queries > 0
    assert second.decided == first.decided > 0


def test_an_entry_that_cannot_be_written_is_not_kept(tmp_path: Path, cache_home: Path) -> None:
    spec, analysis = checked(tmp_path)
    expected = seen(analysis)
    folder = cache_home / "harnessc" / "analysis"
    # each entry's shard is a file now, not a folder (two entries may share a shard)
    for shard in sorted({path.parent for path in entries(cache_home)}):
        for inside in shard.iterdir():
            inside.unlink()
        shard.rmdir()
        shard.write_text("", encoding="utf-8")
    assert folder.is_dir()
    again = analyse_policies(spec)
    assert again.cache_hits == 0 and seen(again) == expected


def test_the_parser_and_the_analysis_share_one_cache_folder(cache_home: Path) -> None:
    parser = parser_cache_file()
    assert parser is not None
    assert Path(parser).parent == cache_home / "harnessc" == cache_folder()
    assert AnalysisCache().folder == cache_folder() / "analysis"


def test_a_question_given_up_on_within_its_budget_is_asked_once_and_kept_by_the_budget(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question z3 gives up on within its budget of resource units is an answer like any
    other, the same on every machine: the next run reads it (the same undecided finding, no
    question asked again); a run under another budget never reads it, and asks."""
    import z3

    asked: list[str] = []
    plain = z3.Solver.check

    def counted(self: z3.Solver, *assumptions: object) -> z3.CheckSatResult:
        result = plain(self, *assumptions)
        asked.append(str(result))
        return result

    monkeypatch.setattr(z3.Solver, "check", counted)
    source = ROOT / "tests" / "diagnostics" / "cases" / "L006-undecided.harness"
    monkeypatch.setenv(RLIMIT_VARIABLE, "5000")  # same on every machine, unlike 1 ms
    result = check([source])
    assert result.model is not None and result.analysis is not None
    first = [(f.kind, f.rule, f.message) for f in result.analysis.findings]
    assert [kind for kind, _, _ in first] == ["undecided"]
    assert "did not decide within its budget" in first[0][2] and "z3" not in first[0][2]
    assert asked and "unknown" in asked and len(entries(cache_home)) == 1
    for _ in range(2):  # and again, as a busy machine would run it: read, never asked
        asked.clear()
        again = analyse_policies(result.model)
        assert [(f.kind, f.rule, f.message) for f in again.findings] == first
        assert asked == [] and again.queries == 0 and again.cache_hits == 1
    monkeypatch.delenv(RLIMIT_VARIABLE)  # the default budget: another key, decided
    decided = analyse_policies(result.model)
    assert decided.cache_hits == 0 and asked
    assert not any(f.kind == "undecided" for f in decided.findings)


def test_a_question_given_up_on_is_not_asked_again_in_a_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same question asked twice of one solver after z3 gave up on it: answered at once,
    for the same reason, without asking z3."""
    from harnessc.compiler.analysis.solve import Bucket

    spec = check([ROOT / "tests" / "diagnostics" / "cases" / "L006-undecided.harness"]).model
    assert spec is not None
    policy = next(iter(spec.policies.values()))
    bucket = Bucket(spec, spec.tools["mail.send"], list(policy.rules), 5000)
    assert bucket.check(bucket.wins(0)) is False
    reason, queries = bucket.reason, bucket.queries
    assert reason == "beyond its budget of 5,000 resource units, HARNESSC_QUERY_RLIMIT"
    assert queries == 2  # with the encoder's preferences, then without
    bucket.reason = ""
    assert bucket.check(bucket.wins(0)) is False
    assert bucket.reason == reason and bucket.queries == queries


WARM_CHECK = """
import sys
from harnessc.compiler.pipeline import check
result = check([sys.argv[1]])
print(result.ok, result.analysis.cache_hits, result.analysis.partitions, "z3" in sys.modules)
"""


def test_a_second_check_of_an_unchanged_spec_does_not_load_z3(tmp_path: Path) -> None:
    path = tmp_path / "spec.harness"
    path.write_text(TOOLS + POLICY, encoding="utf-8")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-home")}
    env.pop("HARNESSC_CACHE_DIR", None)

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", WARM_CHECK, str(path)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.split()

    ok, hits, partitions, z3 = run()
    assert (ok, hits, z3) == ("True", "0", "True")
    assert run() == ["True", partitions, partitions, "False"]


@pytest.mark.parametrize("package", ["z3-solver", "networkx", "pydantic-core", "harnessc"])
def test_the_versions_in_cache_keys_are_the_installed_ones(package: str) -> None:
    """The analysis and workflow caches key entries by z3's and networkx's versions, read from
    the install's folder names: the same versions `importlib.metadata` gives."""
    assert installed_version(package) == metadata.version(package)
    assert installed_version("no-such-distribution") == "unknown"
