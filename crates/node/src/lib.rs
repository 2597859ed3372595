//! The Walras node as a library: the API contract shared by server and client ([`api`]), the
//! solo node ([`server`]) and the client of its HTTP API with the load generator ([`client`]).
//! The `walras` binary (`src/main.rs`, `src/cli/`) is built on it.

pub mod api;
pub mod client;
pub mod server;
