"""The PostgreSQL test server (`HARNESSC_TEST_POSTGRES_URL`, started by `.ci/run`): a database of
its own for each test that needs one, dropped afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

ADMIN_URL = os.environ.get("HARNESSC_TEST_POSTGRES_URL")
SKIP_REASON = "set HARNESSC_TEST_POSTGRES_URL to run the PostgreSQL tests"


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server; dropped on exit."""
    import psycopg  # only where the server is there: psycopg comes with the workflows extra

    assert ADMIN_URL is not None, SKIP_REASON
    name = "harnessc_test_" + uuid.uuid4().hex[:12]
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = ADMIN_URL.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
