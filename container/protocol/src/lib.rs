//! The wire contract between the `HermesAgent` Durable Object (the edge, wasm)
//! and `hermes-supervisor` (PID 1 in the container).
//!
//! Everything both sides must agree on lives here and nowhere else: ports,
//! environment variable names, header names, control API paths, request and
//! response bodies, and limits. The crate does no I/O and pulls in nothing but
//! serde, so the same definitions compile into the wasm Worker and the native
//! supervisor and a change to the contract breaks both builds at once.

pub mod control;
pub mod limits;
pub mod ports;
pub mod terminal;
pub mod workspace;

pub use control::*;
