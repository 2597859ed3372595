//! The Walras node as a library: the API contract shared by server and client ([`api`]) and
//! the solo node ([`server`]). The `walras` binary (`src/main.rs`, `src/cli/`) is built on it.

pub mod api;
pub mod server;
