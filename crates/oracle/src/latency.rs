//! Latency figures of the threaded replay: event-to-valuation and event-to-aggregate
//! histograms, summarised as percentiles in microseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Percentiles {
    pub(crate) fn of(h: &Histogram<u64>) -> Percentiles {
        Percentiles {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub event_to_valuation_us: Percentiles,
    pub event_to_aggregate_us: Percentiles,
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 µs to 100 s at 3 significant digits; the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, 100_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

pub(crate) fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}
