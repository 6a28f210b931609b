-- hermes-edge: HermesAgent schema, version 2: container boots and settings.

-- One row per container boot. The current boot is the newest row whose
-- container has not ended (ended_at IS NULL). Its secrets live here so an
-- object evicted from memory finds and reuses the running container.
CREATE TABLE boots (
  boot_id TEXT PRIMARY KEY,
  control_token TEXT NOT NULL,
  api_key TEXT NOT NULL,
  -- starting | ready | stopped | failed | evicted | slept
  status TEXT NOT NULL,
  phase TEXT NOT NULL DEFAULT '',
  key_fingerprint TEXT NOT NULL DEFAULT '',
  started_at INTEGER NOT NULL,
  ready_at INTEGER,
  ended_at INTEGER,
  error TEXT
);
CREATE INDEX boots_by_start ON boots (started_at);

-- Object-wide settings (the fingerprint key).
CREATE TABLE settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- The probe marker now lives in the container's own filesystem.
DROP TABLE probe_marker;
