//! Prometheus metrics, written in the text exposition format by hand: a few counters and
//! gauges need no dependency. Labelled counters live in `BTreeMap`s so the output order is
//! stable.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    pub height: AtomicU64,
    pub blocks_total: AtomicU64,
    pub transactions_committed_total: AtomicU64,
    pub transactions_accepted_total: AtomicU64,
    pub transactions_admitted_total: AtomicU64,
    pub block_execute_micros_total: AtomicU64,
    pub block_persist_micros_total: AtomicU64,
    pub block_transactions_last: AtomicU64,
    pub sse_subscribers: AtomicU64,
    /// Replicated mode: proposals this node built, their clearing time, proposals it rejected,
    /// and transactions CometBFT refused after admission here.
    pub proposals_total: AtomicU64,
    pub proposal_micros_total: AtomicU64,
    pub proposals_rejected_total: AtomicU64,
    pub proposal_check_micros_total: AtomicU64,
    pub forward_refused_total: AtomicU64,
    /// Blocks whose clearing this node computed, how many converged, their iterations and
    /// clearing time, and the last one's unrealized/realized utility ratio (as f64 bits).
    pub clearing_blocks_total: AtomicU64,
    pub clearing_converged_total: AtomicU64,
    pub clearing_iterations_total: AtomicU64,
    pub clearing_micros_total: AtomicU64,
    pub clearing_unrealized_utility_ratio_last_bits: AtomicU64,
    dropped_total: Mutex<BTreeMap<&'static str, u64>>,
    rejected_total: Mutex<BTreeMap<&'static str, u64>>,
    responses_total: Mutex<BTreeMap<(String, u16), u64>>,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K, by: u64) {
    if let Ok(mut map) = map.lock() {
        *map.entry(key).or_insert(0) += by;
    }
}

impl Metrics {
    pub fn count_dropped(&self, reason: &'static str) {
        bump(&self.dropped_total, reason, 1);
    }

    pub fn count_rejected(&self, code: &'static str) {
        bump(&self.rejected_total, code, 1);
    }

    pub fn count_proposal(&self, clearing: std::time::Duration) {
        self.proposals_total.fetch_add(1, Ordering::Relaxed);
        self.proposal_micros_total
            .fetch_add(clearing.as_micros() as u64, Ordering::Relaxed);
    }

    /// Records the quality of one clearing this node computed.
    pub fn count_clearing(&self, converged: bool, iterations: u64, millis: f64, unrealized: f64) {
        self.clearing_blocks_total.fetch_add(1, Ordering::Relaxed);
        self.clearing_converged_total
            .fetch_add(u64::from(converged), Ordering::Relaxed);
        self.clearing_iterations_total
            .fetch_add(iterations, Ordering::Relaxed);
        self.clearing_micros_total
            .fetch_add((millis * 1e3) as u64, Ordering::Relaxed);
        self.clearing_unrealized_utility_ratio_last_bits
            .store(unrealized.to_bits(), Ordering::Relaxed);
    }

    pub fn count_rejected_proposal(&self) {
        self.proposals_rejected_total
            .fetch_add(1, Ordering::Relaxed);
    }

    /// `route` is the matched route template (`/v1/accounts/{id}`), never the raw path, so the
    /// label set stays bounded whatever clients send.
    pub fn count_response(&self, route: &str, status: u16) {
        bump(&self.responses_total, (route.to_string(), status), 1);
    }

    /// The exposition text; `mempool` is (transactions, capacity).
    pub fn render(&self, mempool: (usize, usize)) -> String {
        let mut out = String::new();
        let load = |value: &AtomicU64| value.load(Ordering::Relaxed);
        gauge(
            &mut out,
            "walras_height",
            "Height of the last committed block.",
            load(&self.height),
        );
        counter(
            &mut out,
            "walras_blocks_total",
            "Blocks committed by this process.",
            load(&self.blocks_total),
        );
        counter(
            &mut out,
            "walras_transactions_committed_total",
            "Transactions included in committed blocks (accepted or dropped).",
            load(&self.transactions_committed_total),
        );
        counter(
            &mut out,
            "walras_transactions_accepted_total",
            "Transactions that took effect.",
            load(&self.transactions_accepted_total),
        );
        counter(
            &mut out,
            "walras_transactions_admitted_total",
            "Transactions admitted to the mempool.",
            load(&self.transactions_admitted_total),
        );
        counter(
            &mut out,
            "walras_clearing_blocks_total",
            "Blocks whose clearing this node computed.",
            load(&self.clearing_blocks_total),
        );
        counter(
            &mut out,
            "walras_clearing_converged_total",
            "Of those, clearings that converged (mu-complete).",
            load(&self.clearing_converged_total),
        );
        counter(
            &mut out,
            "walras_clearing_iterations_total",
            "Tatonnement iterations of those clearings.",
            load(&self.clearing_iterations_total),
        );
        counter_f64(
            &mut out,
            "walras_clearing_seconds_total",
            "Price computation and settlement time of those clearings.",
            load(&self.clearing_micros_total) as f64 / 1e6,
        );
        header(
            &mut out,
            "walras_clearing_unrealized_utility_ratio",
            "Unrealized over realized utility of the last clearing this node computed.",
            "gauge",
        );
        let _ = writeln!(
            out,
            "walras_clearing_unrealized_utility_ratio {}",
            f64::from_bits(load(&self.clearing_unrealized_utility_ratio_last_bits))
        );
        counter(
            &mut out,
            "walras_proposals_total",
            "Proposals built by this node (replicated mode).",
            load(&self.proposals_total),
        );
        counter(
            &mut out,
            "walras_proposal_micros_total",
            "Time spent clearing proposals, in microseconds (replicated mode).",
            load(&self.proposal_micros_total),
        );
        counter(
            &mut out,
            "walras_proposal_check_micros_total",
            "Time spent checking proposals in ProcessProposal, in microseconds (replicated mode).",
            load(&self.proposal_check_micros_total),
        );
        counter(
            &mut out,
            "walras_proposals_rejected_total",
            "Proposals this node rejected in ProcessProposal (replicated mode).",
            load(&self.proposals_rejected_total),
        );
        counter(
            &mut out,
            "walras_forward_refused_total",
            "Admitted transactions CometBFT refused or that never committed (replicated mode).",
            load(&self.forward_refused_total),
        );
        let seconds = |micros: u64| micros as f64 / 1e6;
        counter_f64(
            &mut out,
            "walras_block_execute_seconds_total",
            "Time spent executing blocks (signatures to state root).",
            seconds(load(&self.block_execute_micros_total)),
        );
        counter_f64(
            &mut out,
            "walras_block_persist_seconds_total",
            "Time spent committing blocks to the store (synchronous).",
            seconds(load(&self.block_persist_micros_total)),
        );
        gauge(
            &mut out,
            "walras_block_transactions",
            "Transactions in the last committed block.",
            load(&self.block_transactions_last),
        );
        gauge(
            &mut out,
            "walras_mempool_transactions",
            "Transactions pending.",
            mempool.0 as u64,
        );
        gauge(
            &mut out,
            "walras_mempool_capacity",
            "Most transactions pending.",
            mempool.1 as u64,
        );
        gauge(
            &mut out,
            "walras_sse_subscribers",
            "Open event streams.",
            load(&self.sse_subscribers),
        );
        labelled(
            &mut out,
            "walras_transactions_dropped_total",
            "Transactions in blocks that took no effect, by reason.",
            &self.dropped_total,
            |reason| format!("reason=\"{reason}\""),
        );
        labelled(
            &mut out,
            "walras_admission_rejected_total",
            "Submissions refused, by error code.",
            &self.rejected_total,
            |code| format!("code=\"{code}\""),
        );
        labelled(
            &mut out,
            "walras_http_responses_total",
            "HTTP responses by route and status.",
            &self.responses_total,
            |(route, status)| format!("route=\"{route}\",status=\"{status}\""),
        );
        out
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name} {value}");
}

fn counter(out: &mut String, name: &str, help: &str, value: u64) {
    header(out, name, help, "counter");
    let _ = writeln!(out, "{name} {value}");
}

fn counter_f64(out: &mut String, name: &str, help: &str, value: f64) {
    header(out, name, help, "counter");
    let _ = writeln!(out, "{name} {value}");
}

fn labelled<K: Ord>(
    out: &mut String,
    name: &str,
    help: &str,
    map: &Mutex<BTreeMap<K, u64>>,
    labels: impl Fn(&K) -> String,
) {
    header(out, name, help, "counter");
    if let Ok(map) = map.lock() {
        for (key, value) in map.iter() {
            let _ = writeln!(out, "{name}{{{}}} {value}", labels(key));
        }
    }
}
