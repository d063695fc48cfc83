"""A throwaway PostgreSQL database for a benchmark, shared by the scripts that measure stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """The URL of a new, empty database on the PostgreSQL server of `server` (a URL naming any
    database there), dropped when the block ends, whoever still holds a connection to it."""
    import psycopg

    name = "harnessc_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
