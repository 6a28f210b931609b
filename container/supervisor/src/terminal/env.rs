//! The environment layer: terminal processes start from an empty
//! environment plus exactly SPEC §8's list — nothing of the supervisor's
//! (no control token, no provider key, no Hermes path) can leak through.
//! `HOME` is the workspace (SPEC: `/workspace`, which is the workspace).

use hermes_protocol::ports::EGRESS_GUARD_PORT;

/// The complete environment of a terminal command. `home` is the
/// workspace (`/workspace` in the image; the override in tests).
pub fn command_env(home: &std::path::Path) -> Vec<(&'static str, String)> {
    let proxy = format!("http://127.0.0.1:{EGRESS_GUARD_PORT}");
    vec![
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
        ),
        ("HOME", home.display().to_string()),
        ("LANG", "C.UTF-8".to_owned()),
        ("LC_ALL", "C.UTF-8".to_owned()),
        ("TERM", "dumb".to_owned()),
        ("HTTP_PROXY", proxy.clone()),
        ("HTTPS_PROXY", proxy.clone()),
        ("http_proxy", proxy.clone()),
        ("https_proxy", proxy),
        ("NO_PROXY", "127.0.0.1,localhost".to_owned()),
        ("no_proxy", "127.0.0.1,localhost".to_owned()),
        ("DO_NOT_TRACK", "1".to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_the_spec_list() {
        let names: Vec<&str> = command_env(std::path::Path::new("/workspace"))
            .iter()
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(
            names,
            [
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TERM",
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "NO_PROXY",
                "no_proxy",
                "DO_NOT_TRACK"
            ]
        );
        assert!(command_env(std::path::Path::new("/workspace"))
            .iter()
            .all(|(_, v)| !v.contains("TOKEN") && !v.contains("KEY")));
    }
}
