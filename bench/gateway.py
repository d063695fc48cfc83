"""What `harnessc gateway` adds to each MCP call: the same calls, from the same Python SDK client,
straight to an upstream MCP server and through the gateway, side by side in one run.

    .venv/bin/python bench/gateway.py [--calls 200] [--rounds 5] [--log sqlite|memory]

The upstream server is the tracker of the gateway's tests (tests/mcp_servers/tracker.py, written
with the SDK), over stdio; the gateway is the real command (`harnessc gateway`, stdio) with the
tests' spec, in front of it and of the scanner. Cases, each `--calls` sequential calls per
round, the cases taking turns within each round so that the machine's load hits them alike:

- `direct`: `open_ticket` (low severity) on the tracker itself;
- `gateway allow`: the same call through the gateway: normalized, decided (ALLOW), recorded,
  forwarded, its result recorded;
- `gateway deny`: `create-issue` with a SECRET title: decided (DENY) and recorded, never
  forwarded: what judging and recording cost without the upstream hop.

Printed: the median time per call of each case over the rounds, and each as a multiple of
`direct`; then the load average, since every figure here is a ratio on a shared machine. With
`--log sqlite` (the default) the gateway writes a SQLite log, as a deployment would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.gateway_support import ISSUE, TICKET, TRACKER, write_spec  # noqa: E402

LOW = {"title": "typo in the docs", "severity": "low"}


async def per_call(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        result = await call()
        if result.is_error and result.structured_content is None:
            raise SystemExit(f"a call failed: {result.content}")
    return (time.perf_counter() - start) / calls


async def bench(calls: int, rounds: int, log: str) -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="harnessc-gateway-bench-"))
    spec = write_spec(folder)
    log_arg = str(folder / "gateway.db") if log == "sqlite" else "memory://"
    client = json.dumps({"user": "bench"})
    gateway = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "harnessc.compiler",
            "gateway",
            str(spec),
            "--log",
            log_arg,
            "--client",
            client,
        ],
        cwd=str(ROOT),
    )
    upstream = StdioServerParameters(command=sys.executable, args=[str(TRACKER)])
    found: dict[str, list[float]] = {"direct": [], "gateway allow": [], "gateway deny": []}
    async with Client(stdio_client(upstream)) as direct, Client(stdio_client(gateway)) as via:
        cases: dict[str, Callable[[], Awaitable[Any]]] = {
            "direct": lambda: direct.call_tool("open_ticket", LOW),
            "gateway allow": lambda: via.call_tool(TICKET, LOW),
            "gateway deny": lambda: via.call_tool(ISSUE, {"title": "SECRET key"}),
        }
        for call in cases.values():  # warm up: connections, first decisions, caches
            for _ in range(5):
                await call()
        for _ in range(rounds):
            for name, call in cases.items():
                found[name].append(await per_call(call, calls))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--log", choices=("sqlite", "memory"), default="sqlite")
    args = parser.parse_args()
    found = asyncio.run(bench(args.calls, args.rounds, args.log))
    base = statistics.median(found["direct"])
    print(f"{args.calls} calls x {args.rounds} rounds, gateway log: {args.log}")
    print(f"{'case':<16}{'median ms/call':>16}{'x direct':>10}")
    for name, times in found.items():
        median = statistics.median(times)
        print(f"{name:<16}{median * 1000:>16.2f}{median / base:>10.2f}")
    added = statistics.median(found["gateway allow"]) - base
    print(f"added by the gateway per allowed call: {added * 1000:.2f} ms")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
