//! The Durable Object's schema migrations, embedded at compile time.
//!
//! Files in `migrations/` are named `NNNN_name.sql` and applied in order;
//! the applied version is recorded in the `schema_version` table. Which
//! migrations are pending is decided here, purely; applying them (one
//! transaction per migration, so a failure leaves the previous version
//! intact) is `agent::storage`'s job.

/// One schema step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order. A test checks this list against the files in
/// `migrations/`, so a file cannot be added and forgotten here.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init",
        sql: include_str!("../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_boots",
        sql: include_str!("../migrations/0002_boots.sql"),
    },
];

/// The bookkeeping table, created before any migration runs.
pub const SCHEMA_VERSION_DDL: &str =
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)";

/// The newest version this build knows.
pub fn latest_version() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Migrations still to apply on a database at `current` version, in order.
pub fn pending(current: u32) -> impl Iterator<Item = &'static Migration> {
    MIGRATIONS.iter().filter(move |m| m.version > current)
}

/// Error when the stored schema is newer than this build (a rollback of the
/// Worker after a migration): refuse to touch it rather than guess.
pub fn check_not_newer(current: u32) -> Result<(), String> {
    if current > latest_version() {
        Err(format!(
            "stored schema version {current} is newer than this build's {}; refusing to run",
            latest_version()
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_matches_files_on_disk_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        let names: Vec<String> = MIGRATIONS
            .iter()
            .map(|m| format!("{}.sql", m.name))
            .collect();
        assert_eq!(files, names);
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1, "versions are contiguous from 1");
            assert!(m.name.starts_with(&format!("{:04}_", m.version)));
            let on_disk = std::fs::read_to_string(format!("{dir}/{}.sql", m.name)).unwrap();
            assert_eq!(on_disk, m.sql);
        }
    }

    #[test]
    fn pending_is_ordered_and_rerun_is_noop() {
        assert_eq!(
            pending(0).map(|m| m.version).collect::<Vec<_>>(),
            (1..=latest_version()).collect::<Vec<_>>()
        );
        assert_eq!(pending(latest_version()).count(), 0);
        assert!(check_not_newer(latest_version()).is_ok());
        assert!(check_not_newer(latest_version() + 1).is_err());
    }

    #[test]
    fn migrations_do_not_manage_transactions_themselves() {
        // Durable Object SQLite refuses BEGIN/COMMIT in exec(); the runner
        // wraps each migration in transactionSync instead.
        for m in MIGRATIONS {
            let upper = m.sql.to_ascii_uppercase();
            for word in ["BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT"] {
                assert!(!upper.contains(word), "{} contains {word}", m.name);
            }
        }
    }
}
