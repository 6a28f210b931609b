//! The proxy server: a thin tokio/hyper shell around the pure policy.
//!
//! [`Guard`] owns the configuration, the current allowlist (a `watch`
//! channel, so a reload is one atomic swap and running tunnels re-check
//! their host against the new list), the resolver and the audit sink.
//! [`Guard::serve`] accepts connections until its shutdown future resolves;
//! each connection is served by hyper's HTTP/1 server and every request goes
//! through the `proxy` phase module. There is no switch that turns address classification
//! off: tests reach their upstreams through a private network namespace and
//! a [`StaticResolver`] instead.

pub mod cli;
pub mod idle;
mod proxy;
pub mod resolve;

use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::allowlist::Allowlist;
use crate::audit::AuditRecord;
use idle::{idle_expired, ActivityClock, Tracked};
use proxy::ClientConnection;
pub use resolve::{Resolve, StaticResolver, SystemResolver};

/// Limits and timeouts.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// Concurrent upstream connections (CONNECT tunnels and HTTP forwards).
    pub max_tunnels: usize,
    /// Concurrent client connections; further ones are closed on accept.
    pub max_clients: usize,
    /// A connection with no bytes moving in either direction for this long
    /// is closed.
    pub idle_timeout: Duration,
    /// Budget for resolving the name and for dialling the upstream.
    pub connect_timeout: Duration,
    /// Budget for a client to send a request head.
    pub header_timeout: Duration,
}

impl Default for GuardConfig {
    fn default() -> Self {
        GuardConfig {
            max_tunnels: 64,
            max_clients: 256,
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// Where audit lines go.
pub trait AuditSink: Send + Sync + 'static {
    /// Records one decision.
    fn record(&self, record: &AuditRecord);
}

/// Writes each record as one JSON line to stderr.
#[derive(Debug, Default, Clone, Copy)]
pub struct StderrAudit;

impl AuditSink for StderrAudit {
    fn record(&self, record: &AuditRecord) {
        let mut line = record.to_json_line();
        line.push('\n');
        // Audit output failing must not take the proxy down; stderr is the
        // supervisor's pipe.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// Keeps records in memory (tests, embedding).
#[derive(Debug, Default)]
pub struct MemoryAudit {
    records: Mutex<Vec<AuditRecord>>,
}

impl MemoryAudit {
    /// A copy of the records so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        match self.records.lock() {
            Ok(records) => records.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl AuditSink for MemoryAudit {
    fn record(&self, record: &AuditRecord) {
        match self.records.lock() {
            Ok(mut records) => records.push(record.clone()),
            Err(poisoned) => poisoned.into_inner().push(record.clone()),
        }
    }
}

/// Replaces the allowlist of a running guard.
#[derive(Debug, Clone)]
pub struct AllowlistHandle {
    sender: Arc<watch::Sender<Arc<Allowlist>>>,
}

impl AllowlistHandle {
    /// Swaps in `allowlist` atomically: every decision after this call uses
    /// it, and open tunnels whose host it no longer allows are closed.
    pub fn replace(&self, allowlist: Allowlist) {
        self.sender.send_replace(Arc::new(allowlist));
    }

    /// The list in force now.
    pub fn current(&self) -> Arc<Allowlist> {
        self.sender.borrow().clone()
    }
}

/// Errors of the server boundary.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// Binding or configuring the listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The allowlist file could not be read.
    #[error("cannot read allowlist file {path}: {source}")]
    AllowlistFile {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Bad command line or environment.
    #[error("{0}")]
    Usage(String),
}

/// State shared by every connection.
pub(crate) struct Shared {
    pub(crate) config: GuardConfig,
    pub(crate) allowlist: watch::Receiver<Arc<Allowlist>>,
    pub(crate) resolver: Arc<dyn Resolve>,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) tunnels: Arc<Semaphore>,
}

/// A configured guard, ready to serve.
pub struct Guard {
    shared: Arc<Shared>,
    handle: AllowlistHandle,
}

impl Guard {
    /// Builds a guard. Nothing is bound until [`Guard::serve`].
    pub fn new(
        config: GuardConfig,
        allowlist: Allowlist,
        resolver: Arc<dyn Resolve>,
        audit: Arc<dyn AuditSink>,
    ) -> Self {
        let (sender, receiver) = watch::channel(Arc::new(allowlist));
        let tunnels = Arc::new(Semaphore::new(config.max_tunnels));
        Guard {
            shared: Arc::new(Shared {
                config,
                allowlist: receiver,
                resolver,
                audit,
                tunnels,
            }),
            handle: AllowlistHandle {
                sender: Arc::new(sender),
            },
        }
    }

    /// The handle that reloads the allowlist.
    pub fn allowlist_handle(&self) -> AllowlistHandle {
        self.handle.clone()
    }

    /// Accepts and serves connections on `listener` until `shutdown`
    /// resolves. Connections already accepted keep running on the runtime.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let clients = Arc::new(Semaphore::new(self.shared.config.max_clients));
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => return,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    // EMFILE and friends: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = clients.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let shared = self.shared.clone();
            tokio::spawn(serve_connection(shared, stream, permit));
        }
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: tokio::net::TcpStream,
    slot: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let clock = ActivityClock::new();
    let io = TokioIo::new(Tracked::new(stream, clock.clone()));
    let client = Arc::new(ClientConnection {
        clock: clock.clone(),
        _slot: slot,
    });
    let service = {
        let shared = shared.clone();
        service_fn(move |request| {
            let shared = shared.clone();
            let client = client.clone();
            async move { Ok::<_, Infallible>(proxy::handle(shared, client, request).await) }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.config.header_timeout);
    let connection = builder.serve_connection(io, service).with_upgrades();
    // After a CONNECT upgrade the connection future completes and the tunnel
    // task carries its own watchdog on the same clock (and the client slot).
    tokio::select! {
        _ = connection => {}
        () = idle_expired(&clock, shared.config.idle_timeout) => {}
    }
}

/// Writes a non-decision event (startup, reload) as a JSON line to stderr.
pub fn log_event(event: &str, fields: serde_json::Value) {
    let mut object = serde_json::Map::new();
    object.insert(
        "ts".to_owned(),
        crate::audit::rfc3339_utc(std::time::SystemTime::now()).into(),
    );
    object.insert("event".to_owned(), event.into());
    if let serde_json::Value::Object(extra) = fields {
        object.extend(extra);
    }
    let mut line = serde_json::Value::Object(object).to_string();
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
