//! The gateway's Prometheus metrics (the `prometheus` crate's classic text format, as the node's).
//! Every straggler, late trade and queue overflow is counted here and also told to the
//! participant concerned (a `Notice` frame).

use prometheus::{Encoder, IntCounter, IntGauge, Opts, Registry, TextEncoder};

pub(crate) struct GatewayMetrics {
    registry: Registry,
    pub participants_connected: IntGauge,
    pub participants_cut_off_total: IntCounter,
    pub stragglers: IntGauge,
    pub stragglers_detected_total: IntCounter,
    pub straggler_rejoins_total: IntCounter,
    pub late_trades_total: IntCounter,
    pub queue_overflows_total: IntCounter,
    pub refused_messages_total: IntCounter,
    pub handshakes_refused_total: IntCounter,
    pub bad_signatures_total: IntCounter,
    pub unknown_sources_total: IntCounter,
    pub duplicates_total: IntCounter,
    pub replays_total: IntCounter,
    pub sequence_window_total: IntCounter,
    pub busy_total: IntCounter,
    pub clock_ahead_total: IntCounter,
    pub share_full_total: IntCounter,
    pub node_retries_total: IntCounter,
    pub trades_received_total: IntCounter,
    pub heartbeats_received_total: IntCounter,
    pub blocks_sealed_total: IntCounter,
    pub trades_sealed_total: IntCounter,
    pub own_results_sent_total: IntCounter,
    pub trades_spilled_last: IntGauge,
    pub height: IntGauge,
    /// Microseconds from block N's publication to the seal of block N+1, last block.
    pub seal_wait_micros_last: IntGauge,
}

impl GatewayMetrics {
    pub(crate) fn new() -> Result<GatewayMetrics, prometheus::Error> {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| -> Result<IntCounter, prometheus::Error> {
            let c = IntCounter::with_opts(Opts::new(name, help))?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::with_opts(Opts::new(name, help))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        Ok(GatewayMetrics {
            participants_connected: gauge(
                "walras_gateway_participants_connected",
                "Participants with an open connection.",
            )?,
            participants_cut_off_total: counter(
                "walras_gateway_participants_cut_off_total",
                "Connections closed because the participant fell too far behind on its downlink.",
            )?,
            stragglers: gauge(
                "walras_gateway_stragglers",
                "Participants the gateway does not wait for now (round trip or silence over the threshold).",
            )?,
            stragglers_detected_total: counter(
                "walras_gateway_stragglers_detected_total",
                "Times a participant was declared a straggler.",
            )?,
            straggler_rejoins_total: counter(
                "walras_gateway_straggler_rejoins_total",
                "Times a straggler rejoined.",
            )?,
            late_trades_total: counter(
                "walras_gateway_late_trades_total",
                "Trades that arrived below an already sealed boundary (put into the next block, flagged).",
            )?,
            queue_overflows_total: counter(
                "walras_gateway_queue_overflows_total",
                "Trades refused because the ordering buffer was full.",
            )?,
            handshakes_refused_total: counter(
                "walras_gateway_handshakes_refused_total",
                "Connections refused at the handshake (version, unknown participant, bad signature, \
                 no Hello).",
            )?,
            bad_signatures_total: counter(
                "walras_gateway_bad_signatures_total",
                "Trades refused before the ordering buffer because their signature does not verify \
                 with the source account's key (the engine's acceptance rule).",
            )?,
            unknown_sources_total: counter(
                "walras_gateway_unknown_sources_total",
                "Trades refused before the ordering buffer because their source account does not \
                 exist at the node's tip.",
            )?,
            duplicates_total: counter(
                "walras_gateway_duplicates_total",
                "Trades refused because a transaction with the same source and sequence number \
                 waits for a block (the node's mempool rule).",
            )?,
            replays_total: counter(
                "walras_gateway_replays_total",
                "Trades refused because their sequence number was used by a committed \
                 transaction (the node's admission rule: replayed).",
            )?,
            sequence_window_total: counter(
                "walras_gateway_sequence_window_total",
                "Trades refused because their sequence number is beyond the account's window \
                 (the node's admission rule: sequence_out_of_window).",
            )?,
            busy_total: counter(
                "walras_gateway_busy_total",
                "Trades refused for now: an unknown account could not be read (node busy, or \
                 the connection's lookup budget spent).",
            )?,
            clock_ahead_total: counter(
                "walras_gateway_clock_ahead_total",
                "Messages refused because their clock names a block above the published height.",
            )?,
            share_full_total: counter(
                "walras_gateway_share_full_total",
                "Trades refused because their participant held its share of the ordering buffer.",
            )?,
            node_retries_total: counter(
                "walras_gateway_node_retries_total",
                "Sealed batches sent to the node again after a transient refusal or failure \
                 (429, 503, 408, timeout, connection refused).",
            )?,
            refused_messages_total: counter(
                "walras_gateway_refused_messages_total",
                "Uplink messages refused (sequence or clock out of order, not a transaction).",
            )?,
            trades_received_total: counter(
                "walras_gateway_trades_received_total",
                "Trades received from participants.",
            )?,
            heartbeats_received_total: counter(
                "walras_gateway_heartbeats_received_total",
                "Heartbeats received from participants.",
            )?,
            blocks_sealed_total: counter(
                "walras_gateway_blocks_sealed_total",
                "Blocks sealed and committed by the node.",
            )?,
            trades_sealed_total: counter(
                "walras_gateway_trades_sealed_total",
                "Trades in sealed blocks.",
            )?,
            own_results_sent_total: counter(
                "walras_gateway_own_results_sent_total",
                "Results of participants' own trades sent with the blocks.",
            )?,
            trades_spilled_last: gauge(
                "walras_gateway_trades_spilled_last",
                "Trades below the last boundary left for the next block (block size limit).",
            )?,
            height: gauge("walras_gateway_height", "Height of the last published block.")?,
            seal_wait_micros_last: gauge(
                "walras_gateway_seal_wait_micros_last",
                "Microseconds from block N's publication to the seal of block N+1 (last block).",
            )?,
            registry,
        })
    }

    pub(crate) fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding gauges and counters into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Serves `/metrics` on a bound listener, in its own task (a failure is logged: the gateway
/// keeps running without it).
pub(crate) fn serve_metrics(
    listener: tokio::net::TcpListener,
    metrics: std::sync::Arc<GatewayMetrics>,
) {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move { metrics.render() }
        }),
    );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!("the metrics server stopped: {error}");
        }
    });
}
