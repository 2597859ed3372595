//! Why the node could not start or stopped: one variant per cause, so that a caller can tell
//! a setting to change from a disk to check from a port to free. Each message names what was
//! being done and ends with the cause (the workspace's convention, as `StoreError`'s): the
//! text alone is enough for an operator; the cause is also kept as the error's `source`.

use std::path::PathBuf;
use walras_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A setting (flag, limit) that cannot be honoured: the message says which and what to do.
    #[error("{0}")]
    Config(String),
    /// The machine refused a resource the node needs at start (descriptors, threads, signals).
    #[error("{doing}: {source}")]
    System {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// The open-file limit could not be read or raised.
    #[error("{doing} the open-file limit (RLIMIT_NOFILE): {source}")]
    DescriptorLimit {
        doing: &'static str,
        #[source]
        source: nix::errno::Errno,
    },
    /// The HTTP API's address could not be bound (in use, not local, no permission).
    #[error("listening on {address}: {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened, created, read or recovered.
    #[error("{doing}: {source}")]
    Storage {
        doing: String,
        #[source]
        source: StoreError,
    },
    /// The store lacks a block its own log says it holds.
    #[error("block {height} vanished from the store")]
    BlockMissing { height: u64 },
    /// The genesis file named on the command line could not be read.
    #[error("reading genesis file {}: {source}", path.display())]
    GenesisRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The genesis file named on the command line is not a genesis.
    #[error("genesis file {}: {source}", path.display())]
    GenesisDecode {
        path: PathBuf,
        #[source]
        source: walras_types::GenesisError,
    },
    /// The development genesis could not be generated from its parameters.
    #[error(transparent)]
    DevGenesis(crate::DevGenesisBuildError),
    /// The recorded oracle feed named by `--oracle-feed` cannot be used.
    #[error(transparent)]
    OracleFeed(#[from] crate::oracle::OracleFeedError),
    /// The genesis file named on the command line is not the one the store holds.
    #[error(
        "genesis mismatch: {} has genesis {named_hash}, the store in {} holds genesis \
         {stored_hash}; a store never changes genesis: pass the store's genesis, or use an \
         empty directory for a new chain",
        file.display(),
        dir.display()
    )]
    GenesisFileMismatch {
        file: PathBuf,
        named_hash: String,
        dir: PathBuf,
        stored_hash: String,
    },
    /// `--dev` asks for a development genesis the store does not hold.
    #[error(
        "genesis mismatch: --dev asks for the development genesis of {named}, the store in {} \
         holds {held} (genesis {stored_hash}); use the store's own parameters, or an empty \
         directory for a new chain",
        dir.display()
    )]
    DevGenesisMismatch {
        /// The parameters asked for: `N accounts, M assets, seed S`.
        named: String,
        dir: PathBuf,
        /// What the store holds, in words.
        held: String,
        stored_hash: String,
    },
    /// The development genesis parameters stored beside the genesis are unreadable.
    #[error("{doing}: {source}")]
    DevGenesisMeta {
        doing: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The Prometheus registry refused the node's metrics (a programming error: names clash).
    #[error("registering the metrics: {0}")]
    Metrics(#[source] prometheus::Error),
    /// CometBFT could not be found, configured or started, or it exited while the node ran.
    #[error("{0}")]
    Cometbft(String),
    /// The ABCI server for CometBFT could not be bound or started.
    #[error("{doing}: {detail}")]
    Abci { doing: &'static str, detail: String },
    /// The block producer panicked (a bug: its log has the panic message).
    #[error("the block producer panicked")]
    ProducerPanicked,
    /// The block producer stopped the node (execution or commit failed).
    #[error(transparent)]
    Producer(#[from] crate::node::ProducerError),
}

impl NodeError {
    /// A failed system call at start, named by what it was for.
    pub(crate) fn system(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
        let doing = doing.into();
        move |source| NodeError::System { doing, source }
    }

    /// A failed store operation, named by what it was for.
    pub(crate) fn storage(doing: impl Into<String>) -> impl FnOnce(StoreError) -> NodeError {
        let doing = doing.into();
        move |source| NodeError::Storage { doing, source }
    }
}
