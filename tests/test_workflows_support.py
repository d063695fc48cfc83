"""Shared setup of the workflow tests: a small spec, a worker process and its helpers (no
tests here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harnessc.compiler.pipeline import check
from harnessc.runtime import Harness, MemoryStore
from harnessc.runtime.model import Spec

SPEC = """\
harness ops {
  version "1.0.0"
  summary "Durable workflow fixtures."
}

tool job.run {
  summary "Run one numbered job and return its number."
  use_when "A workflow step runs a job."
  effects write reversible
  risk low
  input { n: int }
  output { n: int }
}
tool job.undo {
  summary "Undo one numbered job."
  use_when "A failed job is compensated."
  effects write
  risk low
  input { n: int }
  output { n: int }
}
connection ledger "The ledger the archive job writes to"

tool job.archive {
  summary "Archive one numbered job in the ledger."
  use_when "A finished job is archived."
  effects write reversible
  risk low
  input { n: int }
  output { n: int }
  requires connected(ledger)
}

tool job.ship {
  summary "Ship the result of the jobs to production."
  use_when "The jobs are done and a release manager agreed."
  effects external
  risk high
  input { n: int }
  output { n: int }
}

tool job.login {
  summary "Log a job in to the vault with a token."
  use_when "A workflow step needs the vault."
  effects write
  risk low
  input { n: int, token: string secret }
  output { n: int, note: string }
}

surface ops_tools {
  expose job.*
}

policy ops {
  default deny
  allow job.run, job.undo, job.archive
  ask job.login {
    approver role "release-manager"
    grant once ttl 15m
    reason "The vault needs a release manager."
  }
  ask job.ship {
    approver role "release-manager"
    grant once ttl 15m
    reason "Shipping needs a release manager."
  }
}

agent runner {
  surface ops_tools
  policy ops
}

workflow vaulted {
  agent runner
  input { base: int, token: string }
  step login = call job.login(n: input.base, token: input.token)
}

workflow four {
  agent runner
  input { base: int }
  step a = call job.run(n: input.base)
  step b = call job.run(n: 2) after a
  step c = call job.run(n: 3) after b
  step d = call job.run(n: 4) after c
}

workflow review {
  agent runner
  input { base: int }
  step first = call job.run(n: input.base)
  step approve = decide "Go on?" after first {
    options go, stop
    by role "security"
    timeout 300ms default stop
  }
  step last = call job.run(n: 9) when approve == go
}

workflow hold {
  agent runner
  input { base: int }
  step first = call job.run(n: input.base)
  step approve = decide "Go on?" after first {
    options go, stop
    by role "security"
    timeout 1h default stop
  }
  step last = call job.run(n: 99) when approve == go
}

workflow twice {
  agent runner
  input { base: int }
  step one = decide "First?" {
    options go, stop
    by role "security"
    timeout 1h default stop
  }
  step two = decide "Second?" after one {
    options go, stop
    by role "security"
    timeout 1h default stop
  }
  step last = call job.run(n: 77) when one == go and two == go
}

workflow ship {
  agent runner
  input { base: int }
  step build = call job.run(n: input.base)
  step release = call job.ship(n: input.base) after build
}

workflow fan {
  agent runner
  input { base: int }
  step left = call job.run(n: 31)
  step right = call job.run(n: 32)
  step join = call job.run(n: 33) after left, right
}

workflow fan_ask {
  agent runner
  input { base: int }
  step left = call job.run(n: 41)
  step right = call job.ship(n: 42)
  step join = call job.run(n: 43) after left, right
}

workflow by_policy {
  policy ops
  input { base: int }
  step first = call job.run(n: input.base)
  step second = call job.ship(n: first.n) after first
}

workflow verified {
  agent runner
  input { base: int }
  step commit = call job.run(n: input.base) {
    on_failure retry 1 then compensate undo_commit
  }
  step undo_commit = call job.undo(n: input.base) compensation
}

workflow windowed {
  agent runner
  input { base: int }
  step first = call job.run(n: input.base)
  step window = gate env.open after first { timeout 1h }
  step archive = call job.archive(n: input.base) after window
}

workflow flaky {
  agent runner
  input { base: int }
  step prepare = call job.run(n: input.base)
  step risky = call job.run(n: 13) after prepare {
    on_failure retry 2 backoff 10ms then compensate undo then escalate role "sre"
  }
  step undo = call job.undo(n: input.base) compensation
}
"""

ENGINEER = {"user": "u-1", "role": "engineer"}
SECURITY = {"user": "u-7", "role": "security"}
RELEASE_MANAGER = {"user": "u-9", "role": "release-manager"}

WORKER = """\
import json, os, sys, time
from harnessc.runtime import Harness, SQLiteStore
from harnessc.runtime.model import Spec

spec_path, url, log, executor, hold, options = sys.argv[1:7]
options = json.loads(options)
if url.startswith("sqlite:///"):
    store = SQLiteStore(url[len("sqlite:///"):])
else:
    from harnessc.runtime.log.postgres import PostgresStore
    store = PostgresStore(url)
h = Harness(Spec.from_json(open(spec_path, "rb").read()), store=store)
if options.get("block_log"):
    # the log never takes the events of this stream: its append blocks (after DBOS has
    # checkpointed the step) until the test kills this process
    append = store._append

    def blocked(events, expected):
        if any(e.stream == options["block_log"] for e in events):
            open(log + ".blocked", "w").close()
            while True:
                time.sleep(1)
        return append(events, expected)

    store._append = blocked
if options.get("old_shape"):
    # as versions before `workflow.delta` did: every step records the run's whole state
    from harnessc.runtime.workflows import interpreter

    publication = interpreter._Run.publication

    def whole(self, state):
        if self.branch is None:
            return "workflow.state", {"state": state}
        return publication(self, state)

    interpreter._Run.publication = whole


@h.implement("job.run")
def run(args, ctx):
    n = args["n"]
    if str(n) in hold.split(","):
        while True:  # held here until the test kills this process
            time.sleep(1)
    time.sleep(options.get("job_s", 0))
    with open(log, "a") as f:
        f.write(f"{n} {executor} {os.getpid()} {ctx.task_id}\\n")
    return {"n": n}


h.workflows.configure(url, executor_id=executor, **options.get("configure", {}))
for line in sys.stdin:
    if not line.strip():
        continue
    op = json.loads(line)
    if op["op"] == "create":
        h.workflows.create(op["name"], op["input"], id=op["id"], actor=op["actor"], start=True)
    print("ok", flush=True)
while True:
    time.sleep(1)
"""


def compiled() -> Spec:
    result = check([_spec_file()])
    assert result.ok, [d.message for d in result.diagnostics]
    assert result.model is not None
    return result.model


def _spec_file() -> Path:
    folder = Path(os.environ.get("HARNESSC_TEST_TMP", "/tmp")) / f"harnessc-ops-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ops.harness"
    path.write_text(SPEC, encoding="utf-8")
    return path


class Worker:
    """A worker process: launches the engine as `executor`, creates the runs it is told to,
    and runs workflows until it is killed. `hold` names job numbers it blocks on forever."""

    def __init__(
        self,
        tmp: Path,
        url: str,
        executor: str = "w1",
        hold: tuple[int, ...] = (),
        **options: Any,
    ) -> None:
        self.tmp = tmp
        self.log = tmp / "ran.log"
        spec_path = tmp / "spec.json"
        if not spec_path.exists():
            spec_path.write_text(compiled().to_json(), encoding="utf-8")
        script = tmp / "worker.py"
        script.write_text(WORKER, encoding="utf-8")
        self.err = open(tmp / f"{executor}.err", "a")  # noqa: SIM115 - closed by kill()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(spec_path),
                url,
                str(self.log),
                executor,
                ",".join(str(n) for n in hold),
                json.dumps({"configure": {"poll_s": 0.05}} | options),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            cwd=tmp,
        )

    def create(self, name: str, input: dict[str, Any], id: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        op = {"op": "create", "name": name, "input": input, "id": id, "actor": ENGINEER}
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", self.stderr()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.err.close()

    def stderr(self) -> str:
        return "".join(p.read_text() for p in self.tmp.glob("*.err"))

    def ran(self) -> list[tuple[int, str, int]]:
        """(job number, executor, pid) of every job that ran, in order."""
        return [(n, executor, pid) for n, executor, pid, _ in self.jobs()]

    def jobs(self) -> list[tuple[int, str, int, str]]:
        """(job number, executor, pid, run id) of every job that ran, in order."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            n, executor, pid, run = line.split()
            out.append((int(n), executor, int(pid), run))
        return out


def observer(spec: Spec, url: str) -> Harness:
    """A harness that runs no workflow: it only reads and decides, like an operator's shell."""
    h = Harness(spec, store=MemoryStore())
    h.workflows.configure(url, run=False)
    return h


def until(predicate: Callable[[], Any], timeout_s: float = 60.0, what: str = "") -> Any:
    """Poll until `predicate()` is truthy (a deadline, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")
