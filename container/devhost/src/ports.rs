//! Loopback port allocation. Containers share the host's network namespace
//! under devhost, so each one gets fresh host ports for the container ports
//! the object addresses; the supervisor learns them from `*_PORT` variables.

use hermes_protocol::ports;
use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

/// Container ports every container gets mapped, with the environment
/// variable that tells the supervisor where to listen instead.
pub const MAPPED: [(u16, &str); 3] = [
    (ports::CONTROL_PORT, ports::env::CONTROL_PORT),
    (ports::HERMES_API_PORT, ports::env::HERMES_API_PORT),
    (ports::EGRESS_GUARD_PORT, ports::env::EGRESS_GUARD_PORT),
];

/// Container port → host loopback port.
pub type PortMap = BTreeMap<u16, u16>;

/// Host ports handed out to live containers, so two containers never get
/// the same one even if a supervisor has not bound its port yet.
#[derive(Default)]
pub struct PortPool {
    in_use: Mutex<HashSet<u16>>,
}

impl PortPool {
    /// A fresh host port for every entry of [`MAPPED`]. The kernel picks
    /// free ephemeral ports; all listeners stay open until every port is
    /// chosen, so the three are distinct.
    pub fn allocate(&self) -> std::io::Result<PortMap> {
        let mut in_use = self
            .in_use
            .lock()
            .map_err(|_| std::io::Error::other("port pool poisoned"))?;
        let mut held = Vec::new();
        let mut map = PortMap::new();
        for (container_port, _) in MAPPED {
            // A handful of tries in case the kernel hands back a port that
            // another container holds but has not bound yet.
            let mut chosen = None;
            for _ in 0..16 {
                let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
                let port = listener.local_addr()?.port();
                held.push(listener);
                if !in_use.contains(&port) {
                    chosen = Some(port);
                    break;
                }
            }
            let port = chosen.ok_or_else(|| std::io::Error::other("no free loopback port"))?;
            map.insert(container_port, port);
        }
        in_use.extend(map.values().copied());
        drop(held);
        Ok(map)
    }

    pub fn release(&self, map: &PortMap) {
        if let Ok(mut in_use) = self.in_use.lock() {
            for port in map.values() {
                in_use.remove(port);
            }
        }
    }
}

/// The `HERMES_*_PORT` variables for `map`.
pub fn port_env(map: &PortMap) -> Vec<(String, String)> {
    MAPPED
        .iter()
        .filter_map(|(container_port, var)| {
            map.get(container_port)
                .map(|host| (var.to_string(), host.to_string()))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_distinct_until_released() {
        let pool = PortPool::default();
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        assert_eq!(a.len(), 3);
        let mut all: Vec<u16> = a.values().chain(b.values()).copied().collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 6);
        let env = port_env(&a);
        assert!(env
            .iter()
            .any(|(k, v)| k == "HERMES_CONTROL_PORT" && v == &a[&8080].to_string()));
        pool.release(&a);
        pool.release(&b);
        assert!(pool.in_use.lock().unwrap().is_empty());
    }
}
