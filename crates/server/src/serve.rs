//! Serving the API: binding, announcing the address on stdout, the public and (in gateway mode)
//! operator listeners, and stopping on SIGINT, SIGTERM or a producer failure.

use crate::gateway_link;
use crate::limits::{ClientSlots, RateLimiter};
use crate::listen::{self, ConnectionLimits};
use crate::node::Shared;
use crate::router::router;
use crate::routes;
use crate::{NodeConfig, NodeError};
use axum::middleware;
use std::sync::Arc;

/// Binds, announces the address on stdout, and serves until shutdown; returns within the
/// grace period of the stop, whatever clients hold open.
pub(crate) async fn serve(
    config: &NodeConfig,
    connections: &ConnectionLimits,
    shared: Arc<Shared>,
) -> Result<(), NodeError> {
    let listener = bind_api(config).await?;
    serve_on(listener, config, connections, shared).await
}

/// Binds the API's listening socket.
pub(crate) async fn bind_api(config: &NodeConfig) -> Result<tokio::net::TcpListener, NodeError> {
    tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|source| NodeError::Bind {
            address: config.listen.to_string(),
            source,
        })
}

/// Serves the API on a bound `listener` until shutdown.
pub(crate) async fn serve_on(
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
