//! Outbound HTTP from the object with a timeout that really cancels: every
//! request carries an `AbortSignal`, and when the timer wins the race the
//! controller aborts the fetch before its future is dropped.
//! (`Fetcher::fetch` has no timeout of its own and can hang while a
//! container port opens.)

use std::time::Duration;

use futures::future::{select, Either};
use wasm_bindgen::JsValue;
use worker::{web_sys, AbortController, Delay, Headers, Request, Response};

/// Build a request with an abort signal. `body` is a JS body (string,
/// stream) or `None`.
pub fn build_request(
    url: &str,
    method: &str,
    headers: &Headers,
    body: Option<JsValue>,
    controller: &AbortController,
) -> Result<Request, String> {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(headers.as_ref());
    if let Some(b) = body {
        init.set_body(&b);
    }
    let signal = controller.signal();
    init.set_signal(Some(&signal));
    web_sys::Request::new_with_str_and_init(url, &init)
        .map(Request::from)
        .map_err(|e| format!("build request: {e:?}"))
}

/// Why a timed call did not produce a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    TimedOut,
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TimedOut => f.write_str("timed out"),
            Self::Failed(m) => f.write_str(m),
        }
    }
}

/// Race `call` against `timeout`. The call future is dropped when the timer
/// wins; the caller then aborts the fetch with [`abort_on_timeout`] (the
/// future borrows the controller, so the abort happens after the race).
pub async fn race<F>(call: F, timeout: Duration) -> Result<Response, CallError>
where
    F: std::future::Future<Output = worker::Result<Response>>,
{
    let call = std::pin::pin!(call);
    let timer = std::pin::pin!(Delay::from(timeout));
    match select(call, timer).await {
        Either::Left((Ok(resp), _)) => Ok(resp),
        Either::Left((Err(e), _)) => Err(CallError::Failed(e.to_string())),
        Either::Right(((), _)) => Err(CallError::TimedOut),
    }
}

/// Abort the request when the race was lost, so it does not run on.
pub fn abort_on_timeout(
    outcome: Result<Response, CallError>,
    controller: AbortController,
) -> Result<Response, CallError> {
    if matches!(outcome, Err(CallError::TimedOut)) {
        controller.abort();
    }
    outcome
}
