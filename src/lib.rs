//! hermes-edge: the Cloudflare Worker that hosts one Hermes agent per
//! customer agent.
//!
//! The decision code (gate, agent ids, routing, retry schedule, migrations,
//! error model) is plain Rust with no I/O and is tested natively. The
//! Workers-specific shell (the fetch handler and the `HermesAgent` Durable
//! Object) only exists on `wasm32`.

pub mod agent_id;
pub mod container_error;
pub mod errors;
pub mod gate;
pub mod migrations;
pub mod provider_keys;
pub mod proxy_path;
pub mod retry;
pub mod router;
pub mod settings;
pub mod workspace;

#[cfg(target_arch = "wasm32")]
mod agent;
#[cfg(target_arch = "wasm32")]
mod edge;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
pub mod js_options;
