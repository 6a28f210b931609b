//! Invariants of wrangler.toml: every environment that can be deployed has
//! the Durable Object binding, the container entry and the SQLite
//! migration, because wrangler does not inherit them into environments.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

fn config() -> toml::Table {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("wrangler.toml");
    let text = std::fs::read_to_string(path).unwrap();
    text.parse::<toml::Table>().unwrap()
}

fn array<'a>(t: &'a toml::Table, path: &[&str]) -> Vec<&'a toml::Table> {
    let mut cur = t;
    for key in &path[..path.len() - 1] {
        cur = match cur.get(*key).and_then(|v| v.as_table()) {
            Some(next) => next,
            None => return vec![],
        };
    }
    cur.get(path[path.len() - 1])
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_table()).collect())
        .unwrap_or_default()
}

fn check_env(scope: &toml::Table, name: &str) {
    let bindings = array(scope, &["durable_objects", "bindings"]);
    assert!(
        bindings.iter().any(
            |b| b.get("name").and_then(|v| v.as_str()) == Some("HERMES_AGENT")
                && b.get("class_name").and_then(|v| v.as_str()) == Some("HermesAgent")
        ),
        "{name}: missing HERMES_AGENT → HermesAgent binding"
    );
    let migrations = array(scope, &["migrations"]);
    assert!(
        migrations.iter().any(|m| m
            .get("new_sqlite_classes")
            .and_then(|v| v.as_array())
            .is_some_and(|a| a.iter().any(|c| c.as_str() == Some("HermesAgent")))),
        "{name}: missing new_sqlite_classes migration for HermesAgent"
    );
    let containers = array(scope, &["containers"]);
    let c = containers
        .iter()
        .find(|c| c.get("class_name").and_then(|v| v.as_str()) == Some("HermesAgent"))
        .unwrap_or_else(|| panic!("{name}: missing [[containers]] for HermesAgent"));
    assert_eq!(
        c.get("image").and_then(|v| v.as_str()),
        Some("./container/Dockerfile"),
        "{name}: image"
    );
    assert!(
        c.get("max_instances")
            .and_then(|v| v.as_integer())
            .is_some_and(|n| n >= 1),
        "{name}: max_instances"
    );
    let vars = scope.get("vars").and_then(|v| v.as_table());
    assert!(
        vars.is_some_and(|v| v.contains_key("HERMES_SLEEP_AFTER")),
        "{name}: vars.HERMES_SLEEP_AFTER"
    );
    // Secrets are never committed as vars.
    for secret in [
        "SERVICE_AUTH_SECRET",
        "SERVICE_AUTH_SECRET_NEXT",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ] {
        assert!(
            !vars.is_some_and(|v| v.contains_key(secret)),
            "{name}: {secret} must be a secret, not a var"
        );
    }
}

#[test]
fn top_level_and_every_environment_have_all_bindings() {
    let cfg = config();
    assert_eq!(
        cfg.get("main").and_then(|v| v.as_str()),
        Some("build/worker/shim.mjs")
    );
    check_env(&cfg, "top level");
    let envs = cfg
        .get("env")
        .and_then(|v| v.as_table())
        .expect("[env.*] sections");
    for required in ["staging", "production"] {
        assert!(envs.contains_key(required), "missing [env.{required}]");
    }
    for (name, scope) in envs {
        let scope = scope.as_table().unwrap();
        assert!(scope
            .get("name")
            .and_then(|v| v.as_str())
            .is_some_and(|n| n.ends_with(name.as_str())));
        check_env(scope, name);
    }
}

#[test]
fn the_checker_catches_a_missing_binding() {
    // The checker itself must be able to fail.
    let mut cfg = config();
    let envs = cfg.get_mut("env").unwrap().as_table_mut().unwrap();
    let staging = envs.get_mut("staging").unwrap().as_table_mut().unwrap();
    staging.remove("containers");
    let staging = staging.clone();
    let result = std::panic::catch_unwind(|| check_env(&staging, "staging"));
    assert!(
        result.is_err(),
        "removing the container entry must fail the check"
    );
}
