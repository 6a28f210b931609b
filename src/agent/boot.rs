//! Container lifecycle of one agent: single-flight boot, reuse of a running
//! container after the object was evicted from memory, re-provisioning when
//! the key set changes, stop and evict.
//!
//! Concurrency: the object may interleave requests at every `await`. Boots
//! and re-provisioning run under one async mutex; a request that waited
//! while another one booted takes that boot's outcome (success *or*
//! failure) instead of booting again, so N concurrent cold requests cause
//! exactly one container start, and a failure is reported to every waiter
//! while the next request tries afresh.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use futures::lock::Mutex;
use hermes_protocol::{path, ApprovalsMode, Health, HermesState, Provision, Provisioned};
use worker::{Date, Delay, Env, State};

use super::control::{ControlClient, ControlFailure};
use super::crypto::hmac_sha256_hex;
use super::random_hex;
use super::runtime::Runtime;
use super::storage::{self, BootRecord};
use crate::agent_id::AgentId;
use crate::errors::{ApiError, ErrorCode};
use crate::http::string_binding;
use crate::provider_keys::KeySet;
use crate::retry::{retry, AttemptError, Jitter, RetryError, RetryPolicy};

/// Total budget of one boot.
const BOOT_BUDGET: Duration = Duration::from_millis(hermes_protocol::limits::BOOT_BUDGET_MS);
/// Per-attempt timeout while polling readiness.
const POLL_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Jitter from the runtime's CSPRNG.
pub struct CryptoJitter;

impl Jitter for CryptoJitter {
    fn below(&mut self, bound: u64) -> u64 {
        let mut b = [0u8; 8];
        if getrandom::getrandom(&mut b).is_err() {
            return bound / 2;
        }
        u64::from_le_bytes(b) % bound.max(1)
    }
}

fn sleep(d: Duration) -> Delay {
    Delay::from(d)
}

fn now_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// The key set the gateway should run with, and its keyed fingerprint.
pub struct DesiredKeys {
    pub set: KeySet,
    pub fingerprint: String,
}

/// Everything a lifecycle step needs, borrowed from the object.
pub struct Ctx<'a> {
    pub state: &'a State,
    pub env: &'a Env,
    pub agent: &'a AgentId,
    pub runtime: &'a Runtime,
}

impl Ctx<'_> {
    /// Maps a storage failure to a 500 `internal` naming the agent.
    fn storage_error(&self) -> impl Fn(worker::Error) -> ApiError + Copy + '_ {
        move |e| ApiError::internal(format!("storage: {e}")).for_agent(self.agent.as_str())
    }

    fn sql(&self) -> worker::SqlStorage {
        self.state.storage().sql()
    }

    /// Platform keys from the Worker's secrets (SPEC §6).
    pub fn platform_keys(&self) -> KeySet {
        let set = KeySet::from_secrets(|name| string_binding(self.env, name));
        if !set.dropped.is_empty() {
            worker::console_warn!(
                "agent {}: incomplete provider key sets dropped: {}",
                self.agent,
                set.dropped.join(", ")
            );
        }
        set
    }

    fn provision_body(&self, boot: &BootRecord, keys: &DesiredKeys) -> String {
        let body = Provision {
            api_server_key: boot.api_key.clone(),
            provider_env: keys.set.env.clone(),
            vertex_sa_json: keys.set.vertex_sa_json.clone(),
            default_model: string_binding(self.env, "HERMES_DEFAULT_MODEL")
                .filter(|m| !m.trim().is_empty()),
            approvals_mode: ApprovalsMode::parse_or_manual(
                string_binding(self.env, "HERMES_APPROVALS_MODE").as_deref(),
            ),
            key_fingerprint: keys.fingerprint.clone(),
        };
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// A boot phase failed: which one, and why.
struct PhaseError {
    phase: &'static str,
    message: String,
}

impl PhaseError {
    fn into_api(self, agent: &AgentId) -> ApiError {
        ApiError::new(
            ErrorCode::ContainerNotReady,
            format!("boot failed in phase {}: {}", self.phase, self.message),
        )
        .for_agent(agent.as_str())
    }
}

fn retry_message(e: RetryError<ControlFailure>) -> String {
    e.to_string()
}

/// In-memory lifecycle state of one object instance. Authoritative state
/// is in SQLite; this only caches a verified boot and serialises boots.
#[derive(Default)]
pub struct Lifecycle {
    lock: Mutex<()>,
    generation: Cell<u64>,
    last_failure: RefCell<Option<ApiError>>,
    verified: RefCell<Option<BootRecord>>,
    /// Last fingerprint computed: (canonical key set, fingerprint). Saves
    /// the Web Crypto round trip on every model request; memory only.
    last_fingerprint: RefCell<Option<(String, String)>>,
    /// When the runtime last confirmed the container is running.
    last_liveness_ms: Cell<i64>,
}

impl Lifecycle {
    /// Keyed fingerprint of a key set; the key is random per object and
    /// never leaves its SQLite storage.
    pub async fn fingerprint(&self, cx: &Ctx<'_>, set: &KeySet) -> Result<String, ApiError> {
        let canonical = set.canonical();
        if let Some((c, fp)) = self.last_fingerprint.borrow().as_ref() {
            if *c == canonical {
                return Ok(fp.clone());
            }
        }
        let sql = cx.sql();
        let internal = |e: String| ApiError::internal(format!("fingerprint: {e}"));
        let key =
            match storage::setting(&sql, "fingerprint_key").map_err(|e| internal(e.to_string()))? {
                Some(k) => k,
                None => {
                    let k = random_hex(32)?;
                    storage::set_setting(&sql, "fingerprint_key", &k)
                        .map_err(|e| internal(e.to_string()))?;
                    k
                }
            };
        let mac = hmac_sha256_hex(key.as_bytes(), canonical.as_bytes())
            .await
            .map_err(internal)?;
        let fp = mac[..32].to_owned();
        *self.last_fingerprint.borrow_mut() = Some((canonical, fp.clone()));
        Ok(fp)
    }

    /// Forget the cached boot (after a failure talking to it), so the next
    /// request verifies the container again.
    /// After a stop or evict: no cached boot, no shared failure, and
    /// waiters queued behind the lock must not reuse a previous outcome.
    fn forget_boot(&self) {
        self.verified.borrow_mut().take();
        self.generation.set(self.generation.get().wrapping_add(1));
        self.last_failure.borrow_mut().take();
    }

    pub fn invalidate(&self) {
        self.verified.borrow_mut().take();
    }

    /// A ready container whose gateway runs with `want` (or any key set
    /// when `want` is `None`).
    pub async fn ensure_ready(
        &self,
        cx: &Ctx<'_>,
        want: Option<&DesiredKeys>,
    ) -> Result<BootRecord, ApiError> {
        if let Some(boot) = self.fast_path(want) {
            // One cheap check per request: a container that died (or was
            // killed) since it was verified is noticed here, not by a
            // failing proxied call.
            // On Cloudflare `running` is a property read; over devhost it is
            // an HTTP call, so there it is rate-limited to once a second
            // (idempotent routes re-verify on failure anyway).
            let now = now_ms();
            if !cx.runtime.running_is_cheap() && now - self.last_liveness_ms.get() < 1_000 {
                return Ok(boot);
            }
            match cx.runtime.running().await {
                Ok(true) => {
                    self.last_liveness_ms.set(now);
                    return Ok(boot);
                }
                Ok(false) | Err(_) => self.invalidate(),
            }
        }
        let seen = self.generation.get();
        let _guard = self.lock.lock().await;
        if self.generation.get() != seen {
            // Someone else finished a boot while we waited: share its outcome.
            if let Some(err) = self.last_failure.borrow().clone() {
                return Err(err);
            }
            if let Some(boot) = self.fast_path(want) {
                return Ok(boot);
            }
        }
        let outcome = self.boot_or_reuse(cx, want).await;
        self.generation.set(self.generation.get().wrapping_add(1));
        match &outcome {
            Ok(boot) => {
                *self.verified.borrow_mut() = Some(boot.clone());
                self.last_failure.borrow_mut().take();
            }
            Err(e) => {
                self.verified.borrow_mut().take();
                *self.last_failure.borrow_mut() = Some(e.clone());
            }
        }
        outcome
    }

    fn fast_path(&self, want: Option<&DesiredKeys>) -> Option<BootRecord> {
        let cached = self.verified.borrow().clone()?;
        match want {
            Some(keys) if keys.fingerprint != cached.key_fingerprint => None,
            _ if cached.status != "ready" => None,
            _ => Some(cached),
        }
    }

    /// The key set to provision: the request's, or the platform keys.
    async fn resolve_keys(
        &self,
        cx: &Ctx<'_>,
        want: Option<&DesiredKeys>,
    ) -> Result<DesiredKeys, ApiError> {
        match want {
            Some(k) => Ok(DesiredKeys {
                set: k.set.clone(),
                fingerprint: k.fingerprint.clone(),
            }),
            None => {
                let set = cx.platform_keys();
                let fingerprint = self.fingerprint(cx, &set).await?;
                Ok(DesiredKeys { set, fingerprint })
            }
        }
    }

    async fn boot_or_reuse(
        &self,
        cx: &Ctx<'_>,
        want: Option<&DesiredKeys>,
    ) -> Result<BootRecord, ApiError> {
        let internal = cx.storage_error();
        let sql = cx.sql();
        if let Some(mut boot) = storage::current_boot(&sql).map_err(internal)? {
            match self.verify(cx, &boot).await {
                Ok(hermes_ready) => {
                    let needs_keys = want.is_some_and(|k| k.fingerprint != boot.key_fingerprint);
                    // Hermes not answering (crashed, or a restarted
                    // supervisor lost its provisioning): provision again,
                    // it is idempotent, then start.
                    let provision = needs_keys || !hermes_ready;
                    if provision || boot.status != "ready" {
                        let keys = self.resolve_keys(cx, want).await?;
                        // Keys changed or Hermes was stopped: provision and
                        // (re)start Hermes in the running container.
                        self.provision_and_start(cx, &boot, &keys, provision)
                            .await
                            .map_err(|e| e.into_api(cx.agent))?;
                        storage::set_boot_status(
                            &sql,
                            &boot.boot_id,
                            "ready",
                            Some(&keys.fingerprint),
                        )
                        .map_err(internal)?;
                        let kind = if needs_keys {
                            "reprovision"
                        } else {
                            "hermes-start"
                        };
                        storage::record_event(&sql, kind, &boot.boot_id).map_err(internal)?;
                        boot.status = "ready".into();
                        boot.key_fingerprint = keys.fingerprint;
                    }
                    return Ok(boot);
                }
                Err(reason) => {
                    worker::console_warn!(
                        "agent {}: boot {} unusable ({reason}); booting afresh",
                        cx.agent,
                        boot.boot_id
                    );
                    let _ = cx.runtime.destroy().await;
                    storage::end_boot(&sql, &boot.boot_id, "failed", Some(&reason))
                        .map_err(internal)?;
                    storage::record_event(&sql, "boot-lost", &reason).map_err(internal)?;
                }
            }
        }
        self.fresh_boot(cx, want).await
    }

    /// Is the recorded boot's container running and its supervisor ours?
    /// Returns whether Hermes' API is answering.
    async fn verify(&self, cx: &Ctx<'_>, boot: &BootRecord) -> Result<bool, String> {
        if !cx.runtime.running().await? {
            return Err("container is not running".into());
        }
        let client = ControlClient {
            runtime: cx.runtime,
            token: &boot.control_token,
        };
        let policy = RetryPolicy::with_attempts(3).with_attempt_timeout(POLL_ATTEMPT_TIMEOUT);
        let health: Health = retry(&policy, &mut CryptoJitter, sleep, |_| async {
            client
                .call::<Health>("GET", path::HEALTH, None)
                .await
                .map_err(ControlFailure::into_attempt)
        })
        .await
        .map_err(retry_message)?;
        if health.boot_id != boot.boot_id {
            return Err(format!(
                "supervisor reports boot {}, expected {}",
                health.boot_id, boot.boot_id
            ));
        }
        let state: HermesState = retry(&policy, &mut CryptoJitter, sleep, |_| async {
            client
                .call::<HermesState>("GET", path::HERMES_READY, None)
                .await
                .map_err(ControlFailure::into_attempt)
        })
        .await
        .map_err(retry_message)?;
        Ok(state.ready)
    }

    async fn fresh_boot(
        &self,
        cx: &Ctx<'_>,
        want: Option<&DesiredKeys>,
    ) -> Result<BootRecord, ApiError> {
        let internal = cx.storage_error();
        let sql = cx.sql();
        let keys = self.resolve_keys(cx, want).await?;
        let secret_hex = hermes_protocol::limits::SECRET_BYTES;
        let mut boot = BootRecord {
            boot_id: random_hex(16)?,
            control_token: random_hex(secret_hex)?,
            api_key: random_hex(secret_hex)?,
            status: "starting".into(),
            key_fingerprint: String::new(),
            started_at: now_ms(),
        };
        storage::insert_boot(&sql, &boot).map_err(internal)?;
        storage::record_event(&sql, "boot-start", &boot.boot_id).map_err(internal)?;

        match self.run_boot(cx, &boot, &keys).await {
            Ok(()) => {
                storage::set_boot_status(&sql, &boot.boot_id, "ready", Some(&keys.fingerprint))
                    .map_err(internal)?;
                storage::record_event(&sql, "boot-ready", &boot.boot_id).map_err(internal)?;
                boot.status = "ready".into();
                boot.key_fingerprint = keys.fingerprint;
                Ok(boot)
            }
            Err(e) => {
                let detail = format!("{}: {}", e.phase, e.message);
                worker::console_error!(
                    "agent {}: boot {} failed: {detail}",
                    cx.agent,
                    boot.boot_id
                );
                let _ = cx.runtime.destroy().await;
                storage::end_boot(&sql, &boot.boot_id, "failed", Some(&detail))
                    .map_err(internal)?;
                storage::record_event(&sql, "boot-failed", &detail).map_err(internal)?;
                Err(e.into_api(cx.agent))
            }
        }
    }

    async fn run_boot(
        &self,
        cx: &Ctx<'_>,
        boot: &BootRecord,
        keys: &DesiredKeys,
    ) -> Result<(), PhaseError> {
        let deadline = now_ms() + BOOT_BUDGET.as_millis() as i64;
        let sql = cx.sql();
        let phase = |name: &'static str| {
            let _ = storage::set_boot_phase(&sql, &boot.boot_id, name);
            move |message: String| PhaseError {
                phase: name,
                message,
            }
        };

        // Container: a stale container (whose secrets we no longer have) is
        // replaced, never adopted.
        let fail = phase("container");
        if cx.runtime.running().await.map_err(&fail)? {
            cx.runtime.destroy().await.map_err(&fail)?;
        }
        let mut env = vec![
            (
                hermes_protocol::ports::env::CONTROL_TOKEN.to_owned(),
                boot.control_token.clone(),
            ),
            (
                hermes_protocol::ports::env::BOOT_ID.to_owned(),
                boot.boot_id.clone(),
            ),
            (
                hermes_protocol::ports::env::AGENT_ID.to_owned(),
                cx.agent.to_string(),
            ),
        ];
        // Non-secret feature switches the supervisor reads at start; a
        // change takes effect at the next boot (evict to apply it now).
        if crate::workspace::enabled(
            string_binding(cx.env, "HERMES_WORKSPACE_CLI_ENABLED").as_deref(),
        ) {
            env.push(("HERMES_WORKSPACE_CLI_ENABLED".to_owned(), "true".to_owned()));
        }
        if let Some(hosts) = string_binding(cx.env, "EGRESS_ALLOWED_HOSTS") {
            env.push(("EGRESS_ALLOWED_HOSTS".to_owned(), hosts));
        }
        let start_policy = RetryPolicy::default();
        retry(&start_policy, &mut CryptoJitter, sleep, |_| async {
            cx.runtime.start(&env).await.map_err(|m| {
                let f = ControlFailure {
                    code: None,
                    detail: None,
                    retryable: crate::container_error::classify(&m).retryable(),
                    status: None,
                    message: m,
                };
                f.into_attempt()
            })
        })
        .await
        .map_err(|e| fail(retry_message(e)))?;

        let client = ControlClient {
            runtime: cx.runtime,
            token: &boot.control_token,
        };

        // Supervisor: poll until it answers, within the boot budget.
        let fail = phase("supervisor");
        let poll = RetryPolicy::with_attempts(10_000).with_attempt_timeout(POLL_ATTEMPT_TIMEOUT);
        let health: Health = retry(&poll, &mut CryptoJitter, sleep, |_| async {
            if now_ms() > deadline {
                return Err(AttemptError::Fatal(ControlFailure {
                    code: None,
                    detail: None,
                    retryable: false,
                    status: None,
                    message: "boot budget exhausted".into(),
                }));
            }
            match client.call::<Health>("GET", path::HEALTH, None).await {
                Ok(health) => Ok(health),
                // A container that already exited will never answer: fail
                // now instead of polling out the whole boot budget.
                Err(f) if matches!(cx.runtime.running().await, Ok(false)) => {
                    Err(AttemptError::Fatal(ControlFailure {
                        message: format!(
                            "the container exited before its supervisor answered ({f})"
                        ),
                        retryable: false,
                        ..f
                    }))
                }
                Err(mut f) => {
                    // While a container starts, anything but a refused
                    // token means "not yet".
                    f.retryable = f.retryable || f.status != Some(401);
                    Err(f.into_attempt())
                }
            }
        })
        .await
        .map_err(|e| fail(retry_message(e)))?;
        if health.boot_id != boot.boot_id {
            return Err(fail(format!("supervisor reports boot {}", health.boot_id)));
        }

        self.provision_and_start(cx, boot, keys, true).await?;
        let _ = deadline;
        Ok(())
    }

    /// Provision (when `provision`), start Hermes, and wait until its API
    /// answers, within the boot budget.
    async fn provision_and_start(
        &self,
        cx: &Ctx<'_>,
        boot: &BootRecord,
        keys: &DesiredKeys,
        provision: bool,
    ) -> Result<(), PhaseError> {
        let deadline = now_ms() + BOOT_BUDGET.as_millis() as i64;
        let sql = cx.sql();
        let client = ControlClient {
            runtime: cx.runtime,
            token: &boot.control_token,
        };
        let policy = RetryPolicy::default();
        if provision {
            let _ = storage::set_boot_phase(&sql, &boot.boot_id, "provision");
            let body = cx.provision_body(boot, keys);
            let done: Provisioned = retry(&policy, &mut CryptoJitter, sleep, |_| async {
                client
                    .call::<Provisioned>("POST", path::PROVISION, Some(body.clone()))
                    .await
                    .map_err(ControlFailure::into_attempt)
            })
            .await
            .map_err(|e| PhaseError {
                phase: "provision",
                message: retry_message(e),
            })?;
            if done.key_fingerprint != keys.fingerprint {
                return Err(PhaseError {
                    phase: "provision",
                    message: "supervisor confirmed another key set".into(),
                });
            }
        }
        let _ = storage::set_boot_phase(&sql, &boot.boot_id, "hermes");
        let fail = |message: String| PhaseError {
            phase: "hermes",
            message,
        };
        retry(&policy, &mut CryptoJitter, sleep, |_| async {
            client
                .call::<HermesState>("POST", path::HERMES_START, Some("{}".into()))
                .await
                .map_err(ControlFailure::into_attempt)
        })
        .await
        .map_err(|e| fail(retry_message(e)))?;
        let poll = RetryPolicy::with_attempts(10_000).with_attempt_timeout(POLL_ATTEMPT_TIMEOUT);
        retry(&poll, &mut CryptoJitter, sleep, |_| async {
            if now_ms() > deadline {
                return Err(AttemptError::Fatal(ControlFailure {
                    code: None,
                    detail: None,
                    retryable: false,
                    status: None,
                    message: "boot budget exhausted".into(),
                }));
            }
            match client
                .call::<HermesState>("GET", path::HERMES_READY, None)
                .await
            {
                Ok(s) if s.ready => Ok(()),
                Ok(s) if s.status == "stopped" => Err(AttemptError::Fatal(ControlFailure {
                    retryable: false,
                    status: None,
                    code: None,
                    detail: None,
                    message: "Hermes exited during start (see supervisor log)".into(),
                })),
                Ok(s) => Err(AttemptError::Retryable(ControlFailure {
                    code: None,
                    detail: None,
                    retryable: true,
                    status: None,
                    message: format!("Hermes {}", s.status),
                })),
                Err(f) => Err(f.into_attempt()),
            }
        })
        .await
        .map_err(|e| fail(retry_message(e)))?;
        let _ = storage::set_boot_phase(&sql, &boot.boot_id, "ready");
        Ok(())
    }

    /// Stop Hermes, keep the container (one attempt).
    pub async fn stop(&self, cx: &Ctx<'_>) -> Result<(), ApiError> {
        let _guard = self.lock.lock().await;
        let sql = cx.sql();
        let internal = cx.storage_error();
        let Some(boot) = storage::current_boot(&sql).map_err(internal)? else {
            storage::record_event(&sql, "stop", "no container").map_err(internal)?;
            return Ok(());
        };
        let client = ControlClient {
            runtime: cx.runtime,
            token: &boot.control_token,
        };
        let result = client
            .call::<HermesState>("POST", path::HERMES_STOP, Some("{}".into()))
            .await;
        self.forget_boot();
        match result {
            Ok(_) => {
                storage::set_boot_status(&sql, &boot.boot_id, "stopped", None).map_err(internal)?;
                storage::record_event(&sql, "stop", &boot.boot_id).map_err(internal)?;
                Ok(())
            }
            Err(f) => Err(
                ApiError::new(ErrorCode::GatewayError, format!("stop failed: {f}"))
                    .for_agent(cx.agent.as_str()),
            ),
        }
    }

    /// Stop gracefully (best effort), then destroy the container.
    pub async fn evict(&self, cx: &Ctx<'_>, reason: &'static str) -> Result<(), ApiError> {
        self.evict_if(cx, reason, None).await.map(|_| ())
    }

    /// Evict, but only if the current boot is still `expected` once the
    /// lifecycle lock is held (the idle alarm decided on a boot that a
    /// request may have replaced while the alarm waited for the lock).
    /// Returns whether it evicted.
    pub async fn evict_if(
        &self,
        cx: &Ctx<'_>,
        reason: &'static str,
        expected: Option<&str>,
    ) -> Result<bool, ApiError> {
        let _guard = self.lock.lock().await;
        let sql = cx.sql();
        let internal = cx.storage_error();
        let boot = storage::current_boot(&sql).map_err(internal)?;
        if let Some(expected) = expected {
            if boot.as_ref().map(|b| b.boot_id.as_str()) != Some(expected) {
                return Ok(false);
            }
        }
        if let Some(boot) = &boot {
            let client = ControlClient {
                runtime: cx.runtime,
                token: &boot.control_token,
            };
            if let Err(f) = client
                .call::<HermesState>("POST", path::HERMES_STOP, Some("{}".into()))
                .await
            {
                worker::console_warn!(
                    "agent {}: graceful stop before {reason} failed: {f}",
                    cx.agent
                );
            }
        }
        self.forget_boot();
        cx.runtime.destroy().await.map_err(|m| {
            ApiError::new(ErrorCode::GatewayError, format!("destroy failed: {m}"))
                .for_agent(cx.agent.as_str())
        })?;
        if let Some(boot) = boot {
            storage::end_boot(&sql, &boot.boot_id, reason, None).map_err(internal)?;
            storage::record_event(&sql, reason, &boot.boot_id).map_err(internal)?;
        } else {
            storage::record_event(&sql, reason, "no container").map_err(internal)?;
        }
        Ok(true)
    }
}
