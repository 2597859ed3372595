//! Latency percentiles from an [`hdrhistogram`] histogram at 3 significant figures: values
//! below 2048 µs are counted exactly and any larger value is reported within 0.1% of the true
//! value (its bucket's highest equivalent value, capped at the largest value recorded), memory is
//! fixed whatever the number of samples, and a percentile can be read every second without
//! sorting. Count, exact sum (for the mean) and exact maximum are kept beside the histogram so
//! `mean_ms` and `max_ms` are not rounded to a bucket.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Significant decimal figures the histogram keeps (relative error at most 10^-3).
pub const SIGNIFICANT_FIGURES: u8 = 3;
/// Highest latency the histogram tells apart; larger values count as this one in percentiles
/// (about 292,000 years in µs, so in practice never).
const TRACKABLE_MAX_US: u64 = u64::MAX / 2;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
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
        // The bounds are constants within hdrhistogram's limits (1 <= low, high >= 2 * low,
        // sigfig <= 5), so creation cannot fail.
        let histogram = Histogram::new_with_bounds(1, TRACKABLE_MAX_US, SIGNIFICANT_FIGURES)
            .expect("constant histogram bounds are valid");
        LatencyHistogram {
            histogram,
            count: 0,
            sum_us: 0,
            max_us: 0,
        }
    }
}

impl LatencyHistogram {
    pub fn record_us(&mut self, value_us: u64) {
        self.histogram.saturating_record(value_us);
        self.count += 1;
        self.sum_us += u128::from(value_us);
        self.max_us = self.max_us.max(value_us);
    }

    /// The value at quantile `q` in [0, 1] (the smallest recorded value with at least `q` of
    /// the samples at or below it, to 3 significant figures), in µs; `None` with no samples.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        Some(self.histogram.value_at_quantile(q).min(self.max_us))
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

#[cfg(test)]
mod tests {
    //! Checks the percentiles against sorting the samples: exact below 2048 µs, within 0.1%
    //! above, for fixed cases and for random sample sets (proptest, 256 cases).
    use super::*;
    use proptest::prelude::*;

    fn exact_quantile(sorted: &[u64], q: f64) -> u64 {
        sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1]
    }

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
    fn large_values_are_within_a_tenth_of_a_percent() {
        let mut histogram = LatencyHistogram::default();
        let values: Vec<u64> = (0..10_000u64).map(|i| 1_000 + i * 7_919).collect();
        for &value in &values {
            histogram.record_us(value);
        }
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = exact_quantile(&sorted, q) as f64;
            let estimate = histogram.quantile_us(q).unwrap() as f64;
            assert!(
                (estimate - exact).abs() / exact <= 0.001,
                "q {q}: {estimate} vs {exact}"
            );
        }
        assert_eq!(histogram.quantile_us(1.0), Some(*sorted.last().unwrap()));
    }

    #[test]
    fn extreme_values_are_recorded_without_panicking() {
        let mut histogram = LatencyHistogram::default();
        for value in [0, 1, 2047, 2048, 1 << 40, u64::MAX] {
            histogram.record_us(value);
        }
        assert_eq!(histogram.summary().count, 6);
        assert_eq!(histogram.quantile_us(0.0), Some(0));
        // Beyond the trackable maximum a value counts as that maximum in percentiles; the
        // maximum itself stays exact.
        assert!(histogram.quantile_us(1.0) >= Some(TRACKABLE_MAX_US));
        assert_eq!(histogram.summary().max_ms, u64::MAX as f64 / 1e3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_percentile_is_within_a_tenth_of_a_percent_of_the_sorted_samples(
            values in proptest::collection::vec(0u64..10_000_000_000, 1..500),
            q in 0.0f64..=1.0,
        ) {
            let mut histogram = LatencyHistogram::default();
            for &value in &values {
                histogram.record_us(value);
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let exact = exact_quantile(&sorted, q);
            let estimate = histogram.quantile_us(q).unwrap();
            let error = estimate.abs_diff(exact) as f64;
            if exact < 2048 {
                prop_assert_eq!(estimate, exact);
            } else {
                prop_assert!(error / exact as f64 <= 0.001, "q {}: {} vs {}", q, estimate, exact);
            }
            prop_assert_eq!(histogram.summary().count, values.len() as u64);
            prop_assert_eq!(histogram.summary().max_ms, *sorted.last().unwrap() as f64 / 1e3);
        }
    }
}
