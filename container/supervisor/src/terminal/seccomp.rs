//! A seccomp filter for terminal processes: shrink the kernel attack
//! surface the other layers cannot.
//!
//! Namespaces are the escape hatch a uid switch leaves open (`unshare
//! -Urn` works for any user: a fresh user namespace with every capability
//! inside it), and io_uring creates sockets and opens files past syscall
//! filters. So the filter refuses, with `EPERM`: namespace creation and
//! joining (`unshare`, `setns`, `clone` with any `CLONE_NEW*` flag), the
//! mount API, io_uring, `ptrace` and `process_vm_*`, `bpf`,
//! `perf_event_open`, `userfaultfd`, the keyring, module and kexec calls.
//! `clone3` answers `ENOSYS` (its flags live in memory a filter cannot
//! read), which makes libc fall back to `clone`, whose flags it can.
//! Built in the parent with `seccompiler`; the child only installs the two
//! prepared programs with `prctl`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

const DENIED: &[libc::c_long] = &[
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
];

const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp: {e}"))
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno.unsigned_abs()),
        arch()?,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    BpfProgram::try_from(filter).map_err(|e| format!("seccomp: {e}"))
}

/// The programs to install, in order.
pub fn build() -> Result<Vec<BpfProgram>, String> {
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|flag| {
            let flag = u64::from(flag.unsigned_abs());
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| format!("seccomp: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_clone, clone_rules);
    let clone3: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    Ok(vec![
        compile(denied, libc::EPERM)?,
        compile(clone3, libc::ENOSYS)?,
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn filters_compile_for_this_architecture() {
        let programs = super::build().unwrap();
        assert_eq!(programs.len(), 2);
        assert!(programs.iter().all(|p| !p.is_empty()));
    }
}
