//! Latency percentiles from a log-linear histogram (the HdrHistogram layout): values below 1024
//! µs are counted exactly, larger ones in buckets 1/512 of their power of two wide, so any
//! percentile is within 0.2% of the true value, memory is fixed (28,672 counters) whatever the
//! number of samples, and a percentile can be read every second without sorting.

use serde::Serialize;

/// Values below this are their own bucket.
const EXACT_BELOW: u64 = 1024;
/// Buckets per power of two above [`EXACT_BELOW`].
const SUB_BUCKETS: u64 = 512;
const BUCKETS: usize = (EXACT_BELOW + 54 * SUB_BUCKETS) as usize;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    sum_us: u128,
    max_us: u64,
}

/// Percentiles in milliseconds, for reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Default for LatencyHistogram {
    fn default() -> LatencyHistogram {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum_us: 0,
            max_us: 0,
        }
    }
}

impl LatencyHistogram {
    pub fn record_us(&mut self, value_us: u64) {
        self.counts[bucket_of(value_us)] += 1;
        self.count += 1;
        self.sum_us += u128::from(value_us);
        self.max_us = self.max_us.max(value_us);
    }

    /// The value at quantile `q` in [0, 1] (the smallest recorded value with at least `q` of
    /// the samples at or below it), in µs; `None` with no samples.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (bucket, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(representative(bucket).min(self.max_us));
            }
        }
        Some(self.max_us)
    }

    pub fn summary(&self) -> LatencySummary {
        let ms = |q: f64| self.quantile_us(q).map_or(0.0, |us| us as f64 / 1e3);
        LatencySummary {
            count: self.count,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: self.max_us as f64 / 1e3,
            mean_ms: if self.count == 0 {
                0.0
            } else {
                self.sum_us as f64 / self.count as f64 / 1e3
            },
        }
    }
}

fn bucket_of(value: u64) -> usize {
    if value < EXACT_BELOW {
        return value as usize;
    }
    let top_bit = 63 - value.leading_zeros() as u64;
    let shift = top_bit - 9;
    let sub = (value >> shift) - SUB_BUCKETS;
    (EXACT_BELOW + (shift - 1) * SUB_BUCKETS + sub) as usize
}

/// The middle of a bucket's range.
fn representative(bucket: usize) -> u64 {
    let bucket = bucket as u64;
    if bucket < EXACT_BELOW {
        return bucket;
    }
    let shift = (bucket - EXACT_BELOW) / SUB_BUCKETS + 1;
    let sub = (bucket - EXACT_BELOW) % SUB_BUCKETS;
    let low = (SUB_BUCKETS + sub) << shift;
    low + (1u64 << shift) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_give_exact_percentiles() {
        let mut histogram = LatencyHistogram::default();
        assert_eq!(histogram.quantile_us(0.5), None);
        for value in (1..=1000).rev() {
            histogram.record_us(value);
        }
        assert_eq!(histogram.quantile_us(0.5), Some(500));
        assert_eq!(histogram.quantile_us(0.99), Some(990));
        assert_eq!(histogram.quantile_us(0.999), Some(999));
        assert_eq!(histogram.quantile_us(1.0), Some(1000));
        assert_eq!(histogram.quantile_us(0.0), Some(1));
        let summary = histogram.summary();
        assert_eq!(summary.count, 1000);
        assert!((summary.mean_ms - 0.5005).abs() < 1e-9);
        assert_eq!(summary.max_ms, 1.0);
    }

    #[test]
    fn large_values_are_within_a_fifth_of_a_percent() {
        let mut histogram = LatencyHistogram::default();
        let values: Vec<u64> = (0..10_000u64).map(|i| 1_000 + i * 7_919).collect();
        for &value in &values {
            histogram.record_us(value);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1] as f64;
            let estimate = histogram.quantile_us(q).unwrap() as f64;
            assert!(
                (estimate - exact).abs() / exact < 0.002,
                "q {q}: {estimate} vs {exact}"
            );
        }
        assert_eq!(histogram.quantile_us(1.0), Some(*sorted.last().unwrap()));
    }

    #[test]
    fn every_value_has_a_bucket_that_contains_it() {
        for value in [0, 1, 1023, 1024, 1025, 2047, 2048, 1 << 40, u64::MAX] {
            let bucket = bucket_of(value);
            assert!(bucket < BUCKETS, "{value}");
            let middle = representative(bucket) as f64;
            assert!(
                (middle - value as f64).abs() <= value as f64 / 1024.0 + 0.5,
                "{value} -> {middle}"
            );
        }
    }
}
