//! Booting the gateway process and the handle to a running one: checks the configuration, reads
//! the node's tip, binds the participants' listeners (TCP, WebSocket) and `/metrics`, and spawns
//! the core task ([`crate::actor`]) and the accept loops ([`crate::connection`]).
//!
//! Time is nanoseconds since the gateway started (a monotonic clock), passed into the pure core as
//! a value.

use crate::actor::{Core, CoreLinks};
use crate::config::{GatewayConfig, PARTICIPANTS_MAX};
use crate::connection::{accept_loop, ConnectionContext, Transport};
use crate::error::GatewayNetError;
use crate::journal::{Journal, ParticipantEvent, SealRecord};
use crate::metrics::{serve_metrics, GatewayMetrics};
use crate::node_link::NodeLink;
use crate::verify::{self, AccountCache, TradeChecker};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// A running gateway.
pub struct Gateway {
    pub address: SocketAddr,
    /// Where participants connect over WebSocket (`ws://ADDRESS`), if configured.
    pub ws_address: Option<SocketAddr>,
    pub metrics_address: Option<SocketAddr>,
    journal: Arc<Mutex<Journal>>,
    metrics: Arc<GatewayMetrics>,
    stop: Option<oneshot::Sender<()>>,
    core: tokio::task::JoinHandle<Result<(), GatewayNetError>>,
    accept: tokio::task::JoinHandle<()>,
    accept_ws: Option<tokio::task::JoinHandle<()>>,
    started: Instant,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.accept.abort();
        if let Some(accept) = &self.accept_ws {
            accept.abort();
        }
        self.core.abort();
    }
}

impl Gateway {
    pub fn seals(&self) -> Vec<SealRecord> {
        self.journal().seals.clone()
    }

    pub fn participant_events(&self) -> Vec<ParticipantEvent> {
        self.journal().events.clone()
    }

    pub fn metrics_text(&self) -> String {
        self.metrics.render()
    }

    /// Nanoseconds since the gateway started (the time base of [`SealRecord`]).
    pub fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Stops the gateway; returns the core's result (an error if it had stopped on one).
    pub async fn stop(mut self) -> Result<(), GatewayNetError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.accept.abort();
        if let Some(accept) = &self.accept_ws {
            accept.abort();
        }
        (&mut self.core)
            .await
            .map_err(|e| GatewayNetError::Stopped(e.to_string()))?
    }

    /// Resolves when the gateway stops by itself (an error: the node refused a batch, or the link
    /// failed for good).
    pub async fn wait(mut self) -> Result<(), GatewayNetError> {
        (&mut self.core)
            .await
            .map_err(|e| GatewayNetError::Stopped(e.to_string()))?
    }
}

/// Starts the gateway: checks the configuration, reads the node's tip, binds the participants'
/// listener (and `/metrics`), and runs until stopped.
pub async fn start(config: GatewayConfig) -> Result<Gateway, GatewayNetError> {
    if config.participant_keys.is_empty() {
        return Err(GatewayNetError::Config("at least one participant".into()));
    }
    if config.participant_keys.len() > PARTICIPANTS_MAX {
        return Err(GatewayNetError::Config(format!(
            "{} participants: at most {PARTICIPANTS_MAX}",
            config.participant_keys.len()
        )));
    }
    if config.window.is_zero() || config.block_trades_max == 0 {
        return Err(GatewayNetError::Config(
            "the window and the block size must be positive".into(),
        ));
    }
    let node = Arc::new(NodeLink::new(&config.node_url, config.key.clone())?);
    let tip = node.status_height().await?;
    let (listener, address) = bind(&config.listen).await?;
    let ws = match &config.listen_ws {
        Some(listen) => Some(bind(listen).await?),
        None => None,
    };
    let accounts = Arc::new(AccountCache::new(
        verify::ACCOUNTS_CACHED_MAX,
        verify::UNKNOWN_CACHED_MAX,
    ));
    accounts.note_block(tip, &[], false);
    let checker = Arc::new(TradeChecker::new(node.clone(), accounts.clone()));
    let metrics = Arc::new(
        GatewayMetrics::new().map_err(|e| GatewayNetError::Config(format!("metrics: {e}")))?,
    );
    let metrics_address = match &config.metrics_listen {
        Some(listen) => {
            let (listener, address) = bind(listen).await?;
            serve_metrics(listener, metrics.clone());
            Some(address)
        }
        None => None,
    };
    let started = Instant::now();
    let journal = Arc::new(Mutex::new(Journal::default()));
    let (inputs, receiver) = mpsc::channel(65_536);
    let (stop, stopped) = oneshot::channel();
    let links = CoreLinks {
        node,
        accounts,
        metrics: metrics.clone(),
        journal: journal.clone(),
        inputs: inputs.clone(),
    };
    let mut core = Core::new(config.clone(), tip, started, links)?;
    let context = ConnectionContext {
        inputs,
        config: config.clone(),
        started,
        metrics: metrics.clone(),
        checker,
    };
    let ws_address = ws.as_ref().map(|(_, address)| *address);
    let accept_ws = ws.map(|(listener, _)| {
        tokio::spawn(accept_loop(listener, Transport::WebSocket, context.clone()))
    });
    let accept = tokio::spawn(accept_loop(listener, Transport::Tcp, context));
    let task = tokio::spawn(async move { core.run(receiver, stopped).await });
    tracing::info!(
        "walras gateway listening on {address}{} for {} participants, node {} at height {tip}",
        ws_address.map_or(String::new(), |ws| format!(" (WebSocket: ws://{ws})")),
        config.participants(),
        config.node_url
    );
    Ok(Gateway {
        address,
        ws_address,
        metrics_address,
        journal,
        metrics,
        stop: Some(stop),
        core: task,
        accept,
        accept_ws,
        started,
    })
}

async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), GatewayNetError> {
    let error = |cause| GatewayNetError::Listen {
        address: listen.into(),
        cause,
    };
    let listener = TcpListener::bind(listen).await.map_err(error)?;
    let address = listener.local_addr().map_err(error)?;
    Ok((listener, address))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CutMode;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    /// How long the stand-in node takes to commit a block.
    const COMMIT_TIME: Duration = Duration::from_millis(300);

    /// Trigger: CI's gateway test read the node's tip right after stopping the gateway, then
    /// restarted the node and found one block more (38 against 37). The stop dropped the core
    /// while a sealed batch's request was on its way; the request went on and the node
    /// committed the block after the stop had returned. A stop now waits for the answer to a
    /// batch already sent, and seals nothing more.
    #[tokio::test]
    async fn a_stopped_gateway_has_its_last_sealed_batch_answered_and_sends_no_more() {
        let owner = walras_crypto::Keypair::from_seed([4; 32]).public_key();
        let (url, received, answered) = crate::node_link::stand_in_node(COMMIT_TIME, owner).await;
        let mut config = GatewayConfig::new(
            &url,
            walras_crypto::Keypair::from_seed([3; 32]),
            vec![walras_crypto::Keypair::from_seed([4; 32]).public_key()],
        );
        config.cut = CutMode::Timer {
            interval: Duration::from_millis(5),
        };
        let gateway = start(config).await.expect("the gateway starts");
        let waited = Instant::now();
        while received.load(Ordering::SeqCst) == 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "no batch sealed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        gateway.stop().await.expect("a clean stop");
        let sent = received.load(Ordering::SeqCst);
        assert_eq!(
            answered.load(Ordering::SeqCst),
            sent,
            "every batch sent was answered before the stop returned"
        );
        tokio::time::sleep(COMMIT_TIME * 2).await;
        assert_eq!(
            received.load(Ordering::SeqCst),
            sent,
            "nothing sealed after the stop"
        );
        assert_eq!(answered.load(Ordering::SeqCst), sent);
    }
}
