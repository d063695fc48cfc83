"""Durable workflows of a harness on DBOS Transact (language.md §11; the `workflows` extra).

- manage: create, start, decide, status and cancel a harness's workflow runs
- plan: a workflow as data (its hash, step order and conditions), with no engine
- steps: a step's governed call and delegation, outside DBOS
- interpreter: the one DBOS workflow that walks a run's IR
- durable (manage loads it on first use): a process's engine and the client every operator
  action uses
- appender: a worker's appender of step events to the harness's log
"""

from typing import TYPE_CHECKING

if not TYPE_CHECKING:  # the names of runtime/workflows.py, which this package replaced (0.1.0)
    from .._moved import moved_names

    __getattr__ = moved_names(__name__, "manage")
