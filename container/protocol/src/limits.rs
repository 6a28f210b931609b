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

/// Terminal `exec` (SPEC §8): command length in characters.
pub const EXEC_COMMAND_MAX_CHARS: usize = 20_000;
/// Terminal `exec` timeout: default and clamp range.
pub const EXEC_TIMEOUT_DEFAULT_MS: u64 = 120_000;
pub const EXEC_TIMEOUT_MIN_MS: u64 = 1_000;
pub const EXEC_TIMEOUT_MAX_MS: u64 = 600_000;
/// Bytes of each output stream kept; the rest is dropped and `truncated` set.
pub const EXEC_OUTPUT_MAX_BYTES: usize = 100_000;
/// `git-clone`: depth range and default, and its fixed timeout.
pub const GIT_DEPTH_DEFAULT: u32 = 1;
pub const GIT_DEPTH_MAX: u32 = 1_000;
pub const GIT_CLONE_TIMEOUT_MS: u64 = 300_000;
/// `file/read`: default and largest `maxBytes`.
pub const FILE_READ_DEFAULT_BYTES: u64 = 200_000;
pub const FILE_READ_MAX_BYTES: u64 = 2_000_000;
/// `file/write`: largest content after decoding.
pub const FILE_WRITE_MAX_BYTES: usize = 5_000_000;
/// Largest terminal request body: a 5 000 000-byte file as base64 (6.7 MB)
/// or as JSON-escaped text, with room for the envelope.
pub const TERMINAL_BODY_MAX: usize = 32 * 1024 * 1024;
/// Ports a terminal user may expose (reserved ports excluded separately).
pub const EXPOSE_PORT_MIN: u16 = 1024;
