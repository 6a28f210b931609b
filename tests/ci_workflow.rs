//! Invariants of .github/workflows/ci.yml: runs on every push and pull
//! request (no branch filter), least permissions, every action pinned by a
//! full commit SHA, and the jobs the project depends on. Checked on the text
//! (no YAML parser in the dependency tree); the checker is tested on
//! mutated copies so it can fail.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

fn workflow() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".github/workflows/ci.yml");
    std::fs::read_to_string(path).unwrap()
}

/// Lines without comments, trailing blanks removed.
fn code_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| match l.find(" #") {
            Some(i) if !l.trim_start().starts_with('#') => l[..i].trim_end().to_owned(),
            _ if l.trim_start().starts_with('#') => String::new(),
            _ => l.trim_end().to_owned(),
        })
        .filter(|l| !l.is_empty())
        .collect()
}

fn is_sha_pinned(uses: &str) -> bool {
    let Some((action, rev)) = uses.split_once('@') else {
        return false;
    };
    !action.is_empty()
        && rev.len() == 40
        && rev
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn check(text: &str) -> Result<(), String> {
    let lines = code_lines(text);
    let top = |key: &str| lines.iter().position(|l| l == key);
    // Triggers: push and pull_request, no branch or path filters.
    let on = top("on:").ok_or("no top-level on:")?;
    let on_block: Vec<&String> = lines[on + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .collect();
    for trigger in ["push:", "pull_request:"] {
        if !on_block.iter().any(|l| l.trim() == trigger) {
            return Err(format!("missing trigger {trigger}"));
        }
    }
    if on_block
        .iter()
        .any(|l| ["branches", "paths", "tags"].iter().any(|f| l.contains(f)))
    {
        return Err("triggers must not filter branches, tags or paths".into());
    }
    // Least privilege at the top level, and no job widening it.
    let perms = top("permissions:").ok_or("no top-level permissions:")?;
    let perm_block: Vec<&str> = lines[perms + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .map(|l| l.trim())
        .collect();
    if perm_block != ["contents: read"] {
        return Err(format!(
            "permissions must be exactly contents: read, got {perm_block:?}"
        ));
    }
    if lines
        .iter()
        .any(|l| l.contains(": write") || l.contains("write-all"))
    {
        return Err("no write permissions".into());
    }
    // Every action pinned by commit.
    for l in &lines {
        if let Some(uses) = l.trim().trim_start_matches("- ").strip_prefix("uses: ") {
            if !is_sha_pinned(uses.trim()) {
                return Err(format!("action not pinned by a full commit SHA: {uses}"));
            }
        }
    }
    // The jobs.
    for needed in [
        "scripts/test.sh",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "cargo fmt --all --check",
        "cargo deny",
        "docker build -f container/Dockerfile",
        "hermes-supervisor",
        "/opt/hermes/venv/bin/hermes --version",
    ] {
        if !text.contains(needed) {
            return Err(format!("workflow does not run `{needed}`"));
        }
    }
    Ok(())
}

#[test]
fn ci_workflow_runs_everywhere_with_least_privilege_and_pinned_actions() {
    check(&workflow()).unwrap();
}

#[test]
fn the_checker_catches_each_violation() {
    let good = workflow();
    let pinned = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683";
    assert!(good.contains(pinned), "fixture assumption");
    let mutations = [
        good.replace(pinned, "actions/checkout@v4"),
        good.replace(
            pinned,
            "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af68",
        ),
        good.replace("contents: read", "contents: write"),
        good.replace("  push:\n", "  push:\n    branches: [main]\n"),
        good.replace("  pull_request:\n", ""),
        good.replace("cargo fmt --all --check", "cargo fmt --all"),
        good.replace("permissions:\n  contents: read\n", ""),
    ];
    for (i, bad) in mutations.iter().enumerate() {
        assert_ne!(bad, &good, "mutation {i} changed nothing");
        assert!(check(bad).is_err(), "mutation {i} was not caught");
    }
}
