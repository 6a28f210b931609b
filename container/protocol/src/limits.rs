//! Limits shared by the edge and the supervisor (SPEC §3, §4, §8).

/// Default number of attempts for retried operations.
pub const RETRY_ATTEMPTS: u32 = 3;
/// Base delay of the retry schedule.
pub const RETRY_BASE_MS: u64 = 250;
/// Cap of the retry schedule.
pub const RETRY_CAP_MS: u64 = 5_000;
/// Default per-attempt timeout.
pub const ATTEMPT_TIMEOUT_MS: u64 = 30_000;
/// Total boot budget.
pub const BOOT_BUDGET_MS: u64 = 300_000;

/// Chat turn timeout: default and clamp range.
pub const TURN_TIMEOUT_DEFAULT_MS: u64 = 600_000;
pub const TURN_TIMEOUT_MIN_MS: u64 = 30_000;
pub const TURN_TIMEOUT_MAX_MS: u64 = 900_000;

/// Per-boot secrets are at least this many random bytes.
pub const SECRET_BYTES: usize = 32;

/// Largest control-API request body the supervisor accepts (provisioning,
/// probe). Proxy and file bodies have their own limits.
pub const CONTROL_BODY_MAX: usize = 1024 * 1024;
