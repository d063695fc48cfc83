"""Opening an event store by where it is: a SQLite path or URL, a PostgreSQL URL, or memory.

A module of its own, so that `store` never imports `pgstore` (which builds on it).
"""

from __future__ import annotations

from .integrity import LogKey
from .store import EventStore, MemoryStore, SQLiteStore, StoreError

__all__ = ["open_store"]


def open_store(
    target: str | EventStore, *, key: LogKey | None = None, readonly: bool = False
) -> EventStore:
    """The event store at `target`: `sqlite:///PATH`, a plain PATH, `postgresql://…`, or
    `memory://` (a fresh log in memory); an event store object is returned as it is (`key` and
    `readonly` as the stores take them).

    >>> type(open_store("memory://")).__name__
    'MemoryStore'
    """
    if not isinstance(target, str):
        return target
    if target == "memory://":
        return MemoryStore(key=key)
    if target.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(target, key=key, readonly=readonly)
    path = target.removeprefix("sqlite:///")
    if "://" in path:
        raise StoreError(
            f"no event store for `{target}`: use PATH, sqlite:///PATH, postgresql://… or memory://"
        )
    return SQLiteStore(path, key=key, readonly=readonly)
