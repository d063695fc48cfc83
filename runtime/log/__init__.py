"""The event log, the runtime's source of truth: events, their chain, and where they are kept.

- events: the shape of an event, its hash chain, the vocabulary and secrets' redaction
- chain: the errors a store raises and the walk that verifies a log
- integrity: checkpoints of the log's head and the optional log key
- store: the EventStore interface, the embedded SQLite store and the in-memory one
- postgres: the same interface on PostgreSQL (psycopg)
- open: opening a store by URL
- _group_commit, _announce (the store's own): batching a process's appends; events written
  with the next write
- projections: current views folded from the log
"""
