//! Google Workspace through the terminal (issue 7): one `gws` invocation
//! per request, as the terminal user under every containment layer, with
//! the caller's OAuth access token in that one process's environment.
//!
//! Decide purely, act thinly: [`split_args`] (the documented quoting rule),
//! [`validate_token`] (RFC 6750 token68) and [`widen_allowlist`] are pure
//! and table-tested; [`invoke`] runs the fixed binary through the same
//! machinery as `exec`, never through a shell, and never retries.
//!
//! Where the token goes: the `x-workspace-token` header → a
//! [`WorkspaceToken`] (zeroed on drop, `Debug` redacted) → the environment
//! of exactly one `gws` process under [`GWS_TOKEN_ENV`]. Not argv (other
//! uids can read `/proc/<pid>/cmdline`), not a file, not a log line. When
//! `gws` exits, its whole process group is killed, so no child it may have
//! started keeps the token in its environment; any occurrence of the token
//! in what `gws` printed is replaced by [`REDACTED`] before answering.

use std::ffi::OsStr;

use hermes_egress::allowlist::DEFAULT_HOSTS;
use hermes_protocol::limits::EXEC_OUTPUT_MAX_BYTES;
use hermes_protocol::terminal::ExecResult;
use hermes_protocol::workspace::{
    WorkspaceRequest, ARGS_MAX_CHARS, GOOGLE_API_HOSTS, GWS_TOKEN_ENV, TOKEN_MAX_BYTES,
};

use super::ops::{exec_timeout, workspace_path};
use super::run::{self, RunSpec};
use super::{env, ready};
use crate::app::App;
use crate::error::SupervisorError;

/// What replaces the token if `gws` ever prints it.
pub const REDACTED: &str = "[redacted]";

/// Characters refused anywhere in `args`, quoted or not: a second lock in
/// case the argument vector ever reached a shell (it does not).
pub const SHELL_METACHARACTERS: [char; 7] = [';', '|', '&', '$', '`', '<', '>'];

/// Why `args` was refused. Messages never echo the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("args must be 1..{ARGS_MAX_CHARS} characters")]
    Length,
    #[error("args contain a shell metacharacter ({0:?}); they are never run by a shell")]
    Metacharacter(char),
    #[error("args contain a control character (newline, tab, NUL, ...)")]
    Control,
    #[error("args have an unterminated {0} quote")]
    UnterminatedQuote(&'static str),
    #[error("args end with a lone backslash")]
    TrailingBackslash,
    #[error("args contain no argument")]
    Empty,
}

/// Split `args` into an argument vector, POSIX-like:
///
/// * ASCII spaces separate arguments (runs of spaces count once);
/// * `'…'` is literal (no escapes inside);
/// * `"…"` groups; inside it `\"` is `"` and `\\` is `\`, any other
///   backslash stays as written;
/// * outside quotes a backslash makes the next character literal;
/// * quotes glue to neighbouring text (`a"b c"d` is one argument `ab cd`);
///   `''` and `""` give an empty argument.
///
/// Refused before splitting: more than [`ARGS_MAX_CHARS`] characters, any
/// of [`SHELL_METACHARACTERS`], any control character (newlines and tabs
/// included); after: unterminated quotes, a trailing backslash, no
/// argument at all.
pub fn split_args(args: &str) -> Result<Vec<String>, ArgsError> {
    let n = args.chars().count();
    if n == 0 || n > ARGS_MAX_CHARS {
        return Err(ArgsError::Length);
    }
    if let Some(c) = args.chars().find(|c| SHELL_METACHARACTERS.contains(c)) {
        return Err(ArgsError::Metacharacter(c));
    }
    if args.chars().any(char::is_control) {
        return Err(ArgsError::Control);
    }
    let mut out = Vec::new();
    let mut current = String::new();
    // An argument is open once any character or quote pair was seen, so
    // `''` yields an empty argument while plain spaces yield none.
    let mut open = false;
    let mut chars = args.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if open {
                    out.push(std::mem::take(&mut current));
                    open = false;
                }
            }
            '\'' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => current.push(q),
                        None => return Err(ArgsError::UnterminatedQuote("single")),
                    }
                }
            }
            '"' => {
                open = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\')) => current.push(e),
                            Some(other) => {
                                current.push('\\');
                                current.push(other);
                            }
                            None => return Err(ArgsError::UnterminatedQuote("double")),
                        },
                        Some(q) => current.push(q),
                        None => return Err(ArgsError::UnterminatedQuote("double")),
                    }
                }
            }
            '\\' => {
                open = true;
                match chars.next() {
                    Some(e) => current.push(e),
                    None => return Err(ArgsError::TrailingBackslash),
                }
            }
            other => {
                open = true;
                current.push(other);
            }
        }
    }
    if open {
        out.push(current);
    }
    if out.is_empty() {
        return Err(ArgsError::Empty);
    }
    Ok(out)
}

/// The caller's OAuth access token. Zeroed when dropped; `Debug` never
/// shows it.
pub struct WorkspaceToken(Vec<u8>);

impl WorkspaceToken {
    /// The token as text (validated ASCII).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl Drop for WorkspaceToken {
    fn drop(&mut self) {
        self.0.fill(0);
    }
}

impl std::fmt::Debug for WorkspaceToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkspaceToken(<redacted>)")
    }
}

/// Why a token was refused. Messages never echo the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the x-workspace-token header is required")]
    Missing,
    #[error("the workspace token must be 1..{TOKEN_MAX_BYTES} bytes")]
    Length,
    #[error("the workspace token is not an RFC 6750 token68 ([A-Za-z0-9-._~+/]+=*)")]
    Alphabet,
}

fn token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
}

/// Validate the header value: present, 1..=[`TOKEN_MAX_BYTES`] bytes,
/// `[A-Za-z0-9\-._~+/]+=*` exactly (no spaces, no `Bearer ` prefix).
pub fn validate_token(raw: Option<&[u8]>) -> Result<WorkspaceToken, TokenError> {
    let raw = raw.ok_or(TokenError::Missing)?;
    if raw.is_empty() || raw.len() > TOKEN_MAX_BYTES {
        return Err(TokenError::Length);
    }
    let body_len = raw.len() - raw.iter().rev().take_while(|b| **b == b'=').count();
    let (body, _padding) = raw.split_at(body_len);
    if body.is_empty() || !body.iter().all(|b| token68_char(*b)) {
        return Err(TokenError::Alphabet);
    }
    Ok(WorkspaceToken(raw.to_vec()))
}

/// The guard's allowlist with the feature on: the configured value (unset
/// = the default list) plus [`GOOGLE_API_HOSTS`]. Set but empty (deny all)
/// becomes exactly the Google hosts: turning the feature on is the
/// operator's decision to open them. Container-wide: every terminal
/// command reaches these hosts, not only `gws`.
pub fn widen_allowlist(configured: Option<&str>) -> String {
    let base: Vec<String> = match configured {
        None => DEFAULT_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
        Some(v) => v
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect(),
    };
    let mut all = base;
    all.extend(GOOGLE_API_HOSTS.iter().map(|h| (*h).to_owned()));
    all.join(",")
}

/// Replace every occurrence of `token` in `text` by [`REDACTED`].
pub fn redact(text: String, token: &str) -> String {
    if token.is_empty() || !text.contains(token) {
        return text;
    }
    text.replace(token, REDACTED)
}

/// Run `gws <args>` once as the terminal user. The caller (the router)
/// has already answered 404 when the feature is off.
pub async fn invoke(
    app: &App,
    token: &WorkspaceToken,
    req: &WorkspaceRequest,
) -> Result<ExecResult, SupervisorError> {
    let boundary = super::boundary(app).await;
    let ready = ready(app, &boundary)?;
    let argv = split_args(&req.args).map_err(|e| SupervisorError::BadRequest(e.to_string()))?;
    let cwd = match &req.cwd {
        Some(raw) => workspace_path(ready, raw)?,
        None => ready.workspace.clone(),
    };
    // Checked here (as root, on a configured path) so that ENOENT from the
    // child below can only mean the working directory.
    if !app.settings.gws_bin.is_file() {
        return Err(SupervisorError::Terminal(format!(
            "gws is not installed at {}",
            app.settings.gws_bin.display()
        )));
    }
    let sandbox = ready.sandbox(&cwd).map_err(SupervisorError::BadRequest)?;
    let mut command_env: Vec<(String, String)> = env::command_env(&ready.workspace)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    command_env.push((GWS_TOKEN_ENV.to_owned(), token.as_str().to_owned()));
    let out = run::run(
        app,
        &sandbox,
        RunSpec {
            program: &app.settings.gws_bin,
            args: argv.iter().map(OsStr::new).collect(),
            env: command_env,
            stdin: None,
            timeout: exec_timeout(req.timeout_ms),
            output_cap: EXEC_OUTPUT_MAX_BYTES,
            kill_group_after_exit: true,
        },
    )
    .await
    .map_err(|e| match e.raw_os_error() {
        // The working directory (chdir is the last step in the child).
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::EACCES) => {
            SupervisorError::BadRequest(format!("cwd is not an accessible directory: {e}"))
        }
        _ => SupervisorError::Terminal(format!("could not start gws: {}", e.kind())),
    })?;
    let secret = token.as_str();
    Ok(ExecResult {
        ok: true,
        exit_code: out.exit_code,
        stdout: redact(
            String::from_utf8_lossy(&out.stdout.bytes).into_owned(),
            secret,
        ),
        stderr: redact(
            String::from_utf8_lossy(&out.stderr.bytes).into_owned(),
            secret,
        ),
        stdout_truncated: out.stdout.truncated,
        stderr_truncated: out.stderr.truncated,
        truncated: out.stdout.truncated || out.stderr.truncated,
        timed_out: out.timed_out,
        duration_ms: u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(input: &str) -> Vec<String> {
        split_args(input).unwrap_or_else(|e| panic!("{input:?}: {e}"))
    }

    #[test]
    fn splitting_table() {
        let rows: [(&str, &[&str]); 16] = [
            ("drive files list", &["drive", "files", "list"]),
            ("  drive   files  ", &["drive", "files"]),
            (
                r#"gmail users messages list --params '{"userId":"me"}'"#,
                &[
                    "gmail",
                    "users",
                    "messages",
                    "list",
                    "--params",
                    r#"{"userId":"me"}"#,
                ],
            ),
            (r#""a b" c"#, &["a b", "c"]),
            (r#"'a b' c"#, &["a b", "c"]),
            (r#"a"b c"d"#, &["ab cd"]),
            (r#""say \"hi\"""#, &[r#"say "hi""#]),
            (r#""back\\slash""#, &[r"back\slash"]),
            (r#""keep \n as is""#, &[r"keep \n as is"]),
            (r"'no \escapes'", &[r"no \escapes"]),
            (r"a\ b", &["a b"]),
            (r"\'", &["'"]),
            ("''", &[""]),
            (r#"x "" y"#, &["x", "", "y"]),
            ("--json '{\"a\": [1, 2]}'", &["--json", "{\"a\": [1, 2]}"]),
            ("é ünïcode", &["é", "ünïcode"]),
        ];
        for (input, want) in rows {
            assert_eq!(ok(input), want, "{input:?}");
        }
    }

    #[test]
    fn refusals_table() {
        let rows: [(&str, ArgsError); 16] = [
            ("", ArgsError::Length),
            ("   ", ArgsError::Empty),
            ("a; rm -rf /", ArgsError::Metacharacter(';')),
            ("'a;b'", ArgsError::Metacharacter(';')),
            ("a | b", ArgsError::Metacharacter('|')),
            ("a && b", ArgsError::Metacharacter('&')),
            ("$HOME", ArgsError::Metacharacter('$')),
            ("\"$(id)\"", ArgsError::Metacharacter('$')),
            ("`id`", ArgsError::Metacharacter('`')),
            ("a < b", ArgsError::Metacharacter('<')),
            ("a > b", ArgsError::Metacharacter('>')),
            ("a\nb", ArgsError::Control),
            ("a\tb", ArgsError::Control),
            ("a\0b", ArgsError::Control),
            ("'open", ArgsError::UnterminatedQuote("single")),
            ("\"open", ArgsError::UnterminatedQuote("double")),
        ];
        for (input, want) in rows {
            assert_eq!(split_args(input), Err(want), "{input:?}");
        }
        assert_eq!(split_args("a\\"), Err(ArgsError::TrailingBackslash));
        assert_eq!(
            split_args("\"a\\"),
            Err(ArgsError::UnterminatedQuote("double"))
        );
        assert_eq!(split_args("\u{7f}"), Err(ArgsError::Control));
        assert_eq!(split_args("\u{85}"), Err(ArgsError::Control));
        // Length bound on both sides, in characters.
        assert_eq!(ok(&"é".repeat(4_000)).len(), 1);
        assert_eq!(split_args(&"a".repeat(4_001)), Err(ArgsError::Length));
    }

    #[test]
    fn token_table() {
        let long_ok = "a".repeat(4_096);
        let long_bad = "a".repeat(4_097);
        let rows: [(Option<&str>, Result<(), TokenError>); 14] = [
            (None, Err(TokenError::Missing)),
            (Some(""), Err(TokenError::Length)),
            (Some("ya29.a0AfB_by-x~y+z/w"), Ok(())),
            (Some("abc=="), Ok(())),
            (Some("A"), Ok(())),
            (Some(&long_ok), Ok(())),
            (Some(&long_bad), Err(TokenError::Length)),
            (Some("=="), Err(TokenError::Alphabet)),
            (Some("ab=c"), Err(TokenError::Alphabet)),
            (Some("Bearer abc"), Err(TokenError::Alphabet)),
            (Some("abc\n"), Err(TokenError::Alphabet)),
            (Some("a$b"), Err(TokenError::Alphabet)),
            (Some("a;b"), Err(TokenError::Alphabet)),
            (Some("tökén"), Err(TokenError::Alphabet)),
        ];
        for (input, want) in rows {
            let got = validate_token(input.map(str::as_bytes)).map(|_| ());
            assert_eq!(got, want, "{input:?}");
        }
        let t = validate_token(Some(b"secret-token")).unwrap();
        assert_eq!(t.as_str(), "secret-token");
        assert!(!format!("{t:?}").contains("secret"));
        assert!(!TokenError::Alphabet.to_string().contains("secret"));
    }

    #[test]
    fn allowlist_widening() {
        assert_eq!(
            widen_allowlist(Some("github.com")),
            format!("github.com,{}", GOOGLE_API_HOSTS.join(","))
        );
        assert_eq!(widen_allowlist(Some("")), GOOGLE_API_HOSTS.join(","));
        assert_eq!(widen_allowlist(Some(" , ")), GOOGLE_API_HOSTS.join(","));
        let default = widen_allowlist(None);
        for h in DEFAULT_HOSTS.iter().chain(GOOGLE_API_HOSTS.iter()) {
            assert!(default.split(',').any(|e| e == *h), "{h} in {default}");
        }
        let (list, dropped) = hermes_egress::Allowlist::parse(&default);
        assert!(dropped.is_empty());
        assert!(list.find("gmail.googleapis.com").is_some());
        // Exact entries: no other googleapis.com host is opened.
        assert!(list.find("storage.googleapis.com").is_none());
        assert!(list.find("evil.gmail.googleapis.com").is_none());
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact("a TOK b TOK".into(), "TOK"),
            "a [redacted] b [redacted]"
        );
        assert_eq!(redact("nothing".into(), "TOK"), "nothing");
    }

    /// Quote `arg` so that [`split_args`] gives it back unchanged.
    fn quote(arg: &str) -> String {
        format!("'{arg}'")
    }

    proptest! {
        #[test]
        fn round_trip_of_quoted_arguments(
            args in proptest::collection::vec("[A-Za-z0-9 _.,:=@%+/{}\\[\\]\"\\\\-]{0,12}", 1..8)
        ) {
            let line = args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
            prop_assert_eq!(split_args(&line).unwrap(), args);
        }

        #[test]
        fn never_panics_and_never_passes_a_metacharacter(input in "\\PC{0,64}|[;|&$`<> a'\"\\\\]{0,16}") {
            if let Ok(argv) = split_args(&input) {
                prop_assert!(!argv.is_empty());
                for a in &argv {
                    prop_assert!(!a.chars().any(|c| SHELL_METACHARACTERS.contains(&c) || c.is_control()));
                }
            }
        }

        #[test]
        fn plain_words_split_on_spaces(words in proptest::collection::vec("[A-Za-z0-9._=-]{1,10}", 1..10)) {
            prop_assert_eq!(split_args(&words.join("  ")).unwrap(), words);
        }
    }
}
