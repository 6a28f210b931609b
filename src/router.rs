//! Which operation a request asks for, decided from method and path alone.
//!
//! The Worker gates every path under `/hosted` before routing (an
//! unauthenticated caller learns nothing about which routes exist); the
//! object routes again with the same table, so there is one list of routes.

/// An operation of the hosted agent API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    ProbeWrite,
    ProbeRead,
    BootCheck,
    Stop,
    Evict,
    /// `ALL /hosted/agent/proxy/*`: the raw sub-path is taken from the URL.
    Proxy,
    Chat,
    Terminal(TerminalOp),
    /// `ALL /hosted/agent/ports/<port>/*`: an exposed terminal port.
    Port,
}

/// Control path of the Workspace CLI operation.
pub const WORKSPACE_CONTROL_PATH: &str = "/_control/terminal/workspace";

/// Operations of the virtual terminal (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalOp {
    Exec,
    GitClone,
    FileRead,
    FileWrite,
    FileList,
    ExposePort,
    Status,
    /// Google Workspace CLI (`gws`) invocation with a per-call token.
    Workspace,
}

impl TerminalOp {
    /// The supervisor's control path for this operation.
    pub fn control_path(self) -> &'static str {
        use hermes_protocol::path;
        match self {
            Self::Exec => path::TERMINAL_EXEC,
            Self::GitClone => path::TERMINAL_GIT_CLONE,
            Self::FileRead => path::TERMINAL_FILE_READ,
            Self::FileWrite => path::TERMINAL_FILE_WRITE,
            Self::FileList => path::TERMINAL_FILE_LIST,
            Self::ExposePort => path::TERMINAL_EXPOSE_PORT,
            Self::Status => path::TERMINAL_STATUS,
            Self::Workspace => WORKSPACE_CONTROL_PATH,
        }
    }

    /// Only the status read is retried; every other operation has side
    /// effects (or runs user code) and gets exactly one attempt.
    pub fn retryable(self) -> bool {
        matches!(self, Self::Status)
    }
}

/// The result of routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteMatch {
    Found(Route),
    MethodNotAllowed(&'static [&'static str]),
    NotFound,
}

/// Prefix of every gated route.
pub const HOSTED_PREFIX: &str = "/hosted";

/// True for `/hosted` and everything below it: these paths pass the gate
/// before anything else happens.
pub fn is_hosted(path: &str) -> bool {
    path == HOSTED_PREFIX || path.starts_with("/hosted/")
}

fn only(method: &str, want: &'static [&'static str], route: Route) -> RouteMatch {
    if want.contains(&method) {
        RouteMatch::Found(route)
    } else {
        RouteMatch::MethodNotAllowed(want)
    }
}

pub fn route(method: &str, path: &str) -> RouteMatch {
    if crate::proxy_path::proxy_subpath(path).is_some() {
        return RouteMatch::Found(Route::Proxy);
    }
    if crate::proxy_path::port_route(path).is_some() {
        return RouteMatch::Found(Route::Port);
    }
    match path {
        "/hosted/agent/probe" => match method {
            "POST" => RouteMatch::Found(Route::ProbeWrite),
            "GET" => RouteMatch::Found(Route::ProbeRead),
            _ => RouteMatch::MethodNotAllowed(&["GET", "POST"]),
        },
        "/hosted/agent/boot-check" => only(method, &["GET"], Route::BootCheck),
        "/hosted/agent/stop" => only(method, &["POST"], Route::Stop),
        "/hosted/agent/evict" => only(method, &["POST"], Route::Evict),
        "/hosted/agent/v1/chat/completions" => only(method, &["POST"], Route::Chat),
        "/hosted/agent/terminal/exec" => only(method, &["POST"], Route::Terminal(TerminalOp::Exec)),
        "/hosted/agent/terminal/git-clone" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::GitClone))
        }
        "/hosted/agent/terminal/file/read" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::FileRead))
        }
        "/hosted/agent/terminal/file/write" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::FileWrite))
        }
        "/hosted/agent/terminal/file/list" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::FileList))
        }
        "/hosted/agent/terminal/expose-port" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::ExposePort))
        }
        "/hosted/agent/terminal/status" => {
            only(method, &["GET"], Route::Terminal(TerminalOp::Status))
        }
        "/hosted/agent/terminal/workspace" => {
            only(method, &["POST"], Route::Terminal(TerminalOp::Workspace))
        }
        _ => RouteMatch::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(
            route("POST", "/hosted/agent/probe"),
            RouteMatch::Found(Route::ProbeWrite)
        );
        assert_eq!(
            route("GET", "/hosted/agent/probe"),
            RouteMatch::Found(Route::ProbeRead)
        );
        assert_eq!(
            route("DELETE", "/hosted/agent/probe"),
            RouteMatch::MethodNotAllowed(&["GET", "POST"])
        );
        assert_eq!(route("GET", "/hosted/agent/probe/"), RouteMatch::NotFound);
        assert_eq!(route("GET", "/hosted/agent/nope"), RouteMatch::NotFound);
        assert_eq!(route("GET", "/"), RouteMatch::NotFound);
        assert_eq!(
            route("GET", "/hosted/agent/boot-check"),
            RouteMatch::Found(Route::BootCheck)
        );
        assert_eq!(
            route("POST", "/hosted/agent/boot-check"),
            RouteMatch::MethodNotAllowed(&["GET"])
        );
        assert_eq!(
            route("POST", "/hosted/agent/stop"),
            RouteMatch::Found(Route::Stop)
        );
        assert_eq!(
            route("GET", "/hosted/agent/evict"),
            RouteMatch::MethodNotAllowed(&["POST"])
        );
        assert_eq!(
            route("POST", "/hosted/agent/v1/chat/completions"),
            RouteMatch::Found(Route::Chat)
        );
        assert_eq!(
            route("PATCH", "/hosted/agent/proxy/v1/models"),
            RouteMatch::Found(Route::Proxy)
        );
        assert_eq!(
            route("GET", "/hosted/agent/proxy"),
            RouteMatch::Found(Route::Proxy)
        );
        assert_eq!(route("GET", "/hosted/agent/proxyx"), RouteMatch::NotFound);
        assert_eq!(
            route("POST", "/hosted/agent/terminal/exec"),
            RouteMatch::Found(Route::Terminal(TerminalOp::Exec))
        );
        assert_eq!(
            route("GET", "/hosted/agent/terminal/exec"),
            RouteMatch::MethodNotAllowed(&["POST"])
        );
        assert_eq!(
            route("GET", "/hosted/agent/terminal/status"),
            RouteMatch::Found(Route::Terminal(TerminalOp::Status))
        );
        assert_eq!(
            route("POST", "/hosted/agent/terminal/file/nope"),
            RouteMatch::NotFound
        );
        assert!(
            TerminalOp::Status.retryable()
                && !TerminalOp::Exec.retryable()
                && !TerminalOp::FileWrite.retryable()
        );
    }

    #[test]
    fn hosted_prefix_is_dot_boundary() {
        assert!(is_hosted("/hosted"));
        assert!(is_hosted("/hosted/agent/probe"));
        assert!(!is_hosted("/hostedx"));
        assert!(!is_hosted("/"));
    }
}
