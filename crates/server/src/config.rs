//! What a node is started with ([`NodeConfig`]: genesis, consensus, limits, oracle) and the
//! settings derived from it alone (the engine's settings for proposing and for recovery, the
//! admission floor). No I/O.

use crate::cometbft;
use crate::gateway_link::GatewayLinkConfig;
use crate::oracle::{OracleSettings, WarmStart};
use crate::overload;
use std::path::PathBuf;
use std::time::Duration;
use walras_api::wire::DevGenesisJson;
use walras_engine::EngineConfig;
use walras_types::Genesis;

/// Builds the development genesis of the given parameters over `threads` threads.
pub type DevGenesisBuilder = fn(&DevGenesisJson, usize) -> Result<Genesis, DevGenesisBuildError>;

/// Why a [`DevGenesisBuilder`] failed: the builder's own typed error (the server cannot name
/// its type, as it does not link the crate that builds development geneses), kept whole so
/// its source chain reaches the user.
pub type DevGenesisBuildError = Box<dyn std::error::Error + Send + Sync>;

/// Which genesis the node runs. A directory without a store gets a new one from `File` or
/// `Dev`; a directory with a `data.mdb` is never re-initialised, and its stored genesis must be
/// the one named (else the node refuses to start, naming both).
#[derive(Clone, Debug)]
pub enum GenesisSource {
    /// Whatever genesis the existing store holds; no store is an error.
    Stored,
    /// A genesis file (`Genesis::encode`).
    File(PathBuf),
    /// A generated development genesis whose keys anyone can derive (opt-in: `--dev`), and
    /// the function that builds it (from `walras-devnet`: the server does not link the
    /// workload generator that development geneses come from).
    Dev(DevGenesisJson, DevGenesisBuilder),
}

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub data_dir: PathBuf,
    pub listen: String,
    /// The genesis of a new store, or the one an existing store must hold.
    pub genesis: GenesisSource,
    pub block_interval: Duration,
    pub max_block_txs: usize,
    pub mempool_capacity: usize,
    pub threads: usize,
    /// Wall-clock limit of tâtonnement per block (the proposer need not be deterministic:
    /// the header carries its result).
    pub clearing_timeout: Duration,
    /// Requests per second per client IP; 0 turns the limit off.
    pub rate_limit_rps: u32,
    pub rate_limit_burst: u32,
    /// Who orders blocks.
    pub consensus: Consensus,
    /// Limits on connections and event streams.
    pub serve: ServeLimits,
    /// The valuation oracle (`--oracle-feed`): advisory prices, band check, warm start.
    pub oracle: Option<OracleSettings>,
    /// Where the producer's tâtonnement starts (`--warm-start`).
    pub warm_start: WarmStart,
    /// What an admitted transaction is committed within, or dropped (`--commit-bound-ms`;
    /// [`overload::COMMIT_BOUND_DEFAULT`]): admission refuses what could not make it.
    pub commit_bound: Duration,
}

/// Limits on what clients may hold open.
#[derive(Clone, Debug)]
pub struct ServeLimits {
    /// Connections served at once (`None`: [`CONNECTIONS_MAX_DEFAULT`](crate::CONNECTIONS_MAX_DEFAULT), or fewer if the
    /// descriptor limit does not leave room for it).
    pub connections_max: Option<usize>,
    /// A connection that sends no complete request head within this long (new, or kept alive
    /// between requests) is closed.
    pub header_timeout: Duration,
    /// Event streams one client IP may hold open (all together: [`routes::SSE_SUBSCRIBERS_MAX`](crate::routes::SSE_SUBSCRIBERS_MAX)).
    pub event_streams_per_client_max: usize,
}

impl Default for ServeLimits {
    fn default() -> ServeLimits {
        ServeLimits {
            connections_max: None,
            header_timeout: Duration::from_secs(5),
            event_streams_per_client_max: 8,
        }
    }
}

/// Who orders blocks.
#[derive(Clone, Debug)]
pub enum Consensus {
    /// This process cuts blocks itself (the embedded default).
    Solo,
    /// CometBFT does; this node is its ABCI++ application.
    Cometbft(cometbft::CometbftConfig),
    /// This process executes blocks alone, but cuts them only from batches sealed by the
    /// fair-access gateway (`--block-source gateway`, see [`gateway_link`]); its public submit
    /// and event endpoints refuse participants.
    Gateway(GatewayLinkConfig),
}

pub(crate) fn proposer_engine_config(config: &NodeConfig) -> EngineConfig {
    let mut engine = EngineConfig {
        threads: config.threads,
        // The producer judges signatures by the very rule replay uses: it must never commit a
        // transaction that recovery would drop. A batch from the mempool carries admission's
        // verdicts under that rule (`Signatures::AcceptedAtAdmission`); a sealed batch is
        // checked here.
        verify_signatures: true,
        ..EngineConfig::default()
    };
    // The producer owns time: clearing stops at its deadline, its instances race on the
    // engine's pool of `config.threads`.
    engine.clearing_timeout = Some(config.clearing_timeout);
    engine.clearing_iterations_max = u64::MAX;
    engine
}

pub(crate) fn recovery_engine_config(config: &NodeConfig) -> EngineConfig {
    EngineConfig {
        threads: config.threads,
        verify_signatures: true,
        ..EngineConfig::default()
    }
}

/// Below how many pending transactions admission never refuses for want of time
/// ([`overload::Overload::floor`]): a full block in solo mode, where the node cuts blocks and
/// small ones would keep the measured rate low; in CometBFT mode, where the rate is a block's
/// transactions over CometBFT's cadence, only [`overload::REPLICATED_FLOOR`] to start the
/// estimate (a floor of a 50,000-transaction block let node 0 of a localnet admit 60,000 at
/// 7,500/s offered, of which 38,827 never committed).
pub(crate) fn admission_floor(config: &NodeConfig) -> usize {
    match config.consensus {
        Consensus::Cometbft(_) => config.max_block_txs.min(overload::REPLICATED_FLOOR),
        Consensus::Solo | Consensus::Gateway(_) => config.max_block_txs,
    }
}
