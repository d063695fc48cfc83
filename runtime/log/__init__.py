"""The event log, the runtime's source of truth: events, their chain, and where they are kept.

- events: the shape of an event, its hash chain, the vocabulary and secrets' redaction
- chain: the errors a store raises and the walk that verifies a log
- integrity: checkpoints of the log's head and the optional log key
- store: the EventStore interface, which every store implements whole (and the stores' names)
- memory, sqlite, postgres: the stores, in memory, in one SQLite file, on PostgreSQL (psycopg)
- open: opening a store by URL
- the stores' own: _numbering (numbering a commit and the claims it takes once), _sql (what the
  SQLite and PostgreSQL stores share), _group_commit (batching a process's appends), _announce
  (events written with the next write)
- projections: current views folded from the log
"""
