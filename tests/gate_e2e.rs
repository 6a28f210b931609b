//! End to end through the real workerd (`wrangler dev`): the service gate,
//! agent routing, and per-agent objects (SPEC §2, §4 probe).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{random_agent, random_hex, Response, Stack, WranglerDev};

fn call(dev: &WranglerDev, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let body = if method == "POST" { Some("") } else { None };
    Response::send(method, &dev.url(path), headers, body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", dev.log_tail()))
}

fn assert_error(resp: &Response, status: u16, code: &str) {
    assert_eq!(resp.status, status, "body: {}", resp.body);
    assert!(
        resp.content_type.starts_with("application/json"),
        "content-type {}",
        resp.content_type
    );
    let v = resp.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"], code, "body: {}", resp.body);
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn unconfigured_worker_refuses_everything_even_the_next_secret() {
    let next = random_hex(16);
    // Only NEXT is set: rotation secret alone never authenticates.
    let dev = require_or_skip!(WranglerDev::start(&format!(
        "SERVICE_AUTH_SECRET_NEXT={next}\n"
    )));
    let auth = format!("Bearer {next}");
    let agent = random_agent();
    for headers in [
        vec![],
        vec![("authorization", auth.as_str())],
        vec![
            ("authorization", auth.as_str()),
            ("x-divinci-agent-id", agent.as_str()),
        ],
    ] {
        let resp = call(&dev, "GET", "/hosted/agent/probe", &headers);
        assert_error(&resp, 503, "hosted_mode_not_configured");
        assert!(!resp.body.contains(&next), "secret echoed");
    }
}

#[test]
fn gate_routing_and_isolation() {
    // The probe marker lives in each agent's container: the full local
    // stack (devhost + supervisor + Hermes) runs behind the gate.
    let next = random_hex(24);
    let stack = require_or_skip!(Stack::start(&format!("SERVICE_AUTH_SECRET_NEXT={next}\n")));
    let dev = &stack.dev;
    let primary = stack.secret.clone();
    let good = format!("Bearer {primary}");
    let rotated = format!("Bearer {next}");
    let wrong = format!("Bearer {}", random_hex(24));
    let truncated = format!("Bearer {}", &primary[..primary.len() - 1]);
    let a = random_agent();
    let b = random_agent();

    // 401: missing, malformed, wrong, truncated bearer.
    for auth in [
        None,
        Some("Bearer "),
        Some(primary.as_str()),
        Some(wrong.as_str()),
        Some(truncated.as_str()),
    ] {
        let mut headers = vec![("x-divinci-agent-id", a.as_str())];
        if let Some(auth) = auth {
            headers.push(("authorization", auth));
        }
        let resp = call(dev, "POST", "/hosted/agent/probe", &headers);
        assert_error(&resp, 401, "unauthorized");
        assert!(!resp.body.contains(&primary));
    }
    // Unknown hosted routes are gated too: no route discovery without auth.
    assert_error(&call(dev, "GET", "/hosted/nope", &[]), 401, "unauthorized");

    // 400: missing / invalid agent ids, after a valid bearer.
    assert_error(
        &call(
            dev,
            "GET",
            "/hosted/agent/probe",
            &[("authorization", &good)],
        ),
        400,
        "missing_agent_id",
    );
    for bad in [
        "  ",
        "../evil",
        "UPPERCASE-ID",
        "short",
        "-leading-dash",
        "trailing-dash-",
        &"a".repeat(65),
    ] {
        let resp = call(
            dev,
            "GET",
            "/hosted/agent/probe",
            &[("authorization", &good), ("x-divinci-agent-id", bad)],
        );
        let code = if bad.trim().is_empty() {
            "missing_agent_id"
        } else {
            "invalid_agent_id"
        };
        assert_error(&resp, 400, code);
    }

    // Two agents: each writes a marker and reads back only its own.
    let write = |agent: &str, auth: &str| {
        let resp = call(
            dev,
            "POST",
            "/hosted/agent/probe",
            &[("authorization", auth), ("x-divinci-agent-id", agent)],
        );
        assert_eq!(resp.status, 200, "{}", resp.body);
        resp.json()
    };
    let read = |agent: &str| {
        let resp = call(
            dev,
            "GET",
            "/hosted/agent/probe",
            &[("authorization", &good), ("x-divinci-agent-id", agent)],
        );
        assert_eq!(resp.status, 200, "{}", resp.body);
        resp.json()
    };
    assert_eq!(read(&a)["read"], "(none)", "fresh object has no marker");
    let wa = write(&a, &good);
    assert_eq!(wa["agentId"], a.as_str());
    assert_eq!(wa["isolated"], true);
    let marker_a = wa["wrote"].as_str().unwrap().to_owned();
    assert!(
        marker_a.starts_with(&format!("marker-for-{a}-")),
        "{marker_a}"
    );
    assert_eq!(wa["read"], marker_a.as_str());
    assert_eq!(
        read(&b)["read"],
        "(none)",
        "agent b must not see agent a's marker"
    );

    // The rotation secret works while the primary is set.
    let wb = write(&b, &rotated);
    let marker_b = wb["wrote"].as_str().unwrap().to_owned();
    assert_ne!(marker_a, marker_b);
    assert_eq!(
        read(&a)["read"],
        marker_a.as_str(),
        "a still sees only its own marker"
    );
    assert_eq!(read(&b)["read"], marker_b.as_str());

    // Same agent twice → same object: the marker persists; a padded id
    // header resolves to the same object.
    let padded = format!("  {a}  ");
    let resp = call(
        dev,
        "GET",
        "/hosted/agent/probe",
        &[("authorization", &good), ("x-divinci-agent-id", &padded)],
    );
    assert_eq!(resp.json()["read"], marker_a.as_str());

    // 404 / 405 JSON after the gate, with the agent id.
    let resp = call(
        dev,
        "GET",
        "/hosted/agent/unknown",
        &[("authorization", &good), ("x-divinci-agent-id", &a)],
    );
    assert_error(&resp, 404, "not_found");
    assert_eq!(resp.json()["agentId"], a.as_str());
    let resp = call(
        dev,
        "DELETE",
        "/hosted/agent/probe",
        &[("authorization", &good), ("x-divinci-agent-id", &a)],
    );
    assert_error(&resp, 405, "method_not_allowed");
    assert_error(&call(dev, "GET", "/", &[]), 404, "not_found");
    assert_error(&call(dev, "GET", "/hostedx", &[]), 404, "not_found");
}
