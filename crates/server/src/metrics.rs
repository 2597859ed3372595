//! Prometheus metrics, kept by the `prometheus` crate and written by its text encoder (the
//! classic text format, `text/plain; version=0.0.4`): each family's `# HELP`, `# TYPE` and
//! samples under the same names, types, labels and help texts as before.
//!
//! Why `prometheus` rather than `prometheus-client`: the latter writes OpenMetrics, where a
//! counter's family is named without `_total` (`# TYPE walras_blocks counter` above the sample
//! `walras_blocks_total`) and help texts get a `.` appended; `prometheus` keeps the exposition
//! byte for byte.
//!
//! What differs from the hand-written text it replaces: a labelled counter with no sample yet
//! (`walras_transactions_dropped_total` before any drop) is left out, header included, as the
//! crate's encoder refuses an empty family; and the seconds counters add up `f64` seconds
//! rather than whole microseconds, so their last digits may differ.

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, TextEncoder,
};

/// Every metric this node exposes. Counters only go up; gauges are set.
pub struct Metrics {
    pub height: IntGauge,
    pub blocks_total: IntCounter,
    pub transactions_committed_total: IntCounter,
    pub transactions_accepted_total: IntCounter,
    pub transactions_admitted_total: IntCounter,
    pub block_execute_seconds_total: prometheus::Counter,
    pub block_persist_seconds_total: prometheus::Counter,
    pub block_publish_seconds_total: prometheus::Counter,
    pub block_transactions_last: IntGauge,
    pub sse_subscribers: IntGauge,
    /// Replicated mode: proposals this node built, their clearing time, proposals it rejected,
    /// and transactions CometBFT refused after admission here.
    pub proposals_total: IntCounter,
    pub proposal_micros_total: IntCounter,
    pub proposals_rejected_total: IntCounter,
    pub proposal_check_micros_total: IntCounter,
    pub forward_refused_total: IntCounter,
    /// Admission under overload ([`crate::overload`]): the commit-rate estimate, the largest
    /// age at commit of a block's oldest transaction, blocks that committed one later than the
    /// bound, and admitted transactions dropped unproposed, by reason.
    pub commit_rate_tx_per_s: IntGauge,
    pub commit_age_max_ms: IntGauge,
    pub blocks_committed_late_total: IntCounter,
    shed_total: IntCounterVec,
    /// Blocks whose clearing this node computed, how many converged, their iterations and
    /// clearing time, and the last one's unrealized/realized utility ratio.
    clearing_blocks_total: IntCounter,
    clearing_converged_total: IntCounter,
    clearing_iterations_total: IntCounter,
    clearing_seconds_total: prometheus::Counter,
    clearing_unrealized_utility_ratio: Gauge,
    /// Set from the mempool when the metrics are read.
    mempool_transactions: IntGauge,
    mempool_capacity: IntGauge,
    dropped_total: IntCounterVec,
    rejected_total: IntCounterVec,
    responses_total: IntCounterVec,
    /// Blocks this node proposed, by where their tâtonnement started (fit, previous, oracle).
    warm_start_total: IntCounterVec,
    /// Memory accounted for (issue 32), set after each committed block: what the state holds,
    /// the recent-transaction index, the offer index's entries waiting in memory, the store's
    /// file and the newest checkpoint.
    pub state_accounts: IntGauge,
    pub state_open_offers: IntGauge,
    /// Bytes the state holds, by part ([`MEMORY_PARTS`]; `walras_engine::StateMemory`).
    pub state_memory_bytes: IntGaugeVec,
    pub recent_index_transactions: IntGauge,
    pub offer_index_pending_entries: IntGauge,
    pub store_file_bytes: IntGauge,
    pub checkpoint_height: IntGauge,
    pub checkpoint_file_bytes: IntGauge,
    pub checkpoint_buffer_bytes: IntGauge,
    pub recent_index_bytes: IntGauge,
    pub mapped_resident_bytes: IntGauge,
    /// The process's resident and virtual memory, CPU seconds, open files and start time, as
    /// every Prometheus client exposes them (`process_resident_memory_bytes`, ...): what the
    /// node's memory is beside what its state holds (issue 32). Linux only: read from /proc.
    #[cfg(target_os = "linux")]
    process: prometheus::process_collector::ProcessCollector,
}

/// Adds a duration as seconds.
pub(crate) fn add_seconds(counter: &prometheus::Counter, duration: std::time::Duration) {
    counter.inc_by(duration.as_secs_f64());
}

/// The parts of `walras_state_memory_bytes`: `walras_engine::StateMemory`'s fields, and the
/// public keys decoded for signature checks (each account that signed since the start).
pub(crate) const MEMORY_PARTS: [&str; 6] = [
    "accounts",
    "account_index",
    "account_trie",
    "offer_tries",
    "books",
    "decoded_keys",
];

/// `family` with a sample for every part at 0: an operator sees every part from the start.
fn memory_parts(family: IntGaugeVec) -> IntGaugeVec {
    for part in MEMORY_PARTS {
        family.with_label_values(&[part]).set(0);
    }
    family
}

/// A count or size as a gauge value (saturating: gauges are `i64`).
pub(crate) fn gauge_value(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

impl Metrics {
    /// Fails only on an invalid metric name or label, which the names below are not (a test
    /// builds them).
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let counter = |name: &str, help: &str| IntCounter::new(name, help);
        let gauge = |name: &str, help: &str| IntGauge::new(name, help);
        let seconds = |name: &str, help: &str| prometheus::Counter::new(name, help);
        let labelled = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels)
        };
        Ok(Metrics {
            height: gauge("walras_height", "Height of the last committed block.")?,
            blocks_total: counter("walras_blocks_total", "Blocks committed by this process.")?,
            transactions_committed_total: counter(
                "walras_transactions_committed_total",
                "Transactions included in committed blocks (accepted or dropped).",
            )?,
            transactions_accepted_total: counter(
                "walras_transactions_accepted_total",
                "Transactions that took effect.",
            )?,
            transactions_admitted_total: counter(
                "walras_transactions_admitted_total",
                "Transactions admitted to the mempool.",
            )?,
            clearing_blocks_total: counter(
                "walras_clearing_blocks_total",
                "Blocks whose clearing this node computed.",
            )?,
            clearing_converged_total: counter(
                "walras_clearing_converged_total",
                "Of those, clearings that converged (mu-complete).",
            )?,
            clearing_iterations_total: counter(
                "walras_clearing_iterations_total",
                "Tatonnement iterations of those clearings.",
            )?,
            clearing_seconds_total: seconds(
                "walras_clearing_seconds_total",
                "Price computation and settlement time of those clearings.",
            )?,
            clearing_unrealized_utility_ratio: Gauge::new(
                "walras_clearing_unrealized_utility_ratio",
                "Unrealized over realized utility of the last clearing this node computed.",
            )?,
            proposals_total: counter(
                "walras_proposals_total",
                "Proposals built by this node (replicated mode).",
            )?,
            proposal_micros_total: counter(
                "walras_proposal_micros_total",
                "Time spent clearing proposals, in microseconds (replicated mode).",
            )?,
            proposal_check_micros_total: counter(
                "walras_proposal_check_micros_total",
                "Time spent checking proposals in ProcessProposal, in microseconds (replicated mode).",
            )?,
            proposals_rejected_total: counter(
                "walras_proposals_rejected_total",
                "Proposals this node rejected in ProcessProposal (replicated mode).",
            )?,
            forward_refused_total: counter(
                "walras_forward_refused_total",
                "Admitted transactions CometBFT refused or that never committed (replicated mode).",
            )?,
            commit_rate_tx_per_s: gauge(
                "walras_commit_rate_tx_per_s",
                "Commit rate admission goes by: moving average over recent blocks, per second.",
            )?,
            commit_age_max_ms: gauge(
                "walras_commit_age_max_ms",
                "Largest age at commit of an admitted transaction (the oldest of each block), in milliseconds.",
            )?,
            blocks_committed_late_total: counter(
                "walras_blocks_committed_late_total",
                "Blocks that committed a transaction admitted longer than the commit bound ago.",
            )?,
            shed_total: labelled(
                "walras_transactions_shed_total",
                "Admitted transactions dropped before any block proposed them, by reason.",
                &["reason"],
            )?,
            block_execute_seconds_total: seconds(
                "walras_block_execute_seconds_total",
                "Time spent executing blocks (signatures to state root).",
            )?,
            block_persist_seconds_total: seconds(
                "walras_block_persist_seconds_total",
                "Time spent committing blocks to the store (synchronous).",
            )?,
            block_publish_seconds_total: seconds(
                "walras_block_publish_seconds_total",
                "Time spent reporting committed blocks to admission (account view, mempool).",
            )?,
            block_transactions_last: gauge(
                "walras_block_transactions",
                "Transactions in the last committed block.",
            )?,
            mempool_transactions: gauge("walras_mempool_transactions", "Transactions pending.")?,
            mempool_capacity: gauge("walras_mempool_capacity", "Most transactions pending.")?,
            sse_subscribers: gauge("walras_sse_subscribers", "Open event streams.")?,
            dropped_total: labelled(
                "walras_transactions_dropped_total",
                "Transactions in blocks that took no effect, by reason.",
                &["reason"],
            )?,
            rejected_total: labelled(
                "walras_admission_rejected_total",
                "Submissions refused, by error code.",
                &["code"],
            )?,
            responses_total: labelled(
                "walras_http_responses_total",
                "HTTP responses by route and status.",
                &["route", "status"],
            )?,
            warm_start_total: labelled(
                "walras_warm_start_total",
                "Blocks this node cut, by where tatonnement started (fit, previous, oracle).",
                &["start"],
            )?,
            state_accounts: gauge("walras_state_accounts", "Accounts in the exchange state.")?,
            state_open_offers: gauge(
                "walras_state_open_offers",
                "Open offers in the exchange state (each in its book and its pair's trie).",
            )?,
            state_memory_bytes: memory_parts(IntGaugeVec::new(
                Opts::new(
                    "walras_state_memory_bytes",
                    "Bytes the exchange state holds in memory, by part, from its structures' sizes and counts (below the process's resident memory by the allocator's rounding and free pages, the account views' copies and the server's indexes).",
                ),
                &["part"],
            )?),
            recent_index_transactions: gauge(
                "walras_recent_index_transactions",
                "Committed transactions indexed for status queries.",
            )?,
            offer_index_pending_entries: gauge(
                "walras_offer_index_pending_entries",
                "Entries of the store's per-offer index held in memory until their slice is written (at most 32 blocks' entries).",
            )?,
            store_file_bytes: gauge(
                "walras_store_file_bytes",
                "Size of the store's data.mdb (the mapped file: blocks, indexes, checkpoints written with a block).",
            )?,
            checkpoint_height: gauge(
                "walras_checkpoint_height",
                "Height of the newest checkpoint this process wrote in the background.",
            )?,
            checkpoint_file_bytes: gauge(
                "walras_checkpoint_file_bytes",
                "Bytes of the checkpoint files beside data.mdb (the newest two background checkpoints and the spare the next is written over).",
            )?,
            recent_index_bytes: gauge(
                "walras_recent_index_bytes",
                "Bytes of the recent-transaction index (its map and per-block lists, at their capacities).",
            )?,
            mapped_resident_bytes: gauge(
                "walras_mapped_resident_bytes",
                "Resident bytes of mapped files (RssFile: pages of the store's data.mdb and checkpoint files the node touched, and its binary); page cache the kernel can take back. Linux only.",
            )?,
            checkpoint_buffer_bytes: gauge(
                "walras_checkpoint_buffer_bytes",
                "Bytes of the buffer the background checkpoint writer keeps between checkpoints (about the last checkpoint's size; memory outside the state).",
            )?,
            #[cfg(target_os = "linux")]
            process: prometheus::process_collector::ProcessCollector::for_self(),
        })
    }

    /// The metrics in exposition order (the order of the text before this crate was used).
    fn collectors(&self) -> [&dyn Collector; 41] {
        [
            &self.height,
            &self.blocks_total,
            &self.transactions_committed_total,
            &self.transactions_accepted_total,
            &self.transactions_admitted_total,
            &self.clearing_blocks_total,
            &self.clearing_converged_total,
            &self.clearing_iterations_total,
            &self.clearing_seconds_total,
            &self.clearing_unrealized_utility_ratio,
            &self.proposals_total,
            &self.proposal_micros_total,
            &self.proposal_check_micros_total,
            &self.proposals_rejected_total,
            &self.forward_refused_total,
            &self.block_execute_seconds_total,
            &self.block_persist_seconds_total,
            &self.block_publish_seconds_total,
            &self.block_transactions_last,
            &self.mempool_transactions,
            &self.mempool_capacity,
            &self.sse_subscribers,
            &self.dropped_total,
            &self.rejected_total,
            &self.responses_total,
            &self.warm_start_total,
            &self.state_accounts,
            &self.state_open_offers,
            &self.state_memory_bytes,
            &self.recent_index_transactions,
            &self.offer_index_pending_entries,
            &self.store_file_bytes,
            &self.checkpoint_height,
            &self.checkpoint_file_bytes,
            &self.checkpoint_buffer_bytes,
            &self.recent_index_bytes,
            &self.mapped_resident_bytes,
            &self.commit_rate_tx_per_s,
            &self.commit_age_max_ms,
            &self.blocks_committed_late_total,
            &self.shed_total,
        ]
    }

    pub fn count_dropped(&self, reason: &'static str) {
        self.dropped_total.with_label_values(&[reason]).inc();
    }

    pub fn count_warm_start(&self, start: &'static str) {
        self.warm_start_total.with_label_values(&[start]).inc();
    }

    pub fn count_shed(&self, reason: &'static str, count: usize) {
        self.shed_total
            .with_label_values(&[reason])
            .inc_by(count as u64);
    }

    pub fn count_rejected(&self, code: &'static str) {
        self.count_rejected_many(code, 1);
    }

    /// `count` submissions refused with `code` at once (a bundle's new transactions).
    pub fn count_rejected_many(&self, code: &'static str, count: usize) {
        self.rejected_total
            .with_label_values(&[code])
            .inc_by(count as u64);
    }

    pub fn count_proposal(&self, clearing: std::time::Duration) {
        self.proposals_total.inc();
        self.proposal_micros_total
            .inc_by(u64::try_from(clearing.as_micros()).unwrap_or(u64::MAX));
    }

    /// Records the quality of one clearing this node computed.
    pub fn count_clearing(&self, converged: bool, iterations: u64, millis: f64, unrealized: f64) {
        self.clearing_blocks_total.inc();
        self.clearing_converged_total.inc_by(u64::from(converged));
        self.clearing_iterations_total.inc_by(iterations);
        // `max` also turns a NaN into 0: a counter must not go down (the crate asserts it).
        self.clearing_seconds_total.inc_by((millis / 1e3).max(0.0));
        self.clearing_unrealized_utility_ratio.set(unrealized);
    }

    pub fn count_rejected_proposal(&self) {
        self.proposals_rejected_total.inc();
    }

    /// `route` is the matched route template (`/v1/accounts/{id}`), never the raw path, so the
    /// label set stays bounded whatever clients send.
    pub fn count_response(&self, route: &str, status: u16) {
        self.responses_total
            .with_label_values(&[route, &status.to_string()])
            .inc();
    }

    /// The exposition text; `mempool` is (transactions, capacity).
    pub fn render(&self, mempool: (usize, usize)) -> String {
        self.mempool_transactions.set(gauge_value(mempool.0));
        self.mempool_capacity.set(gauge_value(mempool.1));
        let mut families = Vec::new();
        #[cfg(target_os = "linux")]
        let process = [&self.process as &dyn Collector];
        #[cfg(not(target_os = "linux"))]
        let process: [&dyn Collector; 0] = [];
        for collector in self.collectors().into_iter().chain(process) {
            for mut family in collector.collect() {
                // The encoder refuses a family without samples (a labelled counter before its
                // first count); a labelled family's samples are sorted by label values, as
                // `Registry::gather` does, so the text does not depend on hash order.
                if family.get_metric().is_empty() {
                    continue;
                }
                family
                    .mut_metric()
                    .sort_by(|a, b| label_values(a).cmp(&label_values(b)));
                families.push(family);
            }
        }
        let mut text = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&families, &mut text) {
            tracing::warn!("encoding the metrics: {error}");
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

fn label_values(sample: &prometheus::proto::Metric) -> Vec<&str> {
    sample.get_label().iter().map(|pair| pair.value()).collect()
}

#[cfg(test)]
mod tests {
    //! The exposition: every family's HELP, TYPE and sample lines as the hand-written text had
    //! them (compared line by line for a node with some of everything counted), and labelled
    //! samples in label order whatever order they were counted in.

    use super::*;
    use std::time::Duration;

    #[test]
    fn the_exposition_keeps_every_name_type_help_text_and_label() {
        let metrics = Metrics::new().unwrap();
        metrics.height.set(7);
        metrics.blocks_total.inc_by(3);
        metrics.transactions_committed_total.inc_by(10);
        metrics.transactions_accepted_total.inc_by(9);
        metrics.transactions_admitted_total.inc_by(12);
        metrics.count_clearing(true, 40, 2.5, 0.25);
        metrics.count_proposal(Duration::from_micros(1500));
        metrics.proposal_check_micros_total.inc_by(700);
        metrics.count_rejected_proposal();
        metrics.forward_refused_total.inc();
        add_seconds(
            &metrics.block_execute_seconds_total,
            Duration::from_millis(1500),
        );
        add_seconds(
            &metrics.block_persist_seconds_total,
            Duration::from_millis(250),
        );
        add_seconds(
            &metrics.block_publish_seconds_total,
            Duration::from_millis(125),
        );
        metrics.block_transactions_last.set(10);
        metrics.sse_subscribers.inc();
        metrics.count_dropped("insufficient_balance");
        metrics.count_rejected("bad_signature");
        metrics.count_rejected("bad_signature");
        metrics.count_response("/v1/status", 200);
        metrics.count_response("/v1/accounts/{id}", 404);
        let expected = "\
# HELP walras_height Height of the last committed block.
# TYPE walras_height gauge
walras_height 7
# HELP walras_blocks_total Blocks committed by this process.
# TYPE walras_blocks_total counter
walras_blocks_total 3
# HELP walras_transactions_committed_total Transactions included in committed blocks (accepted or dropped).
# TYPE walras_transactions_committed_total counter
walras_transactions_committed_total 10
# HELP walras_transactions_accepted_total Transactions that took effect.
# TYPE walras_transactions_accepted_total counter
walras_transactions_accepted_total 9
# HELP walras_transactions_admitted_total Transactions admitted to the mempool.
# TYPE walras_transactions_admitted_total counter
walras_transactions_admitted_total 12
# HELP walras_clearing_blocks_total Blocks whose clearing this node computed.
# TYPE walras_clearing_blocks_total counter
walras_clearing_blocks_total 1
# HELP walras_clearing_converged_total Of those, clearings that converged (mu-complete).
# TYPE walras_clearing_converged_total counter
walras_clearing_converged_total 1
# HELP walras_clearing_iterations_total Tatonnement iterations of those clearings.
# TYPE walras_clearing_iterations_total counter
walras_clearing_iterations_total 40
# HELP walras_clearing_seconds_total Price computation and settlement time of those clearings.
# TYPE walras_clearing_seconds_total counter
walras_clearing_seconds_total 0.0025
# HELP walras_clearing_unrealized_utility_ratio Unrealized over realized utility of the last clearing this node computed.
# TYPE walras_clearing_unrealized_utility_ratio gauge
walras_clearing_unrealized_utility_ratio 0.25
# HELP walras_proposals_total Proposals built by this node (replicated mode).
# TYPE walras_proposals_total counter
walras_proposals_total 1
# HELP walras_proposal_micros_total Time spent clearing proposals, in microseconds (replicated mode).
# TYPE walras_proposal_micros_total counter
walras_proposal_micros_total 1500
# HELP walras_proposal_check_micros_total Time spent checking proposals in ProcessProposal, in microseconds (replicated mode).
# TYPE walras_proposal_check_micros_total counter
walras_proposal_check_micros_total 700
# HELP walras_proposals_rejected_total Proposals this node rejected in ProcessProposal (replicated mode).
# TYPE walras_proposals_rejected_total counter
walras_proposals_rejected_total 1
# HELP walras_forward_refused_total Admitted transactions CometBFT refused or that never committed (replicated mode).
# TYPE walras_forward_refused_total counter
walras_forward_refused_total 1
# HELP walras_block_execute_seconds_total Time spent executing blocks (signatures to state root).
# TYPE walras_block_execute_seconds_total counter
walras_block_execute_seconds_total 1.5
# HELP walras_block_persist_seconds_total Time spent committing blocks to the store (synchronous).
# TYPE walras_block_persist_seconds_total counter
walras_block_persist_seconds_total 0.25
# HELP walras_block_publish_seconds_total Time spent reporting committed blocks to admission (account view, mempool).
# TYPE walras_block_publish_seconds_total counter
walras_block_publish_seconds_total 0.125
# HELP walras_block_transactions Transactions in the last committed block.
# TYPE walras_block_transactions gauge
walras_block_transactions 10
# HELP walras_mempool_transactions Transactions pending.
# TYPE walras_mempool_transactions gauge
walras_mempool_transactions 4
# HELP walras_mempool_capacity Most transactions pending.
# TYPE walras_mempool_capacity gauge
walras_mempool_capacity 100
# HELP walras_sse_subscribers Open event streams.
# TYPE walras_sse_subscribers gauge
walras_sse_subscribers 1
# HELP walras_transactions_dropped_total Transactions in blocks that took no effect, by reason.
# TYPE walras_transactions_dropped_total counter
walras_transactions_dropped_total{reason=\"insufficient_balance\"} 1
# HELP walras_admission_rejected_total Submissions refused, by error code.
# TYPE walras_admission_rejected_total counter
walras_admission_rejected_total{code=\"bad_signature\"} 2
# HELP walras_http_responses_total HTTP responses by route and status.
# TYPE walras_http_responses_total counter
walras_http_responses_total{route=\"/v1/accounts/{id}\",status=\"404\"} 1
walras_http_responses_total{route=\"/v1/status\",status=\"200\"} 1
# HELP walras_state_accounts Accounts in the exchange state.
# TYPE walras_state_accounts gauge
walras_state_accounts 0
# HELP walras_state_open_offers Open offers in the exchange state (each in its book and its pair's trie).
# TYPE walras_state_open_offers gauge
walras_state_open_offers 0
# HELP walras_state_memory_bytes Bytes the exchange state holds in memory, by part, from its structures' sizes and counts (below the process's resident memory by the allocator's rounding and free pages, the account views' copies and the server's indexes).
# TYPE walras_state_memory_bytes gauge
walras_state_memory_bytes{part=\"account_index\"} 0
walras_state_memory_bytes{part=\"account_trie\"} 0
walras_state_memory_bytes{part=\"accounts\"} 0
walras_state_memory_bytes{part=\"books\"} 0
walras_state_memory_bytes{part=\"decoded_keys\"} 0
walras_state_memory_bytes{part=\"offer_tries\"} 0
# HELP walras_recent_index_transactions Committed transactions indexed for status queries.
# TYPE walras_recent_index_transactions gauge
walras_recent_index_transactions 0
# HELP walras_offer_index_pending_entries Entries of the store's per-offer index held in memory until their slice is written (at most 32 blocks' entries).
# TYPE walras_offer_index_pending_entries gauge
walras_offer_index_pending_entries 0
# HELP walras_store_file_bytes Size of the store's data.mdb (the mapped file: blocks, indexes, checkpoints written with a block).
# TYPE walras_store_file_bytes gauge
walras_store_file_bytes 0
# HELP walras_checkpoint_height Height of the newest checkpoint this process wrote in the background.
# TYPE walras_checkpoint_height gauge
walras_checkpoint_height 0
# HELP walras_checkpoint_file_bytes Bytes of the checkpoint files beside data.mdb (the newest two background checkpoints and the spare the next is written over).
# TYPE walras_checkpoint_file_bytes gauge
walras_checkpoint_file_bytes 0
# HELP walras_checkpoint_buffer_bytes Bytes of the buffer the background checkpoint writer keeps between checkpoints (about the last checkpoint's size; memory outside the state).
# TYPE walras_checkpoint_buffer_bytes gauge
walras_checkpoint_buffer_bytes 0
# HELP walras_recent_index_bytes Bytes of the recent-transaction index (its map and per-block lists, at their capacities).
# TYPE walras_recent_index_bytes gauge
walras_recent_index_bytes 0
# HELP walras_mapped_resident_bytes Resident bytes of mapped files (RssFile: pages of the store's data.mdb and checkpoint files the node touched, and its binary); page cache the kernel can take back. Linux only.
# TYPE walras_mapped_resident_bytes gauge
walras_mapped_resident_bytes 0
# HELP walras_commit_rate_tx_per_s Commit rate admission goes by: moving average over recent blocks, per second.
# TYPE walras_commit_rate_tx_per_s gauge
walras_commit_rate_tx_per_s 0
# HELP walras_commit_age_max_ms Largest age at commit of an admitted transaction (the oldest of each block), in milliseconds.
# TYPE walras_commit_age_max_ms gauge
walras_commit_age_max_ms 0
# HELP walras_blocks_committed_late_total Blocks that committed a transaction admitted longer than the commit bound ago.
# TYPE walras_blocks_committed_late_total counter
walras_blocks_committed_late_total 0
";
        let text = own_families(&metrics.render((4, 100)));
        for (line, (got, want)) in text.lines().zip(expected.lines()).enumerate() {
            assert_eq!(got, want, "line {}", line + 1);
        }
        assert_eq!(text, expected);
    }

    #[test]
    fn labelled_samples_come_out_in_label_order_whatever_the_counting_order() {
        let statuses = [503u16, 200, 429, 404, 200, 413];
        let render = |order: &[u16]| {
            let metrics = Metrics::new().unwrap();
            for status in order {
                metrics.count_response("/v1/transactions", *status);
            }
            own_families(&metrics.render((0, 1)))
        };
        let mut reversed = statuses;
        reversed.reverse();
        let text = render(&statuses);
        assert_eq!(text, render(&reversed));
        let samples: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("walras_http_responses_total{"))
            .collect();
        let mut sorted = samples.clone();
        sorted.sort();
        assert_eq!(samples.len(), 5);
        assert_eq!(samples, sorted);
    }

    /// The text less the process collector's families (`process_*`: memory and CPU time
    /// change from one render to the next).
    fn own_families(text: &str) -> String {
        text.lines()
            .filter(|line| {
                let name = line
                    .strip_prefix("# HELP ")
                    .or_else(|| line.strip_prefix("# TYPE "))
                    .unwrap_or(line);
                !name.starts_with("process_")
            })
            .map(|line| format!("{line}\n"))
            .collect()
    }

    /// The node's memory beside what its state holds (issue 32): the standard process
    /// families follow the node's own, the resident memory among them.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_exposition_ends_with_the_process_s_memory_and_cpu_time() {
        let text = Metrics::new().unwrap().render((0, 1));
        let resident: u64 = text
            .lines()
            .find_map(|line| line.strip_prefix("process_resident_memory_bytes "))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .map(|bytes| bytes as u64)
            .unwrap_or_else(|| panic!("no resident memory in:\n{text}"));
        assert!(
            resident > 1 << 20,
            "a test process holds more than 1 MiB: {resident}"
        );
        assert!(text.contains("\n# TYPE process_cpu_seconds_total counter\n"));
        let last_own = text.rfind("walras_").expect("the node's own families");
        let first_process = text.find("process_").expect("the process families");
        assert!(last_own < first_process, "the process families come last");
    }

    #[test]
    fn a_labelled_counter_without_samples_is_left_out_and_the_rest_still_renders() {
        let text = Metrics::new().unwrap().render((0, 1));
        assert!(!text.contains("walras_transactions_dropped_total"));
        assert!(text.contains("\nwalras_mempool_capacity 1\n"));
        assert!(text.contains("\nwalras_blocks_total 0\n"));
    }
}
