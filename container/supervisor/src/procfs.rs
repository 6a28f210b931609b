//! Facts about processes read from `/proc`, never assumed: a process's uids,
//! parent and process group, its open sockets, and which socket listens on a
//! loopback port. Parsing is pure (`parse_*`) and tested on fixed text.

use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Real, effective, saved and filesystem uid from a `status` file.
pub fn parse_status_uids(status: &str) -> Option<[u32; 4]> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    let mut ids = line["Uid:".len()..]
        .split_whitespace()
        .map(|v| v.parse::<u32>().ok());
    Some([ids.next()??, ids.next()??, ids.next()??, ids.next()??])
}

/// `(state, ppid, pgrp)` from a `stat` line; the command name may contain
/// spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(stat: &str) -> Option<(char, u32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}

/// Name of `uid` in a passwd file's text.
pub fn parse_passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let _pw = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
}

/// Inode of the socket in LISTEN state on `127.0.0.1:port` in a
/// `/proc/net/tcp` table.
pub fn parse_listen_inode(tcp_table: &str, port: u16) -> Option<u64> {
    let wanted = format!("0100007F:{port:04X}");
    tcp_table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
        (f.len() > 9 && f[1] == wanted && f[3] == "0A")
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

pub fn uids(pid: u32) -> Option<[u32; 4]> {
    parse_status_uids(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

pub fn user_name(uid: u32) -> Option<String> {
    parse_passwd_name(&std::fs::read_to_string("/etc/passwd").ok()?, uid)
}

/// Every live PID with its `(ppid, pgrp)`. Zombies are left out: they run
/// nothing, and their children have already been reparented.
fn process_table() -> HashMap<u32, (u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            match parse_stat(&stat)? {
                ('Z', _, _) | ('X', _, _) => None,
                (_, ppid, pgrp) => Some((pid, (ppid, pgrp))),
            }
        })
        .collect()
}

/// `root`, its descendants (by parent links) and every member of its
/// process group — everything a stop must reach.
pub fn tree_and_group(root: u32) -> HashSet<u32> {
    let table = process_table();
    let mut found: HashSet<u32> = table
        .iter()
        .filter(|(_, (_, pgrp))| *pgrp == root)
        .map(|(pid, _)| *pid)
        .collect();
    if table.contains_key(&root) {
        found.insert(root);
    }
    loop {
        let before = found.len();
        for (pid, (ppid, _)) in &table {
            if found.contains(ppid) {
                found.insert(*pid);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// Our own live children running as `uid`: orphans of a dead gateway tree
/// are reparented to the supervisor (PID 1 / child subreaper) and can no
/// longer be found through the gateway's PID.
pub fn own_children_with_uid(uid: u32) -> HashSet<u32> {
    let me = std::process::id();
    process_table()
        .into_iter()
        .filter(|(pid, (ppid, _))| *ppid == me && uids(*pid).is_some_and(|u| u[0] == uid))
        .map(|(pid, _)| pid)
        .collect()
}

/// The members of `pids` that are still running (not gone, not zombies).
pub fn still_running(pids: &HashSet<u32>) -> HashSet<u32> {
    let table = process_table();
    pids.iter()
        .copied()
        .filter(|p| table.contains_key(p))
        .collect()
}

/// Does any process in `pids` hold the socket with `inode` open?
pub fn any_holds_socket(pids: &HashSet<u32>, inode: u64) -> bool {
    let wanted = format!("socket:[{inode}]");
    pids.iter().any(|pid| {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return false;
        };
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == Path::new(&wanted)))
    })
}

/// The loopback listener's inode on `port`, if any.
pub fn loopback_listener(port: u16) -> Option<u64> {
    parse_listen_inode(&std::fs::read_to_string("/proc/net/tcp").ok()?, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_uids() {
        let s = "Name:\tpython3\nUmask:\t0022\nUid:\t10001\t10001\t10001\t10001\nGid:\t10001\t10001\t10001\t10001\n";
        assert_eq!(parse_status_uids(s), Some([10001; 4]));
        assert_eq!(parse_status_uids("Uid:\t0\t0\n"), None);
        assert_eq!(parse_status_uids("Name: x\n"), None);
    }

    #[test]
    fn stat_with_hostile_comm() {
        let s = "4242 (evil) 1 2 (x) S 77 4242 4242 0 -1 4194560";
        assert_eq!(parse_stat(s), Some(('S', 77, 4242)));
    }

    #[test]
    fn passwd_lookup() {
        let p = "root:x:0:0:root:/root:/bin/bash\nhermes:x:10001:10001::/home/hermes:/usr/sbin/nologin\n";
        assert_eq!(parse_passwd_name(p, 10001).as_deref(), Some("hermes"));
        assert_eq!(parse_passwd_name(p, 0).as_deref(), Some("root"));
        assert_eq!(parse_passwd_name(p, 10002), None);
    }

    #[test]
    fn listen_inode() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:21C2 00000000:0000 0A 00000000:00000000 00:00000000 00000000 10001        0 123456 1 0 100 0 0 10 0\n   1: 0100007F:21C2 0100007F:9C40 01 00000000:00000000 00:00000000 00000000 10001        0 777 1 0 100 0 0 10 0\n";
        assert_eq!(parse_listen_inode(t, 8642), Some(123456));
        assert_eq!(parse_listen_inode(t, 8643), None);
    }
}
