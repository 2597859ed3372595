//! `walras node`: opens the store (or creates it, only in a directory without one and only from
//! a named genesis), recovers the state from its newest checkpoint and the blocks after it,
//! checking each state root, then serves the HTTP API while blocks are ordered either
//! by a solo producer thread that cuts, executes and durably commits them ([`Consensus::Solo`],
//! the embedded default) or by CometBFT through the ABCI++ app ([`cometbft`]).

mod admission;
pub mod cometbft;
mod dashboard;
mod error;
mod explain;
mod failure;
mod gateway_link;
mod gateway_seal;
pub mod in_process;
mod limits;
mod listen;
pub mod mempool;
mod metrics;
mod node;
mod openapi;
pub mod oracle;
pub mod overload;
mod recent;
mod routes;

use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
pub use error::NodeError;
use failure::Failure;
pub use gateway_link::GatewayLinkConfig;
use limits::{ClientSlots, RateLimiter};
use listen::ConnectionLimits;
pub use listen::CONNECTIONS_MAX_DEFAULT;
pub use node::ProducerError;
use node::{ProducerConfig, Shared, Tip};
pub use oracle::{OracleSettings, OracleSource, WarmStart};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;
use walras_api::wire::DevGenesisJson;
use walras_crypto::Hash;
use walras_engine::block::transaction_hash;
use walras_engine::{EngineConfig, ExchangeState};
use walras_store::{recover_store_with, BlockStore, Recovery, StoreOptions};
use walras_types::Genesis;

/// The key under which the store keeps a development genesis's parameters.
const DEV_GENESIS_META_KEY: &str = "dev_genesis";
/// Requests (other than event streams) that take longer are answered 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the runtime waits for blocking tasks (signature checks) once the server stopped.
const RUNTIME_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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
    /// Connections served at once (`None`: [`CONNECTIONS_MAX_DEFAULT`], or fewer if the
    /// descriptor limit does not leave room for it).
    pub connections_max: Option<usize>,
    /// A connection that sends no complete request head within this long (new, or kept alive
    /// between requests) is closed.
    pub header_timeout: Duration,
    /// Event streams one client IP may hold open (all together: [`routes::SSE_SUBSCRIBERS_MAX`]).
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

/// Runs the node until SIGINT or SIGTERM (exit cleanly) or a producer failure (an error).
pub fn run(config: NodeConfig) -> Result<(), NodeError> {
    let descriptors = listen::raise_descriptor_limit()?;
    let connections = ConnectionLimits {
        connections_max: listen::connections_max(config.serve.connections_max, descriptors)?,
        header_timeout: config.serve.header_timeout,
        shutdown_grace: listen::SHUTDOWN_GRACE,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.clamp(2, 8))
        // Signature checks of batch submissions run here: no more of them than cores.
        .max_blocking_threads(config.threads.max(2))
        .enable_all()
        .build()
        .map_err(NodeError::system("starting the async runtime"))?;
    // The feed is read before the store is opened: a bad file stops the node at once.
    let feed = match config.oracle.as_ref().map(|oracle| &oracle.source) {
        Some(OracleSource::Feed(path)) => Some(oracle::load_feed(path)?),
        Some(OracleSource::Venues(_)) | None => None,
    };
    let shared = Arc::new(open_and_recover(&config)?);
    let oracle_thread = match (feed, &config.oracle) {
        (Some(feed), Some(settings)) => {
            let handle = shared.oracle.clone().ok_or_else(|| {
                NodeError::Config("an oracle feed without an oracle handle".into())
            })?;
            let stop = shared.shutting_down.subscribe();
            let interval = settings.publish_interval;
            Some(
                std::thread::Builder::new()
                    .name("oracle".into())
                    .spawn(move || oracle::run_feed(&handle, stop, feed, interval))
                    .map_err(NodeError::system("starting the oracle"))?,
            )
        }
        (None, Some(settings)) => {
            if let (OracleSource::Venues(venues), Some(handle)) = (&settings.source, &shared.oracle)
            {
                let endpoints = oracle::endpoints(&handle.map, venues);
                let tls = walras_oracle_net::TlsClient::with_extra_cas(&settings.tls_ca_files)
                    .map_err(|error| NodeError::Config(format!("--oracle-ca: {error}")))?;
                for endpoint in &endpoints {
                    endpoint
                        .check_with(Some(&tls))
                        .map_err(|error| NodeError::Config(format!("--oracle-venue: {error}")))?;
                }
                runtime.spawn(oracle::run_venues(
                    handle.clone(),
                    shared.shutting_down.subscribe(),
                    endpoints,
                    settings.publish_interval,
                    tls,
                ));
            }
            None
        }
        _ => None,
    };
    let result = match &config.consensus {
        Consensus::Solo | Consensus::Gateway(_) => {
            run_solo(&config, &connections, shared.clone(), &runtime)
        }
        Consensus::Cometbft(cometbft) => {
            run_replicated(&config, cometbft, &connections, shared.clone(), &runtime)
        }
    };
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_GRACE);
    if let Some(thread) = oracle_thread {
        // The thread checks for shutdown after each publication; a panic there only ends the
        // oracle (prices go stale and are no longer used), never the node's result.
        shared.shut_down();
        if thread.join().is_err() {
            tracing::warn!("the oracle thread panicked");
        }
    }
    result
}

/// The ABCI application over the node's store, recovered, with nothing started: no CometBFT,
/// no HTTP server. Tests drive it as CometBFT would (a mock consensus: no clocks, no network).
pub fn abci_app(config: &NodeConfig) -> Result<cometbft::WalrasApp, NodeError> {
    let shared = Arc::new(open_and_recover(config)?);
    Ok(cometbft::WalrasApp::new(
        shared,
        replicated_app_config(config),
    ))
}

fn replicated_app_config(config: &NodeConfig) -> cometbft::AppConfig {
    cometbft::AppConfig {
        proposer: proposer_engine_config(config),
        follower: recovery_engine_config(config),
        max_block_txs: config.max_block_txs,
    }
}

/// Solo mode: a producer thread cuts (on its timer, or from the gateway's sealed batches),
/// executes and stores blocks.
fn run_solo(
    config: &NodeConfig,
    connections: &ConnectionLimits,
    shared: Arc<Shared>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), NodeError> {
    let producer = spawn_producer(config, shared.clone())?;
    let served = runtime.block_on(serve(config, connections, shared.clone()));
    shared.shut_down();
    let produced = producer.join().map_err(|_| NodeError::ProducerPanicked)?;
    served?;
    produced?;
    tracing::info!("stopped at height {}", shared.tip().height);
    Ok(())
}

/// Starts the solo producer thread (the timer's, or the gateway's when the node runs behind
/// one); `walras node` and the in-process node ([`in_process`]) start it here alike.
fn spawn_producer(
    config: &NodeConfig,
    shared: Arc<Shared>,
) -> Result<std::thread::JoinHandle<Result<(), ProducerError>>, NodeError> {
    let producer_config = ProducerConfig {
        block_interval: config.block_interval,
        max_block_txs: config.max_block_txs,
        engine: proposer_engine_config(config),
        warm_start: config.warm_start,
    };
    std::thread::Builder::new()
        .name("producer".into())
        .spawn(move || {
            // Whatever stops the producer, a panic included, stops the server too: a node
            // that admits transactions it will never commit must not keep serving.
            let _stop_server = StopOnDrop(shared.clone());
            match shared.gateway.as_ref().map(|link| link.take_receiver()) {
                None => node::run_producer(&shared, &producer_config),
                Some(Some(jobs)) => {
                    gateway_seal::run_gateway_producer(&shared, &producer_config, &jobs)
                }
                // Only one producer is ever started.
                Some(None) => Ok(()),
            }
        })
        .map_err(NodeError::system("starting the block producer"))
}

/// Replicated mode: CometBFT orders blocks through the ABCI app.
fn run_replicated(
    config: &NodeConfig,
    cometbft: &cometbft::CometbftConfig,
    connections: &ConnectionLimits,
    shared: Arc<Shared>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), NodeError> {
    // The API's port is bound before the ABCI server asks the system for a free one: bound
    // after it, the ABCI server could be handed the very port the API was configured with
    // (localnet picks ports ahead of time and releases them), and the node would stop with
    // "address already in use" (seen in the localnet test under load).
    let listener = runtime.block_on(bind_api(config))?;
    let running = cometbft::start(&shared, cometbft, replicated_app_config(config), runtime)?;
    let served = runtime.block_on(serve_on(listener, config, connections, shared.clone()));
    shared.shut_down();
    let stopped = running.stop();
    served?;
    stopped?;
    tracing::info!("stopped at height {}", shared.tip().height);
    Ok(())
}

/// Shuts the node down when dropped (also while unwinding from a panic).
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.shut_down();
    }
}

fn proposer_engine_config(config: &NodeConfig) -> EngineConfig {
    let mut engine = EngineConfig {
        threads: config.threads,
        // The producer verifies with the very function replay uses: it must never commit a
        // transaction that recovery would drop. Admission verified most of them by the same
        // rule; `produce_block` hands it admission's record so it does not check them twice.
        verify_signatures: true,
        ..EngineConfig::default()
    };
    // The producer owns time: clearing stops at its deadline, its instances race on the
    // engine's pool of `config.threads`.
    engine.clearing_timeout = Some(config.clearing_timeout);
    engine.clearing_iterations_max = u64::MAX;
    engine
}

/// `GET /v1/assets`'s answer, from the genesis (`A0`, `A1`, ... when it names no asset).
fn asset_names(genesis: &Genesis) -> walras_api::wire::AssetsJson {
    walras_api::wire::AssetsJson {
        named: !genesis.asset_info.is_empty(),
        quote_asset: 0,
        assets: (0..genesis.assets)
            .map(|asset| walras_api::wire::AssetJson {
                asset,
                symbol: genesis.symbol(asset),
                decimals: genesis
                    .asset_info
                    .get(usize::from(asset))
                    .map_or(0, |info| info.decimals),
            })
            .collect(),
    }
}

fn recovery_engine_config(config: &NodeConfig) -> EngineConfig {
    EngineConfig {
        threads: config.threads,
        verify_signatures: true,
        ..EngineConfig::default()
    }
}

/// Opens (or creates) the store, recovers the state, and builds the shared state.
fn open_and_recover(config: &NodeConfig) -> Result<Shared, NodeError> {
    warn_if_dev(&config.genesis);
    let (store, dev_genesis) = open_or_create(config)?;
    let genesis = store
        .genesis()
        .map_err(NodeError::storage("reading the genesis"))?;
    let last_height = store
        .last_height()
        .map_err(NodeError::storage("reading the block log"))?;
    tracing::info!(
        "recovering {last_height} blocks from {} ({} accounts, {} assets)",
        config.data_dir.display(),
        genesis.accounts.len(),
        genesis.assets
    );
    let started = Instant::now();
    let mut recovery = recover(&store, config, last_height)?;
    report_recovery(&recovery);
    let recent = recent_transactions(&store, recovery.state.height())?;
    let tip = recovered_tip(&store, &mut recovery.state, config.threads)?;
    tracing::info!(
        "recovered height {} state root {} in {:.1} s",
        tip.height,
        tip.state_root,
        started.elapsed().as_secs_f64()
    );
    let state = recovery.state;
    let assets = state.assets() as u16;
    let oracle = match &config.oracle {
        Some(settings) => Some(Arc::new(oracle_handle(settings, assets)?)),
        None => None,
    };
    Ok(Shared {
        explain: limits::ExplainGate::new(proposer_engine_config(config).clearing.epsilon),
        oracle,
        assets: state.assets() as u16,
        asset_names: asset_names(&genesis),
        accounts: arc_swap::ArcSwap::from_pointee(walras_engine::AccountView::of(&state)),
        state: tokio::sync::RwLock::new(state),
        mempool: Mutex::new(mempool::Mempool::new(config.mempool_capacity)),
        overload: Mutex::new(overload::Overload::new(
            config.commit_bound,
            config.mempool_capacity,
            admission_floor(config),
        )),
        producer_wake: Condvar::new(),
        store,
        recent: Mutex::new(recent),
        tip: RwLock::new(tip),
        events: broadcast::channel(1024).0,
        metrics: metrics::Metrics::new().map_err(NodeError::Metrics)?,
        dev_genesis,
        max_block_txs: config.max_block_txs,
        shutting_down: tokio::sync::watch::channel(false).0,
        gateway: match &config.consensus {
            Consensus::Gateway(link) => Some(gateway_link::GatewayLink::new(link)),
            Consensus::Solo | Consensus::Cometbft(_) => None,
        },
        cometbft_rpc: std::sync::OnceLock::new(),
        verifying: std::sync::atomic::AtomicUsize::new(0),
        // Room for a full mempool's verdicts in each of its two generations.
        accepted_signatures: Arc::new(walras_crypto::AcceptedSignatures::new(
            config.mempool_capacity.max(1024),
        )),
        checkpoint_failure_reported: Mutex::new(None),
    })
}

/// Below how many pending transactions admission never refuses for want of time
/// ([`overload::Overload::floor`]): a full block in solo mode, where the node cuts blocks and
/// small ones would keep the measured rate low; in CometBFT mode, where the rate is a block's
/// transactions over CometBFT's cadence, only [`overload::REPLICATED_FLOOR`] to start the
/// estimate (a floor of a 50,000-transaction block let node 0 of a localnet admit 60,000 at
/// 7,500/s offered, of which 38,827 never committed).
fn admission_floor(config: &NodeConfig) -> usize {
    match config.consensus {
        Consensus::Cometbft(_) => config.max_block_txs.min(overload::REPLICATED_FLOOR),
        Consensus::Solo | Consensus::Gateway(_) => config.max_block_txs,
    }
}

/// The oracle's shared state, with its asset map checked against the genesis's assets.
fn oracle_handle(
    settings: &OracleSettings,
    assets: u16,
) -> Result<oracle::OracleHandle, NodeError> {
    let handle = oracle::OracleHandle::new(settings, assets).map_err(NodeError::Metrics)?;
    if let Some(entry) = handle.map.entries().iter().find(|e| e.id >= assets) {
        return Err(NodeError::Config(format!(
            "the oracle asset map names asset {} ({}), but the genesis has only {assets} assets",
            entry.id, entry.symbol
        )));
    }
    if !handle.map.covers(assets) {
        tracing::warn!(
            "the oracle asset map does not name every one of the {assets} assets: the band \
             check covers the mapped ones, and --warm-start oracle falls back to the previous \
             block's prices"
        );
    }
    tracing::info!(
        "oracle: {} for {} mapped assets, band {} bps",
        handle.source,
        handle.map.entries().len(),
        handle.band_bps
    );
    Ok(handle)
}

/// The state from the store's newest good checkpoint and the blocks after it.
fn recover(
    store: &BlockStore,
    config: &NodeConfig,
    last_height: u64,
) -> Result<Recovery, NodeError> {
    let mut last_report = Instant::now();
    recover_store_with(
        store,
        &recovery_engine_config(config),
        config.threads,
        |block, _| {
            if last_report.elapsed() > Duration::from_secs(2) {
                tracing::info!(
                    "replayed up to block {} of {last_height}",
                    block.header.height
                );
                last_report = Instant::now();
            }
        },
    )
    .map_err(NodeError::storage("recovering the state from the store"))
}

/// Says where recovery started, and loudly which checkpoints it refused.
fn report_recovery(recovery: &Recovery) {
    for refused in &recovery.refused_checkpoints {
        tracing::warn!(
            "WARNING: the checkpoint at height {} is damaged and was not used ({}); \
             recovered from an older one instead: check the disk",
            refused.height,
            refused.reason
        );
    }
    match recovery.checkpoint_height {
        0 => tracing::info!("replayed {} blocks from genesis", recovery.replayed_blocks),
        height => tracing::info!(
            "loaded the checkpoint at height {height}, replayed {} blocks after it",
            recovery.replayed_blocks
        ),
    }
}

/// The recent-transaction index over the last stored blocks (at least
/// [`recent::RECENT_TRANSACTIONS_MIN`] transactions, whole blocks), from the stored blocks and
/// their stored results: nothing is re-executed.
fn recent_transactions(
    store: &BlockStore,
    height: u64,
) -> Result<recent::RecentTransactions, NodeError> {
    let mut blocks = Vec::new();
    let mut transactions = 0;
    let mut next = height;
    while next > 0 && transactions < recent::RECENT_TRANSACTIONS_MIN {
        let block = store
            .block(next)
            .map_err(NodeError::storage(
                "reading a block for the transaction index",
            ))?
            .ok_or(NodeError::BlockMissing { height: next })?;
        let dropped = store
            .dropped(next)
            .map_err(NodeError::storage("reading block results"))?
            .unwrap_or_default();
        transactions += block.transactions.len();
        blocks.push((block, dropped));
        next -= 1;
    }
    let mut recent = recent::RecentTransactions::new(recent::RECENT_TRANSACTIONS_MIN);
    for (block, dropped) in blocks.into_iter().rev() {
        let hashes = block.transactions.iter().map(transaction_hash).collect();
        recent.insert_block(block.header.height, hashes, &dropped);
    }
    Ok(recent)
}

fn warn_if_dev(genesis: &GenesisSource) {
    if let GenesisSource::Dev(dev, _) = genesis {
        tracing::warn!(
            "WARNING: --dev: development genesis ({} accounts, {} assets, seed {}); \
             its account keys can be derived by anyone: never hold real value on this chain",
            dev.accounts,
            dev.assets,
            dev.seed
        );
    }
}

/// Opens the store in the data directory, or creates it there from the named genesis if the
/// directory has no `data.mdb`. Returns the store and its development genesis parameters, if
/// it was created from one.
fn open_or_create(config: &NodeConfig) -> Result<(BlockStore, Option<DevGenesisJson>), NodeError> {
    let dir = &config.data_dir;
    // Checkpoints are written off the block path: the producer copies the state and goes on.
    let options = StoreOptions {
        checkpoint_in_background: true,
        ..StoreOptions::default()
    };
    let exists = dir.join("data.mdb").exists();
    if !exists && !matches!(config.genesis, GenesisSource::Stored) {
        let (genesis, dev) = named_genesis(&config.genesis, config.threads)?;
        let store = create_store(dir, &genesis, dev.as_ref(), &options)?;
        return Ok((store, dev));
    }
    let store = BlockStore::open_with(dir, &options).map_err(NodeError::storage(format!(
        "opening the store in {}",
        dir.display()
    )))?;
    let stored_dev = stored_dev_genesis(&store)?;
    check_named_genesis(&store, &config.genesis, stored_dev.as_ref())?;
    Ok((store, stored_dev))
}

/// The genesis that `source` names, and its development parameters if it is one.
fn named_genesis(
    source: &GenesisSource,
    threads: usize,
) -> Result<(Genesis, Option<DevGenesisJson>), NodeError> {
    match source {
        GenesisSource::Stored => Err(NodeError::Config(
            "no genesis named: pass --genesis FILE or --dev".into(),
        )),
        GenesisSource::File(path) => Ok((read_genesis_file(path)?, None)),
        GenesisSource::Dev(dev, build) => {
            let genesis = build(dev, threads).map_err(NodeError::DevGenesis)?;
            Ok((genesis, Some(*dev)))
        }
    }
}

/// Creates the store in `dir` with `genesis` (and the development parameters, in the same
/// transaction). Used by `walras init` and by a node started on a directory without a store.
pub fn create_store(
    dir: &std::path::Path,
    genesis: &Genesis,
    dev: Option<&DevGenesisJson>,
    options: &StoreOptions,
) -> Result<BlockStore, NodeError> {
    let dev_json =
        dev.map(serde_json::to_vec)
            .transpose()
            .map_err(|source| NodeError::DevGenesisMeta {
                doing: "encoding dev genesis",
                source,
            })?;
    let app_meta: Vec<(&str, &[u8])> = dev_json
        .as_deref()
        .map(|json| (DEV_GENESIS_META_KEY, json))
        .into_iter()
        .collect();
    let store = BlockStore::create_with(dir, genesis, &app_meta, options).map_err(
        NodeError::storage(format!("creating a store in {}", dir.display())),
    )?;
    tracing::info!(
        "created a new store in {} with genesis {} ({} accounts, {} assets)",
        dir.display(),
        genesis_hash(genesis),
        genesis.accounts.len(),
        genesis.assets
    );
    Ok(store)
}

/// The hash operators compare genesis files by: of the genesis's canonical encoding.
pub fn genesis_hash(genesis: &Genesis) -> walras_crypto::Hash {
    walras_crypto::hash(&genesis.encode())
}

fn stored_dev_genesis(store: &BlockStore) -> Result<Option<DevGenesisJson>, NodeError> {
    let stored = store
        .app_meta(DEV_GENESIS_META_KEY)
        .map_err(NodeError::storage("reading the dev genesis parameters"))?;
    stored
        .map(|bytes| serde_json::from_slice(&bytes))
        .transpose()
        .map_err(|source| NodeError::DevGenesisMeta {
            doing: "decoding the dev genesis parameters",
            source,
        })
}

/// Refuses to start when the genesis named on the command line is not the stored one. The
/// stored genesis is read and hashed only where the answer needs it: a node restarted with
/// the `--dev` parameters it was created with compares those parameters alone (reading and
/// hashing a 10M-account genesis took 8.3 s of such a restart).
fn check_named_genesis(
    store: &BlockStore,
    source: &GenesisSource,
    stored_dev: Option<&DevGenesisJson>,
) -> Result<(), NodeError> {
    let stored_hash = || -> Result<Hash, NodeError> {
        let stored = store
            .genesis()
            .map_err(NodeError::storage("reading the genesis"))?;
        Ok(genesis_hash(&stored))
    };
    let dir = store.dir().to_path_buf();
    match source {
        GenesisSource::Stored => Ok(()),
        GenesisSource::File(path) => {
            let named_hash = genesis_hash(&read_genesis_file(path)?);
            let stored_hash = stored_hash()?;
            if named_hash == stored_hash {
                return Ok(());
            }
            Err(NodeError::GenesisFileMismatch {
                file: path.clone(),
                named_hash: named_hash.to_string(),
                dir,
                stored_hash: stored_hash.to_string(),
            })
        }
        GenesisSource::Dev(dev, _) if stored_dev == Some(dev) => Ok(()),
        GenesisSource::Dev(dev, _) => {
            let held = match stored_dev {
                Some(held) => format!(
                    "the development genesis of {} accounts, {} assets, seed {}",
                    held.accounts, held.assets, held.seed
                ),
                None => "a genesis from a file".into(),
            };
            Err(NodeError::DevGenesisMismatch {
                named: format!(
                    "{} accounts, {} assets, seed {}",
                    dev.accounts, dev.assets, dev.seed
                ),
                dir,
                held,
                stored_hash: stored_hash()?.to_string(),
            })
        }
    }
}

fn read_genesis_file(path: &std::path::Path) -> Result<Genesis, NodeError> {
    let bytes = std::fs::read(path).map_err(|source| NodeError::GenesisRead {
        path: path.to_path_buf(),
        source,
    })?;
    Genesis::decode(&bytes).map_err(|source| NodeError::GenesisDecode {
        path: path.to_path_buf(),
        source,
    })
}

fn recovered_tip(
    store: &BlockStore,
    state: &mut ExchangeState,
    threads: usize,
) -> Result<Tip, NodeError> {
    let height = state.height();
    if height == 0 {
        return Ok(Tip {
            height: 0,
            block_hash: Hash::default(),
            state_root: state.state_root(threads),
            valuations: Vec::new(),
            prices: Vec::new(),
            market: Arc::new(state.market().clone()),
        });
    }
    let block = store
        .block(height)
        .map_err(NodeError::storage("reading the last block"))?
        .ok_or(NodeError::BlockMissing { height })?;
    Ok(Tip {
        height,
        block_hash: block.header.hash(),
        state_root: block.header.state_root,
        valuations: block.header.valuations.clone(),
        prices: crate::node::block_prices(&block.header),
        market: Arc::new(state.market().clone()),
    })
}

/// Binds, announces the address on stdout, and serves until shutdown; returns within the
/// grace period of the stop, whatever clients hold open.
async fn serve(
    config: &NodeConfig,
    connections: &ConnectionLimits,
    shared: Arc<Shared>,
) -> Result<(), NodeError> {
    let listener = bind_api(config).await?;
    serve_on(listener, config, connections, shared).await
}

/// Binds the API's listening socket.
async fn bind_api(config: &NodeConfig) -> Result<tokio::net::TcpListener, NodeError> {
    tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|source| NodeError::Bind {
            address: config.listen.to_string(),
            source,
        })
}

/// Serves the API on a bound `listener` until shutdown.
async fn serve_on(
    listener: tokio::net::TcpListener,
    config: &NodeConfig,
    connections: &ConnectionLimits,
    shared: Arc<Shared>,
) -> Result<(), NodeError> {
    let address = listener
        .local_addr()
        .map_err(NodeError::system("reading the bound address"))?;
    // Before the address line: a client (or test) that reads it may signal the node at once,
    // and a signal without a handler kills the process instead of stopping it.
    let signals = StopSignals::watch()?;
    // The first line on stdout: scripts and tests wait for it.
    println!("walras node listening on http://{address}");
    tracing::info!(
        "API at http://{address}/v1 (document: /v1/openapi.json); at most {} \
         connections",
        connections.connections_max
    );
    let limiter = RateLimiter::new(config.rate_limit_rps, config.rate_limit_burst).map(Arc::new);
    let streams = Arc::new(ClientSlots::new(
        config.serve.event_streams_per_client_max,
        routes::SSE_SUBSCRIBERS_MAX,
    ));
    let app = router(shared.clone(), limiter, streams.clone());
    let Some(link) = &shared.gateway else {
        let stop = signals.stop(shared);
        listen::serve_connections(listener, app, connections, stop).await;
        return Ok(());
    };
    // Gateway mode: the public listener refuses what would bypass the gateway's buffers; the
    // operator's listener (loopback unless configured otherwise) serves everything, without
    // the per-client rate limit.
    let operator = tokio::net::TcpListener::bind(&link.operator_listen)
        .await
        .map_err(|source| NodeError::Bind {
            address: link.operator_listen.clone(),
            source,
        })?;
    let operator_address = operator
        .local_addr()
        .map_err(NodeError::system("reading the operator listener's address"))?;
    // The second line on stdout (tests read it).
    println!("walras node operator API on http://{operator_address}");
    tracing::info!(
        "gateway mode: submissions, events, blocks, books and prices are closed on \
         http://{address}; the operator's API is at http://{operator_address}"
    );
    let operator_app = router(shared.clone(), None, streams);
    let public = app.layer(middleware::from_fn(gateway_link::close_participant_paths));
    let operator_stop = {
        let shared = shared.clone();
        async move { shared.stopped().await }
    };
    let stop = signals.stop(shared);
    tokio::join!(
        listen::serve_connections(listener, public, connections, stop),
        listen::serve_connections(operator, operator_app, connections, operator_stop),
    );
    Ok(())
}

/// SIGINT and SIGTERM, watched from the moment this is made.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn watch() -> Result<StopSignals, NodeError> {
        use tokio::signal::unix::{signal, SignalKind};
        let watch = |kind: SignalKind, name: &str| {
            signal(kind).map_err(NodeError::system(format!("watching {name}")))
        };
        Ok(StopSignals {
            interrupt: watch(SignalKind::interrupt(), "SIGINT")?,
            terminate: watch(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    /// Resolves on SIGINT, SIGTERM, or when the node stops for another reason (the producer
    /// failed); marks the node as stopping, which also ends the event streams.
    async fn stop(mut self, shared: Arc<Shared>) {
        tokio::select! {
            _ = self.interrupt.recv() => tracing::info!("interrupted, stopping"),
            _ = self.terminate.recv() => tracing::info!("terminated, stopping"),
            () = shared.stopped() => tracing::info!("stopping"),
        }
        shared.shut_down();
    }
}

pub fn router(
    shared: Arc<Shared>,
    limiter: Option<Arc<RateLimiter>>,
    streams: Arc<ClientSlots>,
) -> Router {
    let api = Router::new()
        .route(
            "/v1/transactions",
            post(routes::submit).layer(DefaultBodyLimit::max(routes::SUBMIT_BODY_MAX_BYTES)),
        )
        .route(
            "/v1/transactions/batch",
            post(routes::submit_batch).layer(DefaultBodyLimit::max(routes::BATCH_BODY_MAX_BYTES)),
        )
        .route("/v1/transactions/{hash}", get(routes::transaction_status))
        .route("/v1/accounts/{id}", get(routes::account))
        .route("/v1/accounts/{id}/offers", get(routes::account_offers))
        .route("/v1/books/{sell}/{buy}", get(routes::book))
        .route("/v1/blocks/{height}", get(routes::block))
        .route("/v1/blocks/{height}/raw", get(routes::block_raw))
        .route("/v1/blocks/{height}/fills", get(routes::block_fills))
        .route("/v1/payments/deposits", get(routes::payments_deposits))
        .route("/v1/payments/escrow", get(routes::payments_escrow))
        .route("/v1/offers/{id}/explain", get(explain::offer_explain))
        .route("/v1/prices", get(routes::prices))
        .route("/v1/status", get(routes::status))
        .route("/v1/assets", get(routes::assets))
        .route("/v1/gateway", get(gateway_seal::status))
        .route("/v1/node", get(routes::node))
        .route("/", get(dashboard::index))
        .route("/dashboard/{file}", get(dashboard::asset))
        .route("/v1/oracle/prices", get(routes::oracle_prices))
        .route("/v1/openapi.json", get(openapi::openapi_document))
        .route("/metrics", get(routes::metrics))
        .route(
            "/v1/gateway/seal",
            post(gateway_seal::seal)
                .layer(DefaultBodyLimit::max(gateway_link::SEAL_BODY_MAX_BYTES)),
        )
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    // Event streams are long-lived: no timeout.
    let streams = Router::new()
        .route("/v1/events", get(routes::events))
        .layer(axum::Extension(streams));
    api.merge(streams)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            count_responses,
        ))
        .layer(middleware::from_fn_with_state(limiter, rate_limit))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            gateway_seal::authenticate_link,
        ))
        // Every answer, errors and refusals included, is what its content type says: a
        // browser must never sniff an error body that echoes client input into a script.
        .layer(SetResponseHeaderLayer::overriding(
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            axum::http::HeaderValue::from_static("nosniff"),
        ))
        .with_state(shared)
}

async fn count_responses(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_string();
    let response = next.run(request).await;
    shared
        .metrics
        .count_response(&route, response.status().as_u16());
    response
}

async fn rate_limit(
    State(limiter): State<Option<Arc<RateLimiter>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(limiter) = limiter else {
        return next.run(request).await;
    };
    // The gateway's authenticated link is not a client (issue 26): never rate limited.
    if request
        .extensions()
        .get::<gateway_seal::LinkAuthenticated>()
        .is_some()
    {
        return next.run(request).await;
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    if let Some(client) = client {
        if let Err(wait) = limiter.check(client) {
            return Failure::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests from {client}; slow down"),
            )
            .retry_after(wait.as_secs_f64())
            .into_response();
        }
    }
    next.run(request).await
}
