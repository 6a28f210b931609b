//! The filesystem layer's Landlock ruleset, built once per boot in the
//! supervisor and applied by every terminal child before `exec`.
//!
//! Fail closed: the ruleset is created with `CompatLevel::HardRequirement`
//! for every access right of Landlock ABI 3 (Linux 6.2), so a kernel that
//! cannot enforce it makes the filesystem layer "not established" instead
//! of silently running unrestricted. What the terminal user may touch:
//!
//! * read + execute: system directories (`/usr`, `/bin`, `/sbin`, `/lib*`,
//!   `/etc`) and the supervisor executable itself (file helpers are the
//!   supervisor re-executed);
//! * read: `/proc` (other uids' `environ`, `fd/`, `mem` stay closed by the
//!   kernel's ptrace-access check), `/dev` read-write for `null`, `zero`,
//!   `urandom` and friends (device permissions still apply);
//! * everything: the workspace and the terminal's private tmp.
//!
//! Nothing else — in particular not `/home` (Hermes' credentials),
//! `/var/lib/hermes-edge` (supervisor state), `/opt`, `/root`, `/var`.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, ABI,
};

/// The Landlock ABI whose full filesystem access set is required.
pub const REQUIRED_ABI: ABI = ABI::V3;

const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Build the ruleset; its descriptor is what children pass to
/// `landlock_restrict_self`.
pub fn build(
    workspace: &Path,
    private_tmp: &Path,
    supervisor_exe: &Path,
) -> Result<OwnedFd, String> {
    let all = AccessFs::from_all(REQUIRED_ABI);
    let read = AccessFs::from_read(REQUIRED_ABI);
    let read_only = AccessFs::ReadFile | AccessFs::ReadDir;
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(SYSTEM_DIRS, read)))
        .and_then(|r| r.add_rules(path_beneath_rules([supervisor_exe], read)))
        .and_then(|r| r.add_rules(path_beneath_rules(["/proc"], read_only)))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                ["/dev"],
                read_only | AccessFs::WriteFile,
            ))
        })
        .and_then(|r| r.add_rules(path_beneath_rules([workspace, private_tmp], all)))
        .map_err(|e| format!("landlock ruleset: {e}"))?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "landlock is not supported by this kernel".to_owned())
}
