//! The supervisor's shared state: settings, what was provisioned, the
//! running gateway, activity counters and cached boot-check facts.
//!
//! Secrets held here (`Secret`) never implement a revealing `Debug`. The
//! gateway key used by the proxy is the one the *running* gateway was
//! started with, not the latest provisioned one, so a re-provision before a
//! restart cannot make proxied calls fail authentication.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::config::{Secret, Settings};
use crate::reaper::Reaper;

/// What the last successful provisioning established.
#[derive(Debug, Clone)]
pub struct ProvisionedState {
    pub api_key: Secret,
    pub key_fingerprint: String,
}

/// The gateway the supervisor started (tracked by PID only).
#[derive(Debug, Clone, Default)]
pub struct GatewaySlot {
    pub pid: Option<u32>,
    pub api_key: Secret,
    pub key_fingerprint: Option<String>,
}

/// In-flight proxied exchanges and the time of the last proxied byte.
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicU32,
    last_ms: AtomicU64,
}

/// Decrements the in-flight count when the exchange (body included) ends.
pub struct InFlight {
    app: Arc<App>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.app.activity.touch(self.app.started);
        self.app.activity.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl InFlight {
    pub fn begin(app: &Arc<App>) -> Self {
        app.activity.in_flight.fetch_add(1, Ordering::Relaxed);
        app.activity.touch(app.started);
        Self {
            app: Arc::clone(app),
        }
    }
}

impl Activity {
    /// Record activity now; `started` is the supervisor's start instant.
    pub fn touch(&self, started: Instant) {
        let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Milliseconds since the last activity (since start when none yet).
    pub fn ms_ago(&self, started: Instant) -> u64 {
        let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        now.saturating_sub(self.last_ms.load(Ordering::Relaxed))
    }
}

pub struct App {
    pub settings: Settings,
    pub started: Instant,
    pub reaper: Arc<Reaper>,
    pub activity: Activity,
    pub provisioned: Mutex<Option<ProvisionedState>>,
    /// Held across start/stop so lifecycle operations never interleave.
    pub gateway: tokio::sync::Mutex<GatewaySlot>,
    /// Snapshot of the gateway for readers that must not wait for a
    /// start/stop in progress (proxy, readiness, boot-check).
    pub gateway_view: Mutex<GatewaySlot>,
    pub hermes_version: Mutex<Option<String>>,
    /// Set once the background `hermes --version` was started.
    pub version_warming: std::sync::atomic::AtomicBool,
    pub image_marker: OnceLock<String>,
    /// The virtual terminal's boundary and records for this boot.
    pub terminal: crate::terminal::TerminalState,
}

impl App {
    pub fn new(settings: Settings, reaper: Arc<Reaper>) -> Arc<Self> {
        Arc::new(Self {
            settings,
            started: Instant::now(),
            reaper,
            activity: Activity::default(),
            provisioned: Mutex::new(None),
            gateway: tokio::sync::Mutex::new(GatewaySlot::default()),
            gateway_view: Mutex::new(GatewaySlot::default()),
            hermes_version: Mutex::new(None),
            version_warming: std::sync::atomic::AtomicBool::new(false),
            image_marker: OnceLock::new(),
            terminal: crate::terminal::TerminalState::default(),
        })
    }

    pub fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn provisioned(&self) -> Option<ProvisionedState> {
        self.provisioned.lock().ok().and_then(|p| p.clone())
    }

    pub fn gateway_snapshot(&self) -> GatewaySlot {
        self.gateway_view
            .lock()
            .map(|g| g.clone())
            .unwrap_or_default()
    }

    pub fn publish_gateway(&self, slot: &GatewaySlot) {
        if let Ok(mut view) = self.gateway_view.lock() {
            *view = slot.clone();
        }
    }
}
