"""Check + lint cost against spec size: 100, 1,000 and 5,000 tools with five rules per tool.

    .venv/bin/python bench/check.py [--sizes 100,1000,5000] [--repeat 1] [--profile STAGE]

Each size is a generated spec (`generate`): tools with distinct descriptions and typed inputs,
five rules per tool (ALLOW with conditions over typed arguments, ASK with approvers and grants,
DENY with reasons, one wildcard rule per group of ten tools), a ranked surface, an agent and a
few workflows. The stages are called directly, one after the other, as `pipeline.lint` runs
them (parse, resolve, lower, validate, graph, analyse, lint), with the cyclic collector paused
as the pipeline does; the table gives each stage's time (best of --repeat), the total, the
microseconds per tool (which should stay flat: growth is near-linear), the analysis's SMT
queries (its work, independent of the machine's load), the findings, and the peak traced
memory of one whole run, measured in a separate pass because tracemalloc slows everything it
traces. `--profile STAGE` prints a cProfile of that stage at the largest size.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessc.compiler import graph, lower, pipeline, resolve, testing, validate
from harnessc.compiler.analysis.cache import AnalysisCache
from harnessc.compiler.analysis.policy import analyse_policies
from harnessc.compiler.config import LintConfig
from harnessc.compiler.lints import filter_findings, run_lints
from harnessc.dsl.diagnostics import Severity

STAGES = ("parse", "resolve", "lower", "validate", "graph", "analyse", "lint")

# Four independent vocabularies with pairwise coprime sizes: tool i takes word i mod size from
# each, so no two of 5,000 tools share more than two of the four, and descriptions stay apart
# (L018 flags 80% shared words).
VERBS = (
    "Rotate",
    "Archive",
    "Restore",
    "Reconcile",
    "Export",
    "Import",
    "Validate",
    "Publish",
    "Suspend",
    "Resume",
    "Migrate",
    "Snapshot",
    "Refund",
    "Invoice",
    "Provision",
    "Retire",
    "Schedule",
    "Cancel",
    "Approve",
    "Escalate",
    "Tag",
    "Merge",
    "Audit",
)  # 23
OBJECTS = (
    "customer accounts",
    "billing cycles",
    "ledger entries",
    "shipping labels",
    "tax forms",
    "support tickets",
    "feature flags",
    "database replicas",
    "TLS certificates",
    "DNS records",
    "container images",
    "payroll runs",
    "purchase orders",
    "warehouse slots",
    "price lists",
    "loyalty points",
    "subscription plans",
    "fraud alerts",
    "consent records",
    "API keys",
    "webhook endpoints",
    "storage buckets",
    "search indexes",
    "email campaigns",
    "survey results",
    "contract drafts",
    "vendor profiles",
    "travel bookings",
    "lab samples",
)  # 29
DOMAINS = (
    "retail",
    "banking",
    "logistics",
    "healthcare",
    "insurance",
    "telecom",
    "energy",
    "media",
    "education",
    "travel",
    "gaming",
    "payments",
    "hosting",
    "manufacturing",
    "agriculture",
    "legal",
    "recruiting",
    "marketing",
    "analytics",
    "security",
    "research",
    "government",
    "charity",
    "automotive",
    "aviation",
    "shipping",
    "publishing",
    "fitness",
    "hospitality",
    "construction",
    "mining",
)  # 31
PURPOSES = (
    "a quarterly review is due",
    "an auditor requests evidence",
    "a customer reports an error",
    "the nightly batch failed",
    "a migration window opens",
    "compliance flags a gap",
    "finance closes the month",
    "an incident is declared",
    "a partner onboards",
    "traffic spikes unexpectedly",
    "a contract renews",
    "a regulator asks questions",
    "the on-call engineer escalates",
    "a product launches",
    "data retention expires",
    "a vendor changes terms",
    "costs exceed budget",
    "a region goes offline",
    "a security scan finds drift",
)  # 19
ROLES = ("engineer", "sre", "analyst", "operator", "support", "finance")
GROUP = 10  # tools per service group; one wildcard rule per group


def tool_id(i: int) -> str:
    return f"svc{i // GROUP}.{VERBS[i % 23].lower()}_{i}"


def generate(n_tools: int) -> str:
    """A spec with `n_tools` tools and `5 * n_tools` rules (see the module docstring)."""
    out = [
        'harness bench {\n  version "1.0.0"\n  summary "Generated check benchmark spec."\n}\n\n',
        "import std.risk\n\n",
        'connection platform "The operations platform"\n',
        "fact maintenance.window: bool\n\n",
    ]
    for i in range(n_tools):
        verb, obj = VERBS[i % 23], OBJECTS[i % 29]
        domain, purpose = DOMAINS[i % 31], PURPOSES[i % 19]
        risk = "high" if i % 7 == 0 else "medium"
        out.append(
            f"tool {tool_id(i)} {{\n"
            f"  version {1 + i % 3}\n"
            f'  summary "{verb} {obj} in the {domain} platform, batch {i}."\n'
            f'  use_when "When {purpose} and {obj} of {domain} need attention."\n'
            f"  effects write reversible\n"
            f"  risk {risk}\n"
            f"  timeout 30s\n"
            f"  packs {domain}\n"
            f"  input {{\n"
            f'    service: string pattern "^[a-z0-9-]+$"\n'
            f'    environment: enum("dev", "staging", "production")\n'
            f"    count: int min 1 max 100\n"
            f"    dry_run: bool default false\n"
            f"    ticket: string?\n"
            f"  }}\n"
            f"  output {{ job_id: string }}\n"
            f"  requires connected(platform)\n"
            f"}}\n\n"
        )
    out.append(
        "surface console {\n"
        "  expose pack:retail, pack:banking, pack:logistics, pack:healthcare, pack:insurance\n"
        "  limit 20\n"
        "  rank {\n    recall embedding top 60\n    rerank hybrid\n  }\n"
        "}\n\n"
    )
    out.append("policy operations {\n  default std.risk.defaults\n  include std.risk.guardrails\n")
    for i in range(n_tools):
        t = tool_id(i)
        roles = ", ".join(f'"{ROLES[(i + k) % len(ROLES)]}"' for k in range(2))
        limit = 5 + i % 40
        out.append(
            f"  r{i}_work: allow {t} when actor.role in [{roles}]"
            f" and args.environment != production and args.count <= {limit}\n"
            f"  r{i}_prod: ask {t} when args.environment == production {{\n"
            f'    approver role "release-manager"\n'
            f"    grant once ttl {5 + i % 25}m\n"
            f'    reason "Production changes to {OBJECTS[i % 29]} need a release manager."\n'
            f"  }}\n"
            f"  r{i}_bulk: deny {t} when args.count > {limit + 40} and args.dry_run == false {{\n"
            f'    reason "More than {limit + 40} {OBJECTS[i % 29]} at once only as a dry run."\n'
            f"  }}\n"
            f"  r{i}_ticket: ask {t} when args.environment == staging and not args has ticket {{\n"
            f'    approver role "{ROLES[i % len(ROLES)]}-lead"\n'
            f"    grant task ttl 1h\n"
            f'    reason "Staging changes without a ticket are approved by a lead."\n'
            f"  }}\n"
        )
        if i % GROUP == 0:
            out.append(
                f"  g{i // GROUP}_window: deny svc{i // GROUP}.*"
                f' when args.environment == production and args.service startswith "legacy-" {{\n'
                f'    reason "Legacy services of group {i // GROUP} are frozen in production."\n'
                f"  }}\n"
            )
        else:
            out.append(
                f'  r{i}_dev: allow {t} when args.environment == dev and args.service != ""\n'
            )
    out.append("}\n\n")
    out.append(
        "agent operator {\n"
        '  persona "Operates the platform\'s services."\n'
        "  surface console\n"
        "  policy operations\n"
        "}\n\n"
    )
    for w in range(max(1, n_tools // 100)):
        a, b, c = (tool_id((w * 100 + k) % n_tools) for k in (1, 2, 3))
        out.append(
            f"workflow change{w} {{\n"
            f"  agent operator\n"
            f"  input {{ service: string }}\n"
            f'  step first = call {a}(service: input.service, environment: "staging", count: 1)\n'
            f'  step review = decide "Go to production?" after first {{\n'
            f"    options approve, reject\n"
            f'    by role "sre"\n'
            f"    timeout 1d default reject\n"
            f"  }}\n"
            f"  step window = gate maintenance.window == true after review {{ timeout 1d }}\n"
            f'  step ship = call {b}(service: input.service, environment: "production",'
            f" count: 1, ticket: first.job_id) when review == approve {{\n"
            f"    on_failure retry 2 backoff 30s then compensate undo\n"
            f"  }}\n"
            f'  step undo = call {c}(service: input.service, environment: "production", count: 1)'
            f" compensation\n"
            f"}}\n\n"
        )
    return "".join(out)


@dataclass
class Run:
    times: dict[str, float] = field(default_factory=dict)
    findings: dict[str, int] = field(default_factory=dict)
    queries: int = 0  # SMT queries of the analysis: the load-independent measure of its work


def run_stages(
    path: Path, only: str | None = None, profiler: cProfile.Profile | None = None
) -> Run:
    """One lint run, stage by stage, as `pipeline.lint` does it; fails on any error."""
    run = Run()
    state: dict[str, Any] = {}

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        profiling = profiler is not None and name == only
        start = time.perf_counter()
        if profiling:
            profiler.enable()
        value = fn()
        if profiling:
            profiler.disable()
        run.times[name] = time.perf_counter() - start
        return value

    with pipeline.paused_gc():
        loaded = stage("parse", lambda: pipeline.load_file(path, path.name))
        resolution = stage("resolve", lambda: resolve.resolve_program([loaded], pipeline.load_file))
        lowered = stage("lower", lambda: lower.lower_program(resolution))
        spec = lowered.spec
        diagnostics = [*loaded.diagnostics, *resolution.diagnostics, *lowered.diagnostics]
        diagnostics += stage(
            "validate",
            lambda: (
                validate.validate_spec(spec, resolution) + testing.check_tests(spec, resolution)
            ),
        )
        diagnostics += stage("graph", lambda: graph.check_workflows(spec, resolution))
        errors = [d for d in diagnostics if d.severity is Severity.ERROR]
        if errors:
            raise SystemExit(f"the bench spec has errors: {[d.message for d in errors[:5]]}")
        # answers kept in memory only: every run solves (bench/check_scale.py times the cache)
        state["analysis"] = stage(
            "analyse", lambda: analyse_policies(spec, cache=AnalysisCache(on_disk=False))
        )
        config = LintConfig()
        found = stage(
            "lint",
            lambda: filter_findings(
                run_lints(spec, resolution, state["analysis"], config), resolution, config
            ),
        )
    run.queries = state["analysis"].queries
    for d in found:
        run.findings[d.code] = run.findings.get(d.code, 0) + 1
    return run


def peak_memory(path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        run_stages(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--profile", choices=STAGES, help="cProfile this stage at the last size")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]

    header = (
        f"{'tools':>6} {'rules':>6} {'lines':>7} "
        + " ".join(f"{s + ' s':>10}" for s in STAGES)
        + f" {'total s':>8} {'us/tool':>8} {'queries':>8} {'peak MiB':>9}  findings"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            text = generate(n)
            path = Path(tmp) / f"bench{n}.harness"
            path.write_text(text, encoding="utf-8")
            if n == sizes[0]:
                run_stages(path)  # warm up: parser tables, std.risk, z3
            best: dict[str, float] = {}
            run = Run()
            for _ in range(args.repeat):
                gc.collect()
                run = run_stages(path)
                for name, seconds in run.times.items():
                    best[name] = min(best.get(name, seconds), seconds)
            total = sum(best.values())
            peak = "" if args.no_memory else f"{peak_memory(path) / 2**20:.1f}"
            findings = ", ".join(f"{c}×{k}" for c, k in sorted(run.findings.items())) or "none"
            rules = 5 * n
            print(
                f"{n:>6} {rules:>6} {text.count(chr(10)):>7} "
                + " ".join(f"{best[s]:>10.3f}" for s in STAGES)
                + f" {total:>8.2f} {total / n * 1e6:>8.0f} {run.queries:>8} {peak:>9}  {findings}",
                flush=True,
            )
        if args.profile:
            profiler = cProfile.Profile()
            run_stages(path, args.profile, profiler)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
