//! The open-loop send schedule: transaction `k` (counting from 0) falls due at `k / rate`
//! seconds after the start, whatever the node is doing. Each timer tick releases everything due
//! by then, so a late tick sends a bigger batch instead of shifting the schedule: a slow node
//! shows up as latency, never as a lower offered rate.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct SendSchedule {
    rate_per_s: f64,
    /// `rate × duration`, rounded: what the whole run offers.
    total: u64,
    released: u64,
}

impl SendSchedule {
    /// A schedule of `rate_per_s` transactions per second for `duration`.
    pub fn new(rate_per_s: f64, duration: Duration) -> SendSchedule {
        assert!(
            rate_per_s.is_finite() && rate_per_s > 0.0,
            "rate must be positive"
        );
        SendSchedule {
            rate_per_s,
            total: (rate_per_s * duration.as_secs_f64()).round() as u64,
            released: 0,
        }
    }

    /// How many transactions fall due by `elapsed` that earlier calls did not release.
    pub fn release(&mut self, elapsed: Duration) -> u64 {
        let due = ((self.rate_per_s * elapsed.as_secs_f64()).floor() as u64).min(self.total);
        let newly_due = due.saturating_sub(self.released);
        self.released += newly_due;
        newly_due
    }

    /// Releases whatever is left of the run (called once the duration has passed, so rounding
    /// never loses the last transactions).
    pub fn release_rest(&mut self) -> u64 {
        let rest = self.total - self.released;
        self.released = self.total;
        rest
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn released(&self) -> u64 {
        self.released
    }
}

/// Splits `count` transactions into requests of at most `batch_max` each.
pub fn split_batches(count: u64, batch_max: u64) -> impl Iterator<Item = u64> {
    assert!(batch_max > 0, "batch_max must be positive");
    let full = count / batch_max;
    let rest = count % batch_max;
    std::iter::repeat_n(batch_max, full as usize).chain((rest > 0).then_some(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_release_what_is_due_and_late_ticks_catch_up() {
        let mut schedule = SendSchedule::new(1000.0, Duration::from_secs(2));
        assert_eq!(schedule.total(), 2000);
        assert_eq!(schedule.release(Duration::from_millis(0)), 0);
        assert_eq!(schedule.release(Duration::from_millis(10)), 10);
        assert_eq!(schedule.release(Duration::from_millis(10)), 0);
        // A tick 500 ms late releases the whole backlog at once.
        assert_eq!(schedule.release(Duration::from_millis(520)), 510);
        assert_eq!(schedule.released(), 520);
        // Nothing beyond the run's total, however late.
        assert_eq!(schedule.release(Duration::from_secs(10)), 1480);
        assert_eq!(schedule.release_rest(), 0);
    }

    #[test]
    fn fractional_rates_add_up_to_the_total() {
        let mut schedule = SendSchedule::new(3.3, Duration::from_secs(10));
        let mut released = 0;
        for tick in 0..1000 {
            released += schedule.release(Duration::from_millis(tick * 10));
        }
        released += schedule.release_rest();
        assert_eq!(released, 33);
        assert_eq!(released, schedule.total());
    }

    #[test]
    fn batches_split_evenly_with_a_remainder() {
        assert_eq!(split_batches(25, 10).collect::<Vec<_>>(), vec![10, 10, 5]);
        assert_eq!(split_batches(20, 10).collect::<Vec<_>>(), vec![10, 10]);
        assert_eq!(split_batches(0, 10).count(), 0);
    }
}
