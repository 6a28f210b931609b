//! A small closed-loop HTTP load generator for `scripts/bench.sh`.
//!
//! Sends `LOADGEN_REQUESTS` requests over `LOADGEN_CONCURRENCY` keep-alive
//! connections and prints one JSON line with latency percentiles. The
//! bearer token comes from `LOADGEN_BEARER` in the environment, never argv.
//!
//! Environment: `LOADGEN_URL`, `LOADGEN_METHOD` (GET), `LOADGEN_REQUESTS`
//! (2000), `LOADGEN_CONCURRENCY` (20), `LOADGEN_BEARER`, `LOADGEN_AGENT`
//! (sent as x-divinci-agent-id), `LOADGEN_EXPECT` (expected status, 200),
//! `LOADGEN_LABEL`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn main() {
    let url = env("LOADGEN_URL", "http://127.0.0.1:8787/");
    let method = env("LOADGEN_METHOD", "GET");
    let total: usize = env("LOADGEN_REQUESTS", "2000")
        .parse()
        .expect("LOADGEN_REQUESTS");
    let concurrency: usize = env("LOADGEN_CONCURRENCY", "20")
        .parse()
        .expect("LOADGEN_CONCURRENCY");
    let expect: u16 = env("LOADGEN_EXPECT", "200")
        .parse()
        .expect("LOADGEN_EXPECT");
    let label = env("LOADGEN_LABEL", "run");
    let bearer = std::env::var("LOADGEN_BEARER").ok();
    let agent = std::env::var("LOADGEN_AGENT").ok();

    let next = Arc::new(AtomicUsize::new(0));
    let unexpected = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (url, method, bearer, agent) =
                (url.clone(), method.clone(), bearer.clone(), agent.clone());
            let (next, unexpected) = (next.clone(), unexpected.clone());
            std::thread::spawn(move || {
                let client = ureq::AgentBuilder::new()
                    .timeout(Duration::from_secs(60))
                    .build();
                let mut samples = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let mut req = client.request(&method, &url);
                    if let Some(b) = &bearer {
                        req = req.set("authorization", &format!("Bearer {b}"));
                    }
                    if let Some(a) = &agent {
                        req = req.set("x-divinci-agent-id", a);
                    }
                    let t = Instant::now();
                    let status = match if method == "POST" {
                        req.send_string("")
                    } else {
                        req.call()
                    } {
                        Ok(r) => {
                            let s = r.status();
                            let _ = r.into_string();
                            s
                        }
                        Err(ureq::Error::Status(s, r)) => {
                            let _ = r.into_string();
                            s
                        }
                        Err(_) => 0,
                    };
                    samples.push(t.elapsed());
                    if status != expect {
                        unexpected.fetch_add(1, Ordering::Relaxed);
                    }
                }
                samples
            })
        })
        .collect();
    let mut all: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let elapsed = started.elapsed();
    all.sort();
    let pct = |p: f64| {
        let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        all[i].as_secs_f64() * 1000.0
    };
    println!(
        "{{\"label\":\"{label}\",\"requests\":{},\"concurrency\":{concurrency},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"rps\":{:.1},\"unexpected_status\":{}}}",
        all.len(),
        pct(0.50),
        pct(0.99),
        pct(1.0),
        all.len() as f64 / elapsed.as_secs_f64(),
        unexpected.load(Ordering::Relaxed)
    );
}
