//! `walras node`: opens the store (or creates it, only in a directory without one and only from
//! a named genesis), recovers the state from its newest checkpoint and the blocks after it,
//! checking each state root, then serves the HTTP API while blocks are ordered either
//! by a solo producer thread that cuts, executes and durably commits them ([`Consensus::Solo`],
//! the embedded default) or by CometBFT through the ABCI++ app ([`cometbft`]).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod admission;
pub mod cometbft;
mod config;
mod dashboard;
mod error;
mod explain;
mod failure;
mod gateway_link;
mod gateway_seal;
mod genesis;
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
mod recovery;
mod router;
mod routes;
mod serve;

pub use config::{
    Consensus, DevGenesisBuildError, DevGenesisBuilder, GenesisSource, NodeConfig, ServeLimits,
};
pub use error::NodeError;
pub use gateway_link::GatewayLinkConfig;
pub use genesis::{create_store, genesis_hash};
pub use listen::CONNECTIONS_MAX_DEFAULT;
pub use node::ProducerError;
pub use oracle::{OracleSettings, OracleSource, WarmStart};
pub use router::router;

use config::{proposer_engine_config, recovery_engine_config};
use listen::ConnectionLimits;
use node::{ProducerConfig, Shared};
use recovery::open_and_recover;
use serve::{bind_api, serve, serve_on};
use std::sync::Arc;
use std::time::Duration;

/// How long the runtime waits for blocking tasks (signature checks) once the server stopped.
const RUNTIME_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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
