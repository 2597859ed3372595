//! `walras node`: opens (or creates) the store, recovers the state by replaying every stored
//! block and checking its state root, then serves the HTTP API while blocks are ordered either
//! by a solo producer thread that cuts, executes and durably commits them ([`Consensus::Solo`],
//! the embedded default) or by CometBFT through the ABCI++ app ([`cometbft`]).

mod admission;
pub mod cometbft;
mod failure;
mod limits;
pub mod mempool;
mod metrics;
mod node;
mod openapi;
mod recent;
mod routes;

use crate::api::wire::DevGenesisJson;
use axum::extract::{ConnectInfo, DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use failure::Failure;
use limits::RateLimiter;
use node::{ProducerConfig, Shared, Tip};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tower_http::timeout::TimeoutLayer;
use walras_engine::block::transaction_hash;
use walras_engine::{EngineConfig, ExchangeState};
use walras_store::{recover_store_with, BlockStore};
use walras_types::Genesis;

/// The key under which the store keeps a development genesis's parameters.
const DEV_GENESIS_META_KEY: &str = "dev_genesis";
/// Requests (other than event streams) that take longer are answered 408.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stopping node waits for open requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Where the genesis of a new store comes from.
#[derive(Clone, Debug)]
pub enum GenesisSource {
    /// A genesis file (`Genesis::encode`).
    File(PathBuf),
    /// A generated development genesis whose keys anyone can derive.
    Dev(DevGenesisJson),
}

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub data_dir: PathBuf,
    pub listen: String,
    /// Used only when the store is new.
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
}

/// Who orders blocks.
#[derive(Clone, Debug)]
pub enum Consensus {
    /// This process cuts blocks itself (the embedded default).
    Solo,
    /// CometBFT does; this node is its ABCI++ application.
    Cometbft(cometbft::CometbftConfig),
}

/// Why the node could not start or stopped.
#[derive(Debug)]
pub struct NodeError(pub String);

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NodeError {}

fn error(context: &str) -> impl Fn(&dyn std::fmt::Display) -> NodeError + '_ {
    move |cause| NodeError(format!("{context}: {cause}"))
}

/// Runs the node until SIGINT or SIGTERM (exit cleanly) or a producer failure (an error).
pub fn run(config: NodeConfig) -> Result<(), NodeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads.clamp(2, 8))
        // Signature checks of batch submissions run here: no more of them than cores.
        .max_blocking_threads(config.threads.max(2))
        .enable_all()
        .build()
        .map_err(|cause| error("starting the async runtime")(&cause))?;
    let shared = Arc::new(open_and_recover(&config)?);
    let result = match &config.consensus {
        Consensus::Solo => run_solo(&config, shared, &runtime),
        Consensus::Cometbft(cometbft) => run_replicated(&config, cometbft, shared, &runtime),
    };
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
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

/// Solo mode: a producer thread cuts, executes and stores blocks.
fn run_solo(
    config: &NodeConfig,
    shared: Arc<Shared>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), NodeError> {
    let producer_config = ProducerConfig {
        block_interval: config.block_interval,
        max_block_txs: config.max_block_txs,
        engine: proposer_engine_config(config),
    };
    let producer_shared = shared.clone();
    let producer = std::thread::Builder::new()
        .name("producer".into())
        .spawn(move || {
            // Whatever stops the producer, a panic included, stops the server too: a node
            // that admits transactions it will never commit must not keep serving.
            let _stop_server = StopOnDrop(producer_shared.clone());
            node::run_producer(&producer_shared, &producer_config)
        })
        .map_err(|cause| error("starting the block producer")(&cause))?;
    let served = runtime.block_on(serve(config, shared.clone()));
    shared.shut_down();
    let produced = producer
        .join()
        .map_err(|_| NodeError("the block producer panicked".into()))?;
    served?;
    produced.map_err(|cause| NodeError(cause.to_string()))?;
    eprintln!("walras node: stopped at height {}", shared.tip().height);
    Ok(())
}

/// Replicated mode: CometBFT orders blocks through the ABCI app.
fn run_replicated(
    config: &NodeConfig,
    cometbft: &cometbft::CometbftConfig,
    shared: Arc<Shared>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), NodeError> {
    let running = cometbft::start(&shared, cometbft, replicated_app_config(config), runtime)?;
    let served = runtime.block_on(serve(config, shared.clone()));
    shared.shut_down();
    let stopped = running.stop();
    served?;
    stopped?;
    eprintln!("walras node: stopped at height {}", shared.tip().height);
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
        // transaction that recovery would drop (admission verified it too, by the same rule).
        verify_signatures: true,
        ..EngineConfig::default()
    };
    engine.clearing.timeout = config.clearing_timeout;
    engine.clearing.max_iterations = u64::MAX;
    engine.clearing.threads = config.threads;
    engine
}

fn recovery_engine_config(config: &NodeConfig) -> EngineConfig {
    EngineConfig {
        threads: config.threads,
        verify_signatures: true,
        ..EngineConfig::default()
    }
}

/// Opens the store (initialising a new one), replays it, and builds the shared state.
fn open_and_recover(config: &NodeConfig) -> Result<Shared, NodeError> {
    let store = BlockStore::open(&config.data_dir).map_err(|cause| {
        error(&format!(
            "opening the store in {}",
            config.data_dir.display()
        ))(&cause)
    })?;
    let dev_genesis = initialise(&store, config)?;
    let genesis = store
        .genesis()
        .map_err(|cause| error("reading the genesis")(&cause))?
        .ok_or_else(|| NodeError("the store has no genesis after initialising it".into()))?;
    let last_height = store
        .last_height()
        .map_err(|cause| error("reading the block log")(&cause))?;
    eprintln!(
        "walras node: replaying {last_height} blocks from {} ({} accounts, {} assets)",
        config.data_dir.display(),
        genesis.accounts.len(),
        genesis.assets
    );
    let started = Instant::now();
    let mut recent = recent::RecentTransactions::new(recent::RECENT_TRANSACTIONS_MIN);
    let mut last_report = Instant::now();
    let mut state = recover_store_with(
        &store,
        &recovery_engine_config(config),
        config.threads,
        |block, outcome| {
            let hashes = block.transactions.iter().map(transaction_hash).collect();
            recent.insert_block(block.header.height, hashes, &outcome.dropped);
            if last_report.elapsed() > Duration::from_secs(2) {
                eprintln!(
                    "walras node: replayed {} of {last_height} blocks",
                    block.header.height
                );
                last_report = Instant::now();
            }
        },
    )
    .map_err(|cause| error("recovering the state from the store")(&cause))?;
    let tip = recovered_tip(&store, &mut state, config.threads)?;
    eprintln!(
        "walras node: recovered height {} state root {} in {:.1} s",
        tip.height,
        tip.state_root,
        started.elapsed().as_secs_f64()
    );
    Ok(Shared {
        assets: state.assets() as u16,
        state: tokio::sync::RwLock::new(state),
        mempool: Mutex::new(mempool::Mempool::new(config.mempool_capacity)),
        producer_wake: Condvar::new(),
        store,
        recent: Mutex::new(recent),
        tip: RwLock::new(tip),
        events: broadcast::channel(1024).0,
        metrics: metrics::Metrics::default(),
        dev_genesis,
        max_block_txs: config.max_block_txs,
        shutting_down: AtomicBool::new(false),
    })
}

/// Stores the genesis in a new store; returns the development genesis parameters, if the
/// store was (now or earlier) created from one.
fn initialise(
    store: &BlockStore,
    config: &NodeConfig,
) -> Result<Option<DevGenesisJson>, NodeError> {
    let existing = store
        .genesis()
        .map_err(|cause| error("reading the genesis")(&cause))?;
    if existing.is_none() {
        let genesis = match &config.genesis {
            GenesisSource::File(path) => read_genesis_file(path)?,
            GenesisSource::Dev(dev) => {
                eprintln!(
                    "walras node: new store, generating a development genesis ({} accounts, {} assets, seed {}; its keys are public: for tests only)",
                    dev.accounts, dev.assets, dev.seed
                );
                let json = serde_json::to_vec(dev)
                    .map_err(|cause| error("encoding dev genesis")(&cause))?;
                store
                    .put_app_meta(DEV_GENESIS_META_KEY, &json)
                    .map_err(|cause| error("storing the dev genesis parameters")(&cause))?;
                crate::api::dev_genesis(dev, config.threads)
                    .map_err(|cause| error("generating the dev genesis")(&cause))?
            }
        };
        store
            .init(&genesis)
            .map_err(|cause| error("storing the genesis")(&cause))?;
    }
    let stored = store
        .app_meta(DEV_GENESIS_META_KEY)
        .map_err(|cause| error("reading the dev genesis parameters")(&cause))?;
    stored
        .map(|bytes| serde_json::from_slice(&bytes))
        .transpose()
        .map_err(|cause| error("decoding the dev genesis parameters")(&cause))
}

fn read_genesis_file(path: &std::path::Path) -> Result<Genesis, NodeError> {
    let bytes = std::fs::read(path)
        .map_err(|cause| error(&format!("reading genesis file {}", path.display()))(&cause))?;
    Genesis::decode(&bytes)
        .map_err(|cause| error(&format!("genesis file {}", path.display()))(&cause))
}

fn recovered_tip(
    store: &BlockStore,
    state: &mut ExchangeState,
    threads: usize,
) -> Result<Tip, NodeError> {
    let height = state.height();
    if height == 0 {
        return Ok(Tip {
            state_root: state.state_root(threads),
            ..Tip::default()
        });
    }
    let block = store
        .block(height)
        .map_err(|cause| error("reading the last block")(&cause))?
        .ok_or_else(|| NodeError(format!("block {height} vanished from the store")))?;
    Ok(Tip {
        height,
        block_hash: block.header.hash(),
        state_root: block.header.state_root,
        valuations: block.header.valuations.clone(),
    })
}

/// Binds, announces the address on stdout, and serves until shutdown.
async fn serve(config: &NodeConfig, shared: Arc<Shared>) -> Result<(), NodeError> {
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|cause| error(&format!("listening on {}", config.listen))(&cause))?;
    let address = listener
        .local_addr()
        .map_err(|cause| error("reading the bound address")(&cause))?;
    // The first line on stdout: scripts and tests wait for it.
    println!("walras node listening on http://{address}");
    eprintln!("walras node: API at http://{address}/v1 (document: /v1/openapi.json)");
    let limiter = (config.rate_limit_rps > 0).then(|| {
        Arc::new(Mutex::new(RateLimiter::new(
            config.rate_limit_rps,
            config.rate_limit_burst,
        )))
    });
    let app = router(shared.clone(), limiter);
    let stop = shutdown_signal(shared.clone());
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop)
    .await
    .map_err(|cause| error("serving HTTP")(&cause))
}

/// Resolves on SIGINT, SIGTERM, or when the producer stopped.
async fn shutdown_signal(shared: Arc<Shared>) {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(cause) => {
                eprintln!("walras node: cannot watch SIGTERM ({cause}); stop with SIGINT");
                let _ = interrupt.await;
                return;
            }
        };
    let producer_stopped = async {
        while !shared.is_shutting_down() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        _ = interrupt => {},
        _ = terminate.recv() => {},
        _ = producer_stopped => {},
    }
    eprintln!("walras node: stopping");
    shared.shut_down();
}

pub fn router(shared: Arc<Shared>, limiter: Option<Arc<Mutex<RateLimiter>>>) -> Router {
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
        .route("/v1/prices", get(routes::prices))
        .route("/v1/status", get(routes::status))
        .route("/v1/openapi.json", get(routes::openapi_document))
        .route("/metrics", get(routes::metrics))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    // Event streams are long-lived: no timeout.
    let streams = Router::new().route("/v1/events", get(routes::events));
    api.merge(streams)
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            count_responses,
        ))
        .layer(middleware::from_fn_with_state(limiter, rate_limit))
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
    State(limiter): State<Option<Arc<Mutex<RateLimiter>>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(limiter) = limiter else {
        return next.run(request).await;
    };
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    if let Some(client) = client {
        let verdict = limiter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .check(client, Instant::now());
        if let Err(wait_s) = verdict {
            return Failure::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests from {client}; slow down"),
            )
            .retry_after(wait_s)
            .into_response();
        }
    }
    next.run(request).await
}
