//! Offline tools of the `walras` command line, with their arguments: clearing an offers CSV
//! (`clear`, `demo-batch`), generating offers and workloads (`gen`), replaying a workload's
//! blocks (`replay`, with the serial order-book baseline [`orderbook`] it compares against) and
//! the clearing and execution benchmarks (`bench`). None of them talks to
//! a node; the production build of `walras` leaves this crate out.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod bench;
pub mod clear;
pub mod clearing_args;
pub mod demo_batch;
pub mod gen;
pub mod market_args;
pub mod orderbook;
pub mod replay;
pub mod warm_start;

/// The argument parsers the commands share.
mod args {
    pub(crate) use walras_types::parse::{asset_count, fraction, thread_count};
}

/// Why an offline tool stopped: printed as `error: <message>` with a non-zero exit by the
/// `walras` binary. Each message names the file or argument at fault and, where there is one,
/// what to do; the variant says whose fault it is (the file system, the input, the request, or
/// this program: a failed exact check is never the user's).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A file or directory could not be opened, read, written, created or removed.
    #[error("{doing}: {source}")]
    Io {
        /// What was being done, with the path: `cannot open offers.csv`.
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// An input file is malformed, incomplete, or disagrees with the workload's manifest.
    #[error("{0}")]
    Input(String),
    /// Doing as asked would destroy something (the input, an existing file or workload): the
    /// message names the flag or choice that allows it.
    #[error("{0}")]
    Refused(String),
    /// A result failed its exact check (conservation, limit prices, the manifest's state
    /// roots): this engine is wrong or the workload was made by another one.
    #[error("{0}")]
    Verification(String),
    /// The workload generator's parameters are out of range.
    #[error("{0}")]
    Workload(#[from] walras_sim::WorkloadError),
    /// Offer generation parameters are out of range.
    #[error(transparent)]
    OfferParams(#[from] walras_sim::OfferParamsError),
    /// The offers are not a valid batch (unknown asset, zero amount, ...).
    #[error(transparent)]
    Books(#[from] walras_clearing::BookError),
    /// Clearing refused its parameters or failed to settle.
    #[error(transparent)]
    Clearing(#[from] walras_clearing::ClearingError),
    /// The engine could not start from the genesis.
    #[error(transparent)]
    State(#[from] walras_engine::StateError),
    /// The engine refused a block of the workload.
    #[error("{block}: {source}")]
    Block {
        /// `block 3`, `executing block 3`.
        block: String,
        #[source]
        source: walras_engine::EngineError,
    },
    /// Encoding a report as JSON failed.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Writing the report (standard output, or the output file) failed.
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

impl ToolError {
    /// A failed file operation, named by what it was doing (with the path).
    pub(crate) fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> ToolError {
        let doing = doing.into();
        move |source| ToolError::Io { doing, source }
    }
}
