//! Offline tools of the `walras` command line, with their arguments: clearing an offers CSV
//! (`clear`, `demo-batch`), generating offers and workloads (`gen`), replaying a workload's
//! blocks (`replay`) and the clearing and execution benchmarks (`bench`). None of them talks to
//! a node; the production build of `walras` leaves this crate out.

pub mod bench;
pub mod clear;
pub mod demo_batch;
pub mod gen;
pub mod market_args;
pub mod replay;
pub mod warm_start;

/// The argument parsers the commands share.
mod args {
    pub use walras_types::parse::{asset_count, fraction, thread_count};
}

/// An error for the user of an offline tool: printed as `error: <message>` with a non-zero
/// exit by the `walras` binary. (Not `std::error::Error` itself, so that every error converts
/// into it with `?`.)
#[derive(Debug)]
pub struct ToolError(pub String);

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> ToolError {
        ToolError(error.to_string())
    }
}
