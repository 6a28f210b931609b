-- hermes-edge: HermesAgent Durable Object schema, version 1.
-- Applied once, inside a transaction, by src/agent/storage.rs.

-- The agent this object serves. Exactly one row once the object has been
-- used; a request for another id is refused.
CREATE TABLE agent (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  agent_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

-- The isolation probe marker (SPEC §4 probe). Until the container owns the
-- marker, the object stores it here.
CREATE TABLE probe_marker (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  marker TEXT NOT NULL,
  written_at INTEGER NOT NULL
);

-- Append-only audit trail of lifecycle events (boot, stop, evict, sleep).
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  ts INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT ''
);
