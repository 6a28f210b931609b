//! The container registry: what `start`, `running`, `signal` and `destroy`
//! do, one container at a time.
//!
//! Each id has a slot with its own async lock, so concurrent calls on one
//! container are serialised (a start racing a destroy sees a consistent
//! state) while different containers proceed in parallel. Slots are never
//! removed from the map: a caller that fetched a slot before a destroy can
//! never act on an orphan.

use crate::config::Isolation;
use crate::env;
use crate::error::ApiError;
use crate::id::ContainerId;
use crate::instance::{self, Instance, SpawnSpec};
use crate::ports::{self, PortMap, PortPool};
use crate::sandbox::{self, RootEntry};
use hermes_protocol::ports::env as penv;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Fixed settings of the runtime, decided at devhost start.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    pub isolation: Isolation,
    pub bwrap: PathBuf,
    pub state_dir: PathBuf,
    pub supervisor_bin: PathBuf,
    /// Host paths bound read-only into every container.
    pub ro_binds: Vec<PathBuf>,
    /// Host files bound over system files (`/etc/passwd`, `/etc/group`).
    pub file_overlays: Vec<(PathBuf, PathBuf)>,
    /// Variables devhost adds to every container (local paths, mock model).
    pub runtime_env: Vec<(String, String)>,
    pub root_entries: Vec<RootEntry>,
    /// Give each container its own uid range (user namespace).
    pub uid_ranges: bool,
}

/// One container as the API sees it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub ok: bool,
    pub id: String,
    pub running: bool,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// Host pid of the supervisor (PID 1 of the container).
    pub pid: Option<u32>,
    /// Container port → host loopback port.
    pub ports: BTreeMap<String, u16>,
    pub isolation: &'static str,
    /// Host uid of the container's uid 0 (its own uid range), if any.
    pub uid_base: Option<u32>,
}

struct Live {
    instance: Instance,
    ports: PortMap,
    uid_base: Option<u32>,
}

#[derive(Default)]
struct Slot {
    live: tokio::sync::Mutex<Option<Live>>,
}

pub struct Runtime {
    settings: RuntimeSettings,
    slots: Mutex<HashMap<ContainerId, Arc<Slot>>>,
    ports: PortPool,
    uid_ranges: crate::userns::RangePool,
}

impl Runtime {
    pub fn new(settings: RuntimeSettings) -> Self {
        Self {
            settings,
            slots: Mutex::new(HashMap::new()),
            ports: PortPool::default(),
            uid_ranges: crate::userns::RangePool::default(),
        }
    }

    pub fn settings(&self) -> &RuntimeSettings {
        &self.settings
    }

    fn containers_dir(&self) -> PathBuf {
        self.settings.state_dir.join("containers")
    }

    fn dir_of(&self, id: &ContainerId) -> PathBuf {
        self.containers_dir().join(id.as_str())
    }

    fn slot(&self, id: &ContainerId) -> Result<Arc<Slot>, ApiError> {
        let mut slots = self
            .slots
            .lock()
            .map_err(|_| ApiError::Internal("registry poisoned".into()))?;
        Ok(slots.entry(id.clone()).or_default().clone())
    }

    fn ids(&self) -> Vec<ContainerId> {
        self.slots
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Removes what a previous devhost left behind (it killed its
    /// containers on exit via `--die-with-parent`; files may remain).
    pub fn clean_stale_state(&self) -> std::io::Result<()> {
        let dir = self.containers_dir();
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        // Containers run in their own user namespaces and must traverse
        // this directory to reach their own; a restrictive umask in the
        // caller (0077) would otherwise lock every container out.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
    }

    /// `start(env)`: 409 when already running; a container that exited is
    /// replaced by a fresh one (fresh files, fresh ports), as in production.
    pub async fn start(
        &self,
        id: &ContainerId,
        from_object: &BTreeMap<String, String>,
    ) -> Result<Status, ApiError> {
        // Validate before taking any lock or touching the disk.
        env::compose(&[], from_object, &[]).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        if !self.settings.supervisor_bin.is_file() {
            return Err(ApiError::StartFailed(format!(
                "supervisor binary {} not found (build it: cargo build -p hermes-supervisor, or set HERMES_SUPERVISOR_BIN)",
                self.settings.supervisor_bin.display()
            )));
        }
        let slot = self.slot(id)?;
        let mut live = slot.live.lock().await;
        if let Some(current) = live.as_ref() {
            if current.instance.running() {
                return Err(ApiError::AlreadyRunning);
            }
        }
        if let Some(old) = live.take() {
            self.teardown(id, old).await;
        }
        let dir = self.dir_of(id);
        let port_map = self
            .ports
            .allocate()
            .map_err(|e| ApiError::Internal(format!("ports: {e}")))?;
        let uid_base =
            if self.settings.isolation == Isolation::Namespaces && self.settings.uid_ranges {
                match self.uid_ranges.allocate() {
                    Some(base) => Some(base),
                    None => {
                        self.ports.release(&port_map);
                        return Err(ApiError::Internal("no free uid range".into()));
                    }
                }
            } else {
                None
            };
        // Every failure below gives back exactly what was taken above.
        let instance = match self
            .prepare_and_spawn(id, &dir, &port_map, from_object, uid_base)
            .await
        {
            Ok(instance) => instance,
            Err(err) => {
                self.ports.release(&port_map);
                if let Some(base) = uid_base {
                    self.uid_ranges.release(base);
                }
                let _ = std::fs::remove_dir_all(&dir);
                return Err(err);
            }
        };
        crate::log!(
            "devhost: started container {id} (pid {}, control port {:?})",
            instance.host_pid(),
            port_map.get(&hermes_protocol::ports::CONTROL_PORT)
        );
        *live = Some(Live {
            instance,
            ports: port_map,
            uid_base,
        });
        Ok(self.status_of(id, live.as_ref()))
    }

    /// Fresh private directories with the image's owners, then the sandbox.
    async fn prepare_and_spawn(
        &self,
        id: &ContainerId,
        dir: &std::path::Path,
        port_map: &PortMap,
        from_object: &BTreeMap<String, String>,
        uid_base: Option<u32>,
    ) -> Result<Instance, ApiError> {
        instance::prepare_dir(dir)
            .map_err(|e| ApiError::Internal(format!("container dir: {e}")))?;
        if self.settings.isolation == Isolation::Namespaces {
            crate::image::own_private_dirs(dir, uid_base.unwrap_or(0))
                .map_err(|e| ApiError::Internal(format!("container dir owners: {e}")))?;
        }
        self.spawn(id, dir, port_map, from_object, uid_base).await
    }

    async fn spawn(
        &self,
        id: &ContainerId,
        dir: &std::path::Path,
        port_map: &PortMap,
        from_object: &BTreeMap<String, String>,
        uid_base: Option<u32>,
    ) -> Result<Instance, ApiError> {
        let s = &self.settings;
        let mut runtime_env = s.runtime_env.clone();
        runtime_env.extend(ports::port_env(port_map));
        runtime_env.push((
            "HERMES_DEVHOST_ISOLATION".into(),
            s.isolation.as_str().into(),
        ));
        // Containers share the host's network namespace: the control API
        // must not listen on every interface as it does in production.
        runtime_env.push((penv::CONTROL_HOST.into(), "127.0.0.1".into()));
        match s.isolation {
            Isolation::Namespaces => {
                runtime_env.push((penv::HOME_DIR.into(), sandbox::HOME_DIR.into()));
                runtime_env.push((penv::STATE_DIR.into(), sandbox::STATE_DIR.into()));
            }
            Isolation::Reduced => {
                // No mount namespace: point the supervisor at this container's
                // own directories instead of the shared image paths.
                let path = |p: PathBuf| p.to_string_lossy().into_owned();
                runtime_env.push((penv::HOME_DIR.into(), path(dir.join("home"))));
                runtime_env.push(("HERMES_WORKSPACE_DIR".into(), path(dir.join("workspace"))));
                runtime_env.push(("TMPDIR".into(), path(dir.join("tmp"))));
                runtime_env.push((penv::STATE_DIR.into(), path(dir.join("state"))));
            }
        }
        let env = env::compose(&env::image_base(), from_object, &runtime_env)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let spec = SpawnSpec {
            id: id.as_str(),
            isolation: s.isolation,
            bwrap: &s.bwrap,
            supervisor_bin: &s.supervisor_bin,
            dir,
            env,
            root_entries: &s.root_entries,
            hidden: vec![s.state_dir.clone()],
            ro_binds: s.ro_binds.clone(),
            file_overlays: s.file_overlays.clone(),
            uid_base,
        };
        Instance::spawn(spec).await.map_err(ApiError::StartFailed)
    }

    /// `running()` and friends; an unknown id is simply not running.
    pub async fn status(&self, id: &ContainerId) -> Result<Status, ApiError> {
        let slot = self.slot(id)?;
        let live = slot.live.lock().await;
        Ok(self.status_of(id, live.as_ref()))
    }

    fn status_of(&self, id: &ContainerId, live: Option<&Live>) -> Status {
        let exit = live.and_then(|l| l.instance.exit_info());
        Status {
            ok: true,
            id: id.to_string(),
            running: live.is_some_and(|l| l.instance.running()),
            exit_code: exit.map(|e| e.code),
            exit_signal: exit.and_then(|e| e.signal),
            pid: live.map(|l| l.instance.host_pid()),
            ports: live
                .map(|l| l.ports.iter().map(|(c, h)| (c.to_string(), *h)).collect())
                .unwrap_or_default(),
            isolation: self.settings.isolation.as_str(),
            uid_base: live.and_then(|l| l.uid_base),
        }
    }

    /// Every status, for `GET /containers`.
    pub async fn list(&self) -> Vec<Status> {
        let mut out = Vec::new();
        for id in self.ids() {
            if let Ok(status) = self.status(&id).await {
                if status.pid.is_some() {
                    out.push(status);
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// The host port behind container port `port`, if the container runs.
    pub async fn host_port(&self, id: &ContainerId, port: u16) -> Result<u16, ApiError> {
        let slot = self.slot(id)?;
        let live = slot.live.lock().await;
        match live.as_ref() {
            Some(l) if l.instance.running() => l
                .ports
                .get(&port)
                .copied()
                .ok_or(ApiError::PortNotFound(port)),
            _ => Err(ApiError::NotListening(port)),
        }
    }

    /// `signal(n)` to the container's PID 1.
    pub async fn signal(&self, id: &ContainerId, signal: i32) -> Result<(), ApiError> {
        if !(1..=64).contains(&signal) {
            return Err(ApiError::BadRequest(format!(
                "signal must be 1..64, got {signal}"
            )));
        }
        let slot = self.slot(id)?;
        let live = slot.live.lock().await;
        match live.as_ref() {
            Some(l) if l.instance.running() => l
                .instance
                .signal(signal)
                .map_err(|e| ApiError::Internal(format!("signal: {e}"))),
            _ => Err(ApiError::NotRunning),
        }
    }

    /// Container output kept in memory.
    pub async fn logs(&self, id: &ContainerId) -> Result<Vec<String>, ApiError> {
        let slot = self.slot(id)?;
        let live = slot.live.lock().await;
        Ok(live.as_ref().map(|l| l.instance.logs()).unwrap_or_default())
    }

    /// `destroy()`: kill everything, remove the files, release the ports.
    /// Idempotent; returns whether there was anything to destroy.
    pub async fn destroy(&self, id: &ContainerId) -> Result<bool, ApiError> {
        let slot = self.slot(id)?;
        let mut live = slot.live.lock().await;
        let existed = match live.take() {
            Some(old) => {
                self.teardown(id, old).await;
                true
            }
            None => false,
        };
        // Also covers files of a container whose start failed half-way.
        let dir = self.dir_of(id);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| ApiError::Internal(format!("remove files: {e}")))?;
        }
        Ok(existed)
    }

    async fn teardown(&self, id: &ContainerId, old: Live) {
        let survivors = old.instance.kill_all().await;
        if !survivors.is_empty() {
            crate::log!(
                "devhost: WARNING container {id}: processes survived destroy: {survivors:?}"
            );
        }
        self.ports.release(&old.ports);
        if let Some(base) = old.uid_base {
            self.uid_ranges.release(base);
        }
        let dir = self.dir_of(id);
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            if err.kind() != std::io::ErrorKind::NotFound {
                crate::log!(
                    "devhost: WARNING container {id}: cannot remove {}: {err}",
                    dir.display()
                );
            }
        }
        crate::log!("devhost: destroyed container {id}");
    }

    /// Destroys every container (devhost shutdown).
    pub async fn destroy_all(&self) {
        for id in self.ids() {
            if let Err(err) = self.destroy(&id).await {
                crate::log!("devhost: destroying {id} failed: {err}");
            }
        }
    }
}
