//! A mock OpenAI-compatible model server: the default model provider of the
//! local runtime, so a chat works with no credentials.
//!
//! Accepts Hermes' real requests (always `stream:true`, tools, a large system
//! prompt, fields it does not know) and answers deterministically (see
//! [`reply`]). Hermes' pre-flight probes of other APIs (`/api/v1/models`,
//! `/api/show`) get a JSON 404, which Hermes treats as "not that kind of
//! server". No authentication: any key is accepted.

pub mod reply;
pub mod tools;

use crate::http::{json, read_body_limited, Body, ChannelBody, Handler};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use reply::Behaviour;
use serde_json::{json as j, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest chat request accepted (system prompt + tools + history).
const REQUEST_MAX: usize = 32 * 1024 * 1024;
/// A hanging reply is abandoned after this long at the latest.
const HANG_MAX: Duration = Duration::from_secs(3600);
/// Context length advertised for the mock model.
const CONTEXT_LENGTH: u64 = 131_072;

/// What the model answers this turn.
enum Answer {
    Text(String),
    Tool(tools::ToolCall),
}

/// The mock model's handler.
#[derive(Default)]
pub struct MockModel {
    counter: AtomicU64,
}

impl Handler for MockModel {
    fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> {
        Box::pin(async move { self.dispatch(req).await })
    }
}

fn openai_error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    json(
        status,
        &j!({ "error": { "message": message, "type": kind, "param": null, "code": null } }),
    )
}

fn model_object(id: &str) -> Value {
    j!({
        "id": id,
        "object": "model",
        "created": 0,
        "owned_by": "hermes-devhost",
        "context_length": CONTEXT_LENGTH,
        "max_model_len": CONTEXT_LENGTH,
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl MockModel {
    async fn dispatch(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().trim_end_matches('/').to_owned();
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "/health" | "/v1/health") => json(StatusCode::OK, &j!({ "ok": true })),
            (Method::GET, "/v1/models") => json(
                StatusCode::OK,
                &j!({ "object": "list", "data": [model_object(reply::DEFAULT_MODEL)] }),
            ),
            (Method::GET, p) if p.starts_with("/v1/models/") => {
                // Any model id exists: Hermes asks for the one it was configured with.
                json(StatusCode::OK, &model_object(&p["/v1/models/".len()..]))
            }
            (Method::POST, "/v1/chat/completions" | "/chat/completions") => {
                self.handle_chat(req).await
            }
            (_, "/v1/chat/completions" | "/v1/models") => openai_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "method not allowed",
            ),
            _ => openai_error(
                StatusCode::NOT_FOUND,
                "not_found",
                "not found on the mock model server",
            ),
        }
    }

    async fn handle_chat(&self, req: Request<Incoming>) -> Response<Body> {
        let Some(body) = read_body_limited(req.into_body(), REQUEST_MAX).await else {
            return openai_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request too large",
            );
        };
        let request: Value = match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return openai_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "body must be a JSON object",
                )
            }
        };
        if !request.get("messages").is_some_and(Value::is_array) {
            return openai_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "messages must be an array",
            );
        }
        let user_text = reply::last_user_text(&request);
        let behaviour = reply::behaviour(&user_text);
        if behaviour == Behaviour::Error {
            return openai_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "mock error requested by [mock:error]",
            );
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let id = format!("chatcmpl-mock-{n}");
        let created = now_secs();
        let model = reply::model_of(&request);
        let answer = match (
            tools::last_tool_result(&request),
            tools::tool_directive(&user_text),
        ) {
            (Some(result), _) => Answer::Text(tools::result_reply(&result)),
            (None, Some(call)) => Answer::Tool(call),
            (None, None) => Answer::Text(reply::reply_text(&user_text)),
        };
        let call_id = format!("call_mock_{n}");
        let prompt_chars = body.len();
        let streaming = request
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false);

        if !streaming {
            match behaviour {
                Behaviour::Hang => {
                    tokio::time::sleep(HANG_MAX).await;
                    return openai_error(
                        StatusCode::GATEWAY_TIMEOUT,
                        "timeout",
                        "mock hang expired",
                    );
                }
                Behaviour::Slow { delay_ms } => {
                    let steps = match &answer {
                        Answer::Text(text) => reply::pieces(text).len(),
                        Answer::Tool(_) => 1,
                    };
                    let steps = u32::try_from(steps).unwrap_or(1);
                    tokio::time::sleep(Duration::from_millis(delay_ms) * steps).await;
                }
                Behaviour::Normal | Behaviour::Error => {}
            }
            let completion = match &answer {
                Answer::Text(text) => reply::completion(&id, created, &model, text, prompt_chars),
                Answer::Tool(call) => tools::completion(&id, created, &model, &call_id, call),
            };
            return json(StatusCode::OK, &completion);
        }

        let (tx, body) = ChannelBody::pair(16);
        let first = reply::role_event(&id, created, &model);
        let rest = match &answer {
            Answer::Text(text) => reply::stream_events(
                &id,
                created,
                &model,
                text,
                reply::wants_usage(&request),
                prompt_chars,
            ),
            Answer::Tool(call) => tools::stream_events(&id, created, &model, &call_id, call),
        };
        tokio::spawn(async move {
            if tx.send(Bytes::from(first)).await.is_err() {
                return;
            }
            let delay = match behaviour {
                Behaviour::Hang => {
                    // Hold the stream open until the client gives up.
                    let _ = tokio::time::timeout(HANG_MAX, tx.closed()).await;
                    return;
                }
                Behaviour::Slow { delay_ms } => Some(Duration::from_millis(delay_ms)),
                Behaviour::Normal | Behaviour::Error => None,
            };
            for event in rest {
                if let Some(d) = delay {
                    tokio::time::sleep(d).await;
                }
                if tx.send(Bytes::from(event)).await.is_err() {
                    return;
                }
            }
        });
        let mut resp = Response::new(body);
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/event-stream"),
        );
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
        resp
    }
}
