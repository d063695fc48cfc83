"""Normalize + decide over HTTP on loopback (`harnessc serve`) beside the same call in process.

    .venv/bin/python bench/serve.py [--seconds 5] [--rates 250,500,1000,2000] [--connections 8]

The spec is tests/test_serve.py's payments spec; every call is `payments.send` with a new
`tool_call_id` and an amount that makes the rule over the arguments (`big`: DENY over 10,000)
decide half of them, the ASK the other half. In process: `Session.normalize` + `decide`, timed
one call at a time. Over HTTP: `harnessc serve SPEC --port 0` in its own process (in-memory log,
no tokens), driven by an open-loop load of `--rates` requests a second on `--connections`
keep-alive connections: each request is sent at its scheduled time, and its latency is counted
from that time, so a server that falls behind is charged for the wait (no coordinated
omission). A rate is held when the answers kept up with it (at least 95 % of the rate) and p99 is
at most 5 ms (the target at 1,000 a second).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.test_serve import PAY  # noqa: E402  (the spec the tests serve)

TARGET_P99_MS = 5.0


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def in_process(spec_path: Path, n: int) -> list[float]:
    result = check([spec_path])
    assert result.model is not None
    h = Harness(result.model)
    s = h.session("clerk", actor={"user": "u-1", "role": "clerk"})
    times = []
    for i in range(n):
        args = {"iban": "DE1", "amount": 20_000 if i % 2 else 50}
        t0 = time.perf_counter()
        call = s.normalize("payments.send", f"c-{i}", args)
        s.decide(call)  # type: ignore[arg-type]
        times.append((time.perf_counter() - t0) * 1000)
    return times


class Connection:
    """One keep-alive HTTP/1.1 connection, as lean as a load generator needs (httpx's pool
    costs more per request than the server does, and would be measured instead)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split()[1])
        length = next(
            int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length")
        )
        return status, await self.reader.readexactly(length)


async def over_http(
    port: int, rate: int, seconds: float, connections: int
) -> tuple[list[float], float]:
    conns = [
        Connection(*await asyncio.open_connection("127.0.0.1", port)) for _ in range(connections)
    ]
    actor = {"user": "u-1", "role": "clerk"}
    _, raw = await conns[0].post("/v1/sessions", {"agent": "clerk", "actor": actor})
    path = f"/v1/sessions/{json.loads(raw)['session_id']}/calls"
    for i in range(50):  # warm the decider
        body = {
            "tool": "payments.send",
            "tool_call_id": f"w{rate}-{i}",
            "args": {"iban": "x", "amount": 5},
        }
        await conns[i % connections].post(path, body)
    n = int(rate * seconds)
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05

    async def worker(k: int) -> None:
        # connection k sends requests k, k + C, k + 2C, … each at its scheduled time, or at
        # once when it is late (its latency then counts the wait)
        for i in range(k, n, connections):
            due = start + i / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            amount = 20_000 if i % 2 else 50
            body = {
                "tool": "payments.send",
                "tool_call_id": f"r{rate}-{i}",
                "args": {"iban": "x", "amount": amount},
            }
            status, raw = await conns[k].post(path, body)
            assert status == 200 and json.loads(raw)["outcome"] in ("deny", "ask"), raw
            latencies.append((loop.time() - due) * 1000)

    await asyncio.gather(*(worker(k) for k in range(connections)))
    elapsed = loop.time() - start
    for c in conns:
        c.writer.close()
    return latencies, n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rates", default="250,500,1000,2000")
    ap.add_argument("--connections", type=int, default=8)
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "pay.harness"
        spec_path.write_text(PAY, encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "harnessc.compiler", "serve", str(spec_path), "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            assert found, line
            url = f"http://127.0.0.1:{found.group(1)}"
            while True:
                try:
                    httpx.get(url + "/v1/health")
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            local = in_process(spec_path, 5000)
            rows = []
            for rate in rates:
                lat, achieved = asyncio.run(
                    over_http(int(found.group(1)), rate, args.seconds, args.connections)
                )
                held = achieved >= 0.95 * rate and pct(lat, 99) <= TARGET_P99_MS
                rows.append((rate, achieved, pct(lat, 50), pct(lat, 99), held))
        finally:
            proc.terminate()
            proc.wait(30)
            if proc.stderr is not None:
                proc.stderr.close()
    load = os.getloadavg()
    print(
        f"normalize + decide, {args.seconds:g} s per rate, {args.connections} connections; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    p50, p99 = pct(local, 50), pct(local, 99)
    print()
    print("| where | offered /s | answered /s | p50 ms | p99 ms | p50, p99 / in process | held |")
    print("|---|---:|---:|---:|---:|---:|---|")
    mean_rate = 1000 / (sum(local) / len(local))
    print(f"| in process | one at a time | {mean_rate:,.0f} | {p50:.3f} | {p99:.3f} | 1, 1 | |")
    for rate, achieved, h50, h99, held in rows:
        ratios = f"{h50 / p50:.0f}, {h99 / p99:.1f}"
        cells = f"{rate:,} | {achieved:,.0f} | {h50:.3f} | {h99:.3f} | {ratios}"
        print(f"| HTTP loopback | {cells} | {'yes' if held else 'no'} |")
    best = max((r for r, *_, held in rows if held), default=None)
    print()
    print(f"highest rate held (p99 <= {TARGET_P99_MS:g} ms): {best if best else 'none'}")


if __name__ == "__main__":
    main()
