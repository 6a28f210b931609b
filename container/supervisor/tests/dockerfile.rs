//! Invariants of `container/Dockerfile`, which cannot be built on developer
//! machines: pinned bases, the three users, the supervisor as entrypoint,
//! and Hermes installed hash-checked from the same requirements file that
//! `scripts/setup-hermes.sh` uses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Instructions with line continuations joined and comments dropped.
fn instructions() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("container/Dockerfile")).unwrap();
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(stripped) = trimmed.strip_suffix('\\') {
            current.push_str(stripped);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        let joined = std::mem::take(&mut current);
        let (keyword, rest) = joined
            .split_once(char::is_whitespace)
            .unwrap_or((&joined, ""));
        out.push((keyword.to_ascii_uppercase(), rest.trim().to_owned()));
    }
    out
}

fn all(keyword: &str) -> Vec<String> {
    instructions()
        .into_iter()
        .filter(|(k, _)| k == keyword)
        .map(|(_, v)| v)
        .collect()
}

/// `image:tag` is pinned when it has a digest or an exact `X.Y.Z` version.
fn is_pinned(image: &str) -> bool {
    if let Some((_, digest)) = image.split_once("@sha256:") {
        return digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit());
    }
    let Some((_, tag)) = image.rsplit_once(':') else {
        return false;
    };
    let version = tag.split('-').next().unwrap_or("");
    let parts: Vec<&str> = version.split('.').collect();
    tag != "latest"
        && parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

#[test]
fn pin_check_table() {
    let rows = [
        ("rust:1.95.0-slim-bookworm", true),
        ("python:3.11.11-slim-bookworm", true),
        (
            "python@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            true,
        ),
        ("python:latest", false),
        ("python", false),
        ("python:3.11-slim-bookworm", false),
        ("python:3-slim", false),
        ("rust:1-slim", false),
        ("rust:slim", false),
        ("python@sha256:abc", false),
    ];
    for (image, pinned) in rows {
        assert_eq!(is_pinned(image), pinned, "{image}");
    }
}

#[test]
fn every_base_image_is_pinned() {
    let froms = all("FROM");
    assert!(froms.len() >= 2, "multi-stage build expected: {froms:?}");
    let stages: Vec<String> = froms
        .iter()
        .filter_map(|f| {
            f.split_whitespace()
                .collect::<Vec<_>>()
                .windows(2)
                .find(|w| w[0].eq_ignore_ascii_case("AS"))
                .map(|w| w[1].to_owned())
        })
        .collect();
    for from in &froms {
        let image = from
            .split_whitespace()
            .find(|w| !w.starts_with("--"))
            .unwrap();
        if stages.iter().any(|s| s == image) {
            continue;
        }
        assert!(is_pinned(image), "unpinned base image {image}");
    }
    assert!(
        froms[0].starts_with("rust:"),
        "builder stage builds the supervisor: {froms:?}"
    );
    assert!(
        froms.last().unwrap().starts_with("python:3.11."),
        "runtime is pinned CPython 3.11: {froms:?}"
    );
}

#[test]
fn users_have_the_fixed_uids() {
    let runs = all("RUN").join(" ");
    for (name, uid) in [
        ("hermes", 10001),
        ("hermes-term", 10002),
        ("hermes-egress", 10003),
    ] {
        let needle = format!("useradd --uid {uid} --gid {uid} ");
        let at = runs
            .find(&needle)
            .unwrap_or_else(|| panic!("no useradd for {name} with uid {uid}"));
        let rest = &runs[at + needle.len()..];
        let command_end = rest.find("&&").unwrap_or(rest.len());
        let last_word = rest[..command_end].split_whitespace().last().unwrap();
        assert_eq!(last_word, name, "uid {uid} belongs to {name}");
        assert!(
            runs.contains(&format!("groupadd --gid {uid} {name}")),
            "group of {name}"
        );
    }
}

#[test]
fn entrypoint_is_the_supervisor_built_in_this_file() {
    let entry = all("ENTRYPOINT");
    assert_eq!(
        entry,
        vec![r#"["/usr/local/bin/hermes-supervisor"]"#.to_owned()]
    );
    let copies = all("COPY");
    assert!(
        copies.iter().any(|c| c.starts_with("--from=builder ")
            && c.ends_with(" /usr/local/bin/hermes-supervisor")),
        "{copies:?}"
    );
    assert!(all("RUN")
        .iter()
        .any(|r| r.contains("cargo build --profile supervisor --locked -p hermes-supervisor")));
    assert!(
        all("CMD").is_empty(),
        "no CMD: arguments to the supervisor are not a thing"
    );
}

#[test]
fn hermes_comes_from_the_shared_requirements_with_hashes() {
    let copies = all("COPY");
    assert!(
        copies
            .iter()
            .any(|c| c == "container/requirements.txt /opt/hermes/requirements.txt"),
        "the image must copy the file setup-hermes.sh uses: {copies:?}"
    );
    let pip: Vec<String> = all("RUN")
        .into_iter()
        .filter(|r| r.contains("pip install"))
        .collect();
    assert_eq!(pip.len(), 1, "exactly one pip install: {pip:?}");
    for flag in [
        "--require-hashes",
        "--no-deps",
        "-r /opt/hermes/requirements.txt",
    ] {
        assert!(
            pip[0].contains(flag),
            "pip install lacks {flag}: {}",
            pip[0]
        );
    }
    let setup = std::fs::read_to_string(repo_root().join("scripts/setup-hermes.sh")).unwrap();
    assert!(setup.contains("container/requirements.txt") && setup.contains("--require-hashes"));
    let env = all("ENV").join(" ");
    assert!(
        env.contains("HERMES_REQUIREMENTS=/opt/hermes/requirements.txt"),
        "image marker hashes this file"
    );
}

#[test]
fn no_unpinned_downloads() {
    let text = std::fs::read_to_string(repo_root().join("container/Dockerfile")).unwrap();
    for forbidden in [
        "curl",
        "wget",
        "| sh",
        "|sh",
        "ADD http",
        "rustup ",
        "pip install -U",
        "--upgrade",
    ] {
        let hit = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .any(|l| l.contains(forbidden));
        assert!(!hit, "Dockerfile contains {forbidden:?}");
    }
}

#[test]
fn requirements_pin_hermes_and_hash_everything() {
    let text = std::fs::read_to_string(repo_root().join("container/requirements.txt")).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("hermes-agent==0.19.0 ")),
        "hermes-agent pinned"
    );
    assert!(
        text.lines().any(|l| l.starts_with("aiohttp==")),
        "aiohttp pinned (the API server needs it)"
    );
    assert!(
        text.lines().any(|l| l.starts_with("mcp==")),
        "the [mcp] extra is resolved"
    );
    let mut requirements = 0;
    for block in text
        .split("\n")
        .filter(|l| !l.starts_with(' ') && !l.starts_with('#') && !l.is_empty())
    {
        requirements += 1;
        assert!(
            block.contains("==") && block.ends_with('\\'),
            "not an exact, hashed pin: {block}"
        );
    }
    let hashes = text.matches("--hash=sha256:").count();
    assert!(
        requirements > 20 && hashes >= requirements,
        "{requirements} pins, {hashes} hashes"
    );
    assert!(
        !text.contains("--find-links") && !text.contains("--index-url"),
        "no machine-local sources"
    );
}

/// The Google Workspace CLI is pinned exactly in both places it comes from
/// (npm metadata with integrity hash, the crates.io binary, --locked), its
/// install script never runs, and it lands where the supervisor runs it.
#[test]
fn workspace_cli_is_pinned_exactly() {
    use hermes_protocol::workspace::{GWS_BIN_DEFAULT, GWS_VERSION};
    let runs = all("RUN").join("\n");
    assert!(
        runs.contains(&format!(
            "cargo install --locked --root /gws google-workspace-cli@{GWS_VERSION}"
        )),
        "binary from crates.io, exact version, --locked"
    );
    assert!(runs.contains(&format!("grep -qx 'gws {GWS_VERSION}'")));
    assert!(
        runs.contains("npm ci --ignore-scripts"),
        "npm from the lockfile, no postinstall download"
    );
    assert!(
        !runs.contains("npm install") && !runs.contains("npx "),
        "no unlocked npm resolution"
    );
    let copies = all("COPY");
    assert!(copies
        .iter()
        .any(|c| c == "container/gws/package.json container/gws/package-lock.json ./"));
    assert!(
        copies
            .iter()
            .any(|c| c.starts_with("--from=gws-builder /gws/bin/gws ")),
        "{copies:?}"
    );
    let env = all("ENV").join(" ");
    assert!(env.contains(&format!("HERMES_GWS_BIN={GWS_BIN_DEFAULT}")));
    assert!(
        runs.contains(&format!(" {GWS_BIN_DEFAULT}")),
        "symlink at the default path"
    );

    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("container/gws/package.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["dependencies"]["@googleworkspace/cli"], GWS_VERSION,
        "exact version, no range"
    );
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("container/gws/package-lock.json")).unwrap(),
    )
    .unwrap();
    let pkg = &lock["packages"]["node_modules/@googleworkspace/cli"];
    assert_eq!(pkg["version"], GWS_VERSION);
    assert!(pkg["integrity"].as_str().unwrap().starts_with("sha512-"));
    assert_eq!(pkg["bin"]["gws"], "run.js");
}
