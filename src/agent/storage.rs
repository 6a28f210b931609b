//! The object's SQLite state: schema migrations and typed accessors.
//!
//! Each pending migration runs inside `transactionSync`, together with the
//! `schema_version` row that records it, so a failing migration rolls back
//! whole and the object refuses to serve (loudly) instead of running on a
//! half-applied schema. Re-running is a no-op.

use serde::Deserialize;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use worker::{js_sys, Date, Result, SqlStorage, SqlStorageValue, Storage};

use crate::agent_id::AgentId;
use crate::errors::{ApiError, ErrorCode};
use crate::migrations::{self, Migration};

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

#[derive(Deserialize)]
struct VersionRow {
    version: Option<i64>,
}

fn current_version(sql: &SqlStorage) -> Result<u32> {
    let rows: Vec<VersionRow> = sql
        .exec("SELECT MAX(version) AS version FROM schema_version", None)?
        .to_array()?;
    let v = rows.first().and_then(|r| r.version).unwrap_or(0);
    u32::try_from(v).map_err(|_| worker::Error::RustError(format!("corrupt schema_version {v}")))
}

/// Bring the schema to the newest version this build knows.
pub fn migrate(storage: &Storage) -> Result<()> {
    let sql = storage.sql();
    sql.exec(migrations::SCHEMA_VERSION_DDL, None)?;
    let current = current_version(&sql)?;
    migrations::check_not_newer(current).map_err(worker::Error::RustError)?;
    for migration in migrations::pending(current) {
        apply_in_transaction(storage, migration).map_err(|e| {
            worker::Error::RustError(format!(
                "migration {} failed and was rolled back: {e}",
                migration.name
            ))
        })?;
    }
    Ok(())
}

/// Run one migration and its bookkeeping row atomically through the
/// runtime's `storage.transactionSync(fn)`: if the closure throws, SQLite
/// rolls everything in it back.
fn apply_in_transaction(storage: &Storage, migration: &'static Migration) -> Result<()> {
    let raw = storage.as_raw();
    let sql = storage.sql();
    let body = Closure::once(move || -> std::result::Result<JsValue, JsValue> {
        sql.exec(migration.sql, None)
            .map_err(|e| JsValue::from_str(&e.to_string()))?;
        sql.exec(
            "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
            vec![
                SqlStorageValue::from(i64::from(migration.version)),
                migration.name.into(),
                now_ms().into(),
            ],
        )
        .map_err(|e| JsValue::from_str(&e.to_string()))?;
        Ok(JsValue::UNDEFINED)
    });
    let transaction_sync: js_sys::Function =
        js_sys::Reflect::get(raw, &JsValue::from_str("transactionSync"))?
            .dyn_into()
            .map_err(|_| {
                worker::Error::RustError("storage.transactionSync is not available".into())
            })?;
    transaction_sync.call1(raw, body.as_ref().unchecked_ref())?;
    Ok(())
}

#[derive(Deserialize)]
struct AgentRow {
    agent_id: String,
}

/// Bind the object to its agent on first use; afterwards refuse any other
/// id. `idFromName` makes a collision impossible in practice, so a mismatch
/// means a bug or tampering: fail closed.
pub fn claim_agent(sql: &SqlStorage, agent: &AgentId) -> std::result::Result<(), ApiError> {
    let internal = |e: worker::Error| ApiError::internal(format!("agent record: {e}"));
    let rows: Vec<AgentRow> = sql
        .exec("SELECT agent_id FROM agent WHERE id = 1", None)
        .and_then(|c| c.to_array())
        .map_err(internal)?;
    match rows.first() {
        Some(row) if row.agent_id == agent.as_str() => Ok(()),
        Some(_) => Err(
            ApiError::new(ErrorCode::Internal, "object is bound to another agent")
                .for_agent(agent.as_str()),
        ),
        None => {
            sql.exec(
                "INSERT INTO agent (id, agent_id, created_at) VALUES (1, ?, ?)",
                vec![agent.as_str().into(), now_ms().into()],
            )
            .map_err(internal)?;
            Ok(())
        }
    }
}

/// A container boot as recorded in SQLite.
#[derive(Debug, Clone, Deserialize)]
pub struct BootRecord {
    pub boot_id: String,
    pub control_token: String,
    pub api_key: String,
    pub status: String,
    pub key_fingerprint: String,
    pub started_at: i64,
}

/// The boot whose container has not ended, if any.
pub fn current_boot(sql: &SqlStorage) -> Result<Option<BootRecord>> {
    let rows: Vec<BootRecord> = sql
        .exec(
            "SELECT boot_id, control_token, api_key, status, key_fingerprint, started_at FROM boots \
             WHERE ended_at IS NULL ORDER BY started_at DESC LIMIT 1",
            None,
        )?
        .to_array()?;
    Ok(rows.into_iter().next())
}

pub fn insert_boot(sql: &SqlStorage, boot: &BootRecord) -> Result<()> {
    sql.exec(
        "INSERT INTO boots (boot_id, control_token, api_key, status, phase, key_fingerprint, started_at) \
         VALUES (?, ?, ?, ?, 'container', ?, ?)",
        vec![
            boot.boot_id.as_str().into(),
            boot.control_token.as_str().into(),
            boot.api_key.as_str().into(),
            boot.status.as_str().into(),
            boot.key_fingerprint.as_str().into(),
            boot.started_at.into(),
        ],
    )?;
    Ok(())
}

/// Enter a boot phase; the event row timestamps it, so the phases of a
/// boot can be timed afterwards (scripts/bench-stack.sh does).
pub fn set_boot_phase(sql: &SqlStorage, boot_id: &str, phase: &str) -> Result<()> {
    sql.exec(
        "UPDATE boots SET phase = ? WHERE boot_id = ?",
        vec![phase.into(), boot_id.into()],
    )?;
    record_event(sql, &format!("phase-{phase}"), boot_id)
}

pub fn set_boot_status(
    sql: &SqlStorage,
    boot_id: &str,
    status: &str,
    fingerprint: Option<&str>,
) -> Result<()> {
    let ready_at = if status == "ready" {
        Some(now_ms())
    } else {
        None
    };
    sql.exec(
        "UPDATE boots SET status = ?, key_fingerprint = COALESCE(?, key_fingerprint), \
         ready_at = COALESCE(?, ready_at) WHERE boot_id = ?",
        vec![
            status.into(),
            fingerprint.map(str::to_owned).into(),
            ready_at.into(),
            boot_id.into(),
        ],
    )?;
    Ok(())
}

/// Mark the boot's container as gone (`failed`, `evicted`, `slept`).
pub fn end_boot(sql: &SqlStorage, boot_id: &str, status: &str, error: Option<&str>) -> Result<()> {
    sql.exec(
        "UPDATE boots SET status = ?, ended_at = ?, error = COALESCE(?, error) WHERE boot_id = ?",
        vec![
            status.into(),
            now_ms().into(),
            error.map(str::to_owned).into(),
            boot_id.into(),
        ],
    )?;
    Ok(())
}

/// Append to the audit trail.
pub fn record_event(sql: &SqlStorage, kind: &str, detail: &str) -> Result<()> {
    sql.exec(
        "INSERT INTO events (ts, kind, detail) VALUES (?, ?, ?)",
        vec![now_ms().into(), kind.into(), detail.into()],
    )?;
    Ok(())
}

#[derive(Deserialize)]
struct CountRow {
    n: i64,
}

/// Number of boots ever started by this object (tests count boots).
pub fn boot_count(sql: &SqlStorage) -> Result<i64> {
    let rows: Vec<CountRow> = sql
        .exec("SELECT COUNT(*) AS n FROM boots", None)?
        .to_array()?;
    Ok(rows.first().map_or(0, |r| r.n))
}

#[derive(Deserialize)]
struct ValueRow {
    value: String,
}

pub fn setting(sql: &SqlStorage, key: &str) -> Result<Option<String>> {
    let rows: Vec<ValueRow> = sql
        .exec("SELECT value FROM settings WHERE key = ?", vec![key.into()])?
        .to_array()?;
    Ok(rows.into_iter().next().map(|r| r.value))
}

pub fn set_setting(sql: &SqlStorage, key: &str, value: &str) -> Result<()> {
    sql.exec(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        vec![key.into(), value.into()],
    )?;
    Ok(())
}

/// The agent this object is bound to, if any.
pub fn bound_agent(sql: &SqlStorage) -> Result<Option<String>> {
    let rows: Vec<AgentRow> = sql
        .exec("SELECT agent_id FROM agent WHERE id = 1", None)?
        .to_array()?;
    Ok(rows.into_iter().next().map(|r| r.agent_id))
}
