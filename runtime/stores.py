"""Opening an event store by where it is: a SQLite path or URL, or a PostgreSQL URL.

A module of its own, so that `store` never imports `pgstore` (which builds on it).
"""

from __future__ import annotations

from .integrity import LogKey
from .store import EventStore, SQLiteStore, StoreError

__all__ = ["open_store"]


def open_store(target: str, *, key: LogKey | None = None, readonly: bool = False) -> EventStore:
    """The event store at `target`: `sqlite:///PATH`, a plain PATH, or `postgresql://…`
    (`key` and `readonly` as the stores take them)."""
    if target.startswith(("postgresql://", "postgres://")):
        from .pgstore import PostgresStore

        return PostgresStore(target, key=key, readonly=readonly)
    path = target.removeprefix("sqlite:///")
    if "://" in path:
        raise StoreError(
            f"no event store for `{target}`: use PATH, sqlite:///PATH or postgresql://…"
        )
    return SQLiteStore(path, key=key, readonly=readonly)
