//! The oracle's settings: valuation method, health limits, aggregation, publication interval,
//! and the queue bound of the threaded replay.

use crate::aggregate::AggregateConfig;
use crate::book::HealthLimits;
use crate::value::Method;
use crate::venues::KRAKEN_DEPTH;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OracleConfig {
    pub method: Method,
    pub health: HealthLimits,
    pub aggregate: AggregateConfig,
    pub publish_interval_ns: u64,
    /// Liquidity weight: quote notional within this fraction of the valuation, thinner side.
    pub liquidity_band: f64,
    /// Kraken book subscription depth (the truncation depth).
    pub kraken_depth: usize,
    pub trade_window_ns: u64,
    /// Items per worker queue.
    pub queue_capacity: usize,
}

impl Default for OracleConfig {
    fn default() -> Self {
        OracleConfig {
            method: Method::NotionalDepth { quote: 10_000.0 },
            health: HealthLimits::default(),
            aggregate: AggregateConfig::default(),
            publish_interval_ns: 100_000_000,
            liquidity_band: 0.01,
            kraken_depth: KRAKEN_DEPTH,
            trade_window_ns: 60_000_000_000,
            queue_capacity: 4_096,
        }
    }
}
