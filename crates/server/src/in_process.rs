//! A node inside the calling process, for tests of the programs that talk to one (the CLI's
//! query and transaction logic, the load generator): the same store, recovery, mempool,
//! admission and solo producer as `walras node`, and the same axum [`Router`] answering, but no
//! socket, no signal handlers and no child process. `walras_testkit::InProcessNode` drives the
//! router with `tower::ServiceExt::oneshot` behind `walras_client::NodeApi`.
//!
//! Why the router and not direct calls into the node's functions: the router is where the
//! JSON and binary codecs, the body limits, the request timeout, the rate limit, the event
//! stream's slots and the error bodies are, so a caller in process goes through exactly what
//! an HTTP caller does; only the connection loop (`listen`: header timeout, connection cap,
//! graceful shutdown) is left out, and its tests stay process-level.

use crate::config::{Consensus, NodeConfig};
use crate::limits::{ClientSlots, RateLimiter};
use crate::node::{ProducerError, Shared};
use crate::recovery::open_and_recover;
use crate::router::router;
use crate::{routes, spawn_producer, NodeError};
use axum::Router;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A running node without a listener. Dropping it stops the producer (see [`InProcess::stop`]).
pub struct InProcess {
    shared: Arc<Shared>,
    router: Router,
    producer: Option<JoinHandle<Result<(), ProducerError>>>,
}

impl InProcess {
    /// Opens (or creates) the store in `config.data_dir` and recovers it exactly as `walras
    /// node` does, then starts the solo producer. Only solo consensus without an oracle is
    /// offered: CometBFT and the gateway link need their processes, and the oracle's feed
    /// thread is the process's.
    pub fn start(config: &NodeConfig) -> Result<InProcess, NodeError> {
        if !matches!(config.consensus, Consensus::Solo) {
            return Err(NodeError::Config(
                "the in-process node runs solo consensus only".into(),
            ));
        }
        if config.oracle.is_some() {
            return Err(NodeError::Config(
                "the in-process node runs without the oracle".into(),
            ));
        }
        let shared = Arc::new(open_and_recover(config)?);
        let producer = spawn_producer(config, shared.clone())?;
        let limiter =
            RateLimiter::new(config.rate_limit_rps, config.rate_limit_burst).map(Arc::new);
        let streams = Arc::new(ClientSlots::new(
            config.serve.event_streams_per_client_max,
            routes::SSE_SUBSCRIBERS_MAX,
        ));
        let router = router(shared.clone(), limiter, streams);
        Ok(InProcess {
            shared,
            router,
            producer: Some(producer),
        })
    }

    /// The node's API, as `walras node` serves it. Requests need a `ConnectInfo<SocketAddr>`
    /// extension (the listener adds the peer's address; the rate limit and the event
    /// stream's per-client slots read it).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The height of the last committed (durable) block.
    pub fn height(&self) -> u64 {
        self.shared.tip().height
    }

    /// Stops the producer (after the block it is cutting, if any) and ends the event streams;
    /// returns the producer's failure, if it had one.
    pub fn stop(mut self) -> Result<(), NodeError> {
        self.stop_producer()
    }

    fn stop_producer(&mut self) -> Result<(), NodeError> {
        self.shared.shut_down();
        match self.producer.take() {
            Some(producer) => {
                let produced = producer.join().map_err(|_| NodeError::ProducerPanicked)?;
                Ok(produced?)
            }
            None => Ok(()),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Err(error) = self.stop_producer() {
            tracing::warn!("the in-process node's producer failed: {error}");
        }
    }
}
