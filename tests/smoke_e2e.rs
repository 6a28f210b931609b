//! The smoke scripts of SPEC §11 (scripts/isolation-smoke.sh,
//! scripts/functional-smoke.sh) run unchanged against the whole local
//! stack: `wrangler dev` + hermes-devhost + supervisor + real Hermes + the
//! mock model. The secret reaches them through the environment, never argv.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};

use common::{repo_root, Stack};

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_smoke(script: &str, base: &str, secret: &str) -> Outcome {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts").join(script))
        .current_dir(repo_root())
        .env("BASE_URL", base)
        .env("SERVICE_AUTH_SECRET", secret)
        .env_remove("SERVICE_AUTH_SECRET_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn last_line(s: &str) -> &str {
    s.lines().last().unwrap_or("")
}

#[test]
fn smoke_scripts_pass_against_the_local_stack() {
    let stack = require_or_skip!(Stack::start(""));

    let iso = run_smoke("isolation-smoke.sh", &stack.dev.base, &stack.secret);
    assert_eq!(
        (iso.code, last_line(&iso.stdout)),
        (0, "9 passed, 0 failed"),
        "isolation smoke:\n{}\n{}\n{}",
        iso.stdout,
        iso.stderr,
        stack.dev.log_tail()
    );

    let func = run_smoke("functional-smoke.sh", &stack.dev.base, &stack.secret);
    assert_eq!(
        (func.code, last_line(&func.stdout)),
        (0, "6 passed, 0 failed"),
        "functional smoke:\n{}\n{}\n{}",
        func.stdout,
        func.stderr,
        stack.dev.log_tail()
    );
    for out in [&iso, &func] {
        assert!(!out.stdout.contains(&stack.secret) && !out.stderr.contains(&stack.secret));
    }

    // The scripts can fail: with the wrong secret every authenticated
    // check is refused (only the wrong-bearer check still passes).
    let wrong = run_smoke(
        "isolation-smoke.sh",
        &stack.dev.base,
        "not-the-secret-0123456789",
    );
    assert_ne!(wrong.code, 0, "{}", wrong.stdout);
    assert_eq!(
        last_line(&wrong.stdout),
        "1 passed, 8 failed",
        "{}",
        wrong.stdout
    );
}
