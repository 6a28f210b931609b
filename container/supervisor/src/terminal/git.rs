//! `git-clone`: validated in the supervisor (https only, no userinfo, the
//! host must pass the same allowlist decision the guard makes, branch and
//! depth rules), then run as the terminal user through the guard via the
//! proxy environment. No shell: every value is its own argv element, after
//! `--` where git would otherwise read an option.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use hermes_egress::{decide, parse_connect, Allowlist, Decision};
use hermes_protocol::limits::{GIT_CLONE_TIMEOUT_MS, GIT_DEPTH_DEFAULT, GIT_DEPTH_MAX};
use hermes_protocol::terminal::{GitCloneRequest, GitCloneResult};

use super::ops::{run_command, workspace_path};
use super::ready;
use crate::app::App;
use crate::error::SupervisorError;

fn bad(msg: impl Into<String>) -> SupervisorError {
    SupervisorError::BadRequest(msg.into())
}

/// SPEC §8: `^[\w.\-/]{1,255}$` (ASCII word characters) and not `-…`.
pub fn valid_branch(branch: &str) -> bool {
    (1..=255).contains(&branch.len())
        && !branch.starts_with('-')
        && branch
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'/'))
}

/// The checked URL and its host, or why it is refused (400).
pub fn parse_repo_url(raw: &str) -> Result<(url::Url, String), SupervisorError> {
    let url = url::Url::parse(raw.trim()).map_err(|_| bad("repoUrl is not a valid URL"))?;
    if url.scheme() != "https" {
        return Err(bad("repoUrl must use https"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("repoUrl must not contain userinfo"));
    }
    if url.port().is_some_and(|p| p != 443) {
        return Err(bad("repoUrl must use port 443"));
    }
    let host = url
        .host_str()
        .ok_or_else(|| bad("repoUrl has no host"))?
        .to_owned();
    Ok((url, host))
}

/// The allowlist decision for `host:443` (IP literals in any form deny).
pub fn egress_decision(allowlist: &Allowlist, host: &str) -> Decision {
    match parse_connect(&format!("{host}:443")) {
        Ok(target) => decide(allowlist, &target),
        Err(rejected) => Decision::Deny {
            reason: rejected.why.reason(),
        },
    }
}

/// Directory name for a clone of `url` when no target is given.
pub fn default_dir_name(url: &url::Url) -> String {
    let last = url
        .path_segments()
        .and_then(|mut s| s.rfind(|p| !p.is_empty()))
        .unwrap_or("repo");
    let name = last.strip_suffix(".git").unwrap_or(last);
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        name.to_owned()
    } else {
        "repo".to_owned()
    }
}

/// `git` from the command PATH (resolved here, so a missing git is a 502,
/// not a confusing spawn error).
fn git_binary() -> Result<&'static Path, SupervisorError> {
    ["/usr/local/bin/git", "/usr/bin/git", "/bin/git"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .ok_or_else(|| SupervisorError::Terminal("git is not installed".into()))
}

/// A proxy refusal as git reports it.
fn egress_denied_in(stderr: &str) -> bool {
    stderr.contains("CONNECT tunnel failed, response 403")
        || stderr.contains("Received HTTP code 403 from proxy")
}

pub async fn clone(app: &App, req: &GitCloneRequest) -> Result<GitCloneResult, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    let (url, host) = parse_repo_url(&req.repo_url)?;
    if let Some(branch) = &req.branch {
        if !valid_branch(branch) {
            return Err(bad(
                "branch must match ^[\\w.\\-/]{1,255}$ and not start with '-'",
            ));
        }
    }
    let depth = req.depth.unwrap_or(GIT_DEPTH_DEFAULT);
    if !(1..=GIT_DEPTH_MAX).contains(&depth) {
        return Err(bad(format!("depth must be 1..{GIT_DEPTH_MAX}")));
    }
    let target = match &req.target_dir {
        Some(raw) => workspace_path(ready, raw)?,
        None => ready.workspace.join(default_dir_name(&url)),
    };
    if target == ready.workspace {
        return Err(bad("targetDir must not be the workspace itself"));
    }
    let target_text = target.display().to_string();
    let (allowlist, _) = Allowlist::from_env_value(app.settings.egress_allowlist.as_deref());
    if let Decision::Deny { reason } = egress_decision(&allowlist, &host) {
        return Ok(GitCloneResult {
            ok: true,
            cloned: false,
            target_dir: target_text,
            exit_code: 128,
            stdout: String::new(),
            stderr: format!("Egress denied: {reason}"),
            truncated: false,
            timed_out: false,
            egress_denied: true,
            duration_ms: 0,
        });
    }
    let depth_arg = format!("--depth={depth}");
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("clone"),
        OsStr::new("--single-branch"),
        OsStr::new(&depth_arg),
    ];
    if let Some(branch) = &req.branch {
        args.push(OsStr::new("--branch"));
        args.push(OsStr::new(branch));
    }
    args.push(OsStr::new("--"));
    args.push(OsStr::new(url.as_str()));
    args.push(target.as_os_str());
    let out = run_command(
        app,
        ready,
        git_binary()?,
        &args,
        &ready.workspace,
        Duration::from_millis(GIT_CLONE_TIMEOUT_MS),
        &[("GIT_TERMINAL_PROMPT", "0")],
    )
    .await?;
    let stderr = String::from_utf8_lossy(&out.stderr.bytes).into_owned();
    Ok(GitCloneResult {
        ok: true,
        cloned: out.exit_code == 0 && !out.timed_out,
        target_dir: target_text,
        exit_code: out.exit_code,
        stdout: String::from_utf8_lossy(&out.stdout.bytes).into_owned(),
        egress_denied: egress_denied_in(&stderr),
        stderr,
        truncated: out.stdout.truncated || out.stderr.truncated,
        timed_out: out.timed_out,
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches() {
        for (b, ok) in [
            ("main", true),
            ("release/1.2", true),
            ("feat_x-y.z", true),
            ("", false),
            ("-x", false),
            ("--upload-pack=evil", false),
            ("a b", false),
            ("a;b", false),
            ("ä", false),
            (&"a".repeat(255), true),
            (&"a".repeat(256), false),
        ] {
            assert_eq!(valid_branch(b), ok, "{b}");
        }
    }

    #[test]
    fn urls() {
        assert!(parse_repo_url("https://github.com/a/b.git").is_ok());
        for bad in [
            "http://github.com/a/b",
            "ssh://github.com/a/b",
            "git@github.com:a/b",
            "https://user@github.com/a/b",
            "https://u:p@github.com/a/b",
            "https://github.com:22/a/b",
            "file:///etc",
            "",
        ] {
            assert!(parse_repo_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allowlist_decision_on_host() {
        let (list, _) = Allowlist::from_env_value(Some("github.com"));
        assert!(egress_decision(&list, "github.com").is_allow());
        assert!(egress_decision(&list, "api.github.com").is_allow());
        for host in [
            "evilgithub.com",
            "github.com.evil.test",
            "2130706433",
            "0x7f.1",
            "127.0.0.1",
        ] {
            assert!(!egress_decision(&list, host).is_allow(), "{host}");
        }
    }

    #[test]
    fn default_names() {
        let u = |s: &str| url::Url::parse(s).unwrap();
        assert_eq!(default_dir_name(&u("https://github.com/a/b.git")), "b");
        assert_eq!(default_dir_name(&u("https://github.com/a/b/")), "b");
        assert_eq!(default_dir_name(&u("https://github.com/")), "repo");
        assert_eq!(default_dir_name(&u("https://github.com/a/%2e%2e")), "repo");
    }
}
