//! Small helpers shared by the Worker and the object: JSON answers and
//! reading string bindings.

use serde::Serialize;
use worker::{Env, Headers, Response, Result};

use crate::errors::ApiError;

/// A JSON response with `status`.
pub fn json_response(status: u16, body: String) -> Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json; charset=utf-8")?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::from_bytes(body.into_bytes())?
        .with_status(status)
        .with_headers(headers))
}

/// A 200 JSON response from a serialisable value.
pub fn ok_json<T: Serialize>(value: &T) -> Result<Response> {
    let body = serde_json::to_string(value)
        .map_err(|e| worker::Error::RustError(format!("serialise: {e}")))?;
    json_response(200, body)
}

/// The SPEC §1 error answer.
pub fn error_response(err: &ApiError) -> Result<Response> {
    json_response(err.status(), err.to_json())
}

/// A string variable or secret, `None` when unset.
pub fn string_binding(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string())
}
