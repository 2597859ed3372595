//! The client's adaptive in-flight window of one validator connection (issue 31): how many
//! requests the client lets wait on that validator at once, from the latency it measures.
//!
//! A fixed cap (the bench's old `--in-flight 64`) caps goodput at cap ÷ latency: on a 16-core
//! machine 64 in flight per connection certified 7,052/s where the committee serves 19,293/s,
//! with p99 at 36 ms. The window instead follows the latency, after TCP Vegas and Netflix
//! concurrency-limits' gradient limiter: the connection's minimum latency (over the last
//! [`WindowConfig::min_latency_memory`]) is what a request costs with no queue; while the mean
//! latency of an interval stays within the target (2 × that minimum + [`WindowConfig::target_floor`],
//! 20 ms by default)
//! and the window was in use, it grows by √window; past the target it moves a quarter of the way
//! to window × target ÷ latency (the window that latency says fits; a quarter, as the gradient
//! limiter smooths, so that one slow interval of a busy machine does not empty it), by one at
//! least; an `Overloaded` answer or a timeout halves it (once per interval: one burst of
//! refusals is one signal). It never leaves `min..=max`.
//!
//! Pure: fed `(now, latency)` samples and outcomes, time passed in as microseconds since any
//! fixed origin; no clock, no floating point (the same samples give the same window).

use std::time::Duration;

/// How the window moves (the defaults: [`WindowConfig::default`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// Smallest window: one request is always let through, so latency keeps being measured.
    pub min: usize,
    /// Largest window (the validator's per-connection share, `CLIENT_IN_FLIGHT_MAX`).
    pub max: usize,
    /// The window before any sample: the largest, so a burst from an idle client is sent as it
    /// always was and only a measured queue narrows it.
    pub initial: usize,
    /// Latency above 2 × the minimum plus this is a queue: the window shrinks. The floor keeps
    /// scheduling noise on a busy machine (and the validator's group commit, which batches)
    /// from reading as a queue when the minimum is a fraction of a millisecond.
    pub target_floor: Duration,
    /// Samples are averaged over at least this long before the window moves.
    pub interval: Duration,
    /// A minimum older than this (and less than twice this) is forgotten: if the validator
    /// got slower for good, the target follows it.
    pub min_latency_memory: Duration,
}

/// The default target floor: 20 ms over twice the minimum latency. The minimum is an idle
/// validator's (0.2 to 0.6 ms on both machines measured), well under what a validator that
/// group-commits under load takes without any queue: with 5 ms the window stayed near 80 on 16
/// cores, where latency did not fall as the window shrank and goodput grew with the window
/// (9,356/s at 20,000 offered, 7,551/s with a fixed 64); on the 2-core VM at 30,000/s one run
/// each gave 2,539/s with 5 ms, 2,921/s with 10, 3,355/s with 20 and 2,815/s with 40
/// (BENCHMARKS.md, "The client's adaptive window").
pub const WINDOW_TARGET_FLOOR: Duration = Duration::from_millis(20);
/// The default update interval.
pub const WINDOW_INTERVAL: Duration = Duration::from_millis(10);
/// The default memory of the minimum latency.
pub const WINDOW_MIN_LATENCY_MEMORY: Duration = Duration::from_secs(10);

impl WindowConfig {
    /// The defaults with `max` as the largest and initial window.
    pub fn up_to(max: usize) -> WindowConfig {
        let max = max.max(1);
        WindowConfig {
            min: 1,
            max,
            initial: max,
            target_floor: WINDOW_TARGET_FLOOR,
            interval: WINDOW_INTERVAL,
            min_latency_memory: WINDOW_MIN_LATENCY_MEMORY,
        }
    }
}

/// One connection's adaptive window.
#[derive(Clone, Debug)]
pub struct Window {
    config: WindowConfig,
    limit: usize,
    /// Windowed minimum latency: the least of this bucket and the one before.
    min_bucket_start_us: u64,
    min_current_us: u64,
    min_previous_us: u64,
    /// The interval being averaged (`None`: no sample since the last move).
    interval_start_us: Option<u64>,
    samples: u64,
    latency_sum_us: u64,
    /// Most requests in flight seen at a reply of this interval.
    in_flight_peak: usize,
    /// An overload signal already halved the window in this interval.
    backed_off: bool,
}

impl Window {
    /// A window at `config.initial` (clamped into `min..=max`).
    pub fn new(config: WindowConfig) -> Window {
        let max = config.max.max(1);
        let min = config.min.clamp(1, max);
        let config = WindowConfig { min, max, ..config };
        Window {
            config,
            limit: config.initial.clamp(min, max),
            min_bucket_start_us: 0,
            min_current_us: u64::MAX,
            min_previous_us: u64::MAX,
            interval_start_us: None,
            samples: 0,
            latency_sum_us: 0,
            in_flight_peak: 0,
            backed_off: false,
        }
    }

    /// Requests the connection may have in flight now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The configuration (bounds clamped).
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// The remembered minimum latency, in microseconds (`None` before any reply).
    pub fn min_latency_us(&self) -> Option<u64> {
        let min = self.min_current_us.min(self.min_previous_us);
        (min != u64::MAX).then_some(min)
    }

    /// The mean latency an interval may have without shrinking the window, in microseconds.
    pub fn target_latency_us(&self) -> Option<u64> {
        let floor_us = duration_us(self.config.target_floor);
        self.min_latency_us()
            .map(|min| min.saturating_mul(2).saturating_add(floor_us))
    }

    /// A reply (any answer but an overload refusal) that took `latency_us`, with `in_flight`
    /// requests in flight on the connection when it came (itself included).
    pub fn on_reply(&mut self, now_us: u64, latency_us: u64, in_flight: usize) {
        self.remember_min(now_us, latency_us);
        self.interval_start_us.get_or_insert(now_us);
        self.samples += 1;
        self.latency_sum_us = self.latency_sum_us.saturating_add(latency_us);
        self.in_flight_peak = self.in_flight_peak.max(in_flight);
        self.maybe_move(now_us);
    }

    /// The validator answered `Overloaded`, or a request timed out: halve the window, once per
    /// interval.
    pub fn on_overloaded(&mut self, now_us: u64) {
        self.interval_start_us.get_or_insert(now_us);
        if !self.backed_off {
            self.backed_off = true;
            self.limit = (self.limit / 2).max(self.config.min);
        }
        self.maybe_move(now_us);
    }

    fn remember_min(&mut self, now_us: u64, latency_us: u64) {
        let memory_us = duration_us(self.config.min_latency_memory).max(1);
        if now_us.saturating_sub(self.min_bucket_start_us) >= memory_us {
            // Two buckets back is forgotten; one back is kept, so the minimum is always that of
            // at least the last `memory`.
            self.min_previous_us = self.min_current_us;
            self.min_current_us = u64::MAX;
            self.min_bucket_start_us = now_us;
        }
        self.min_current_us = self.min_current_us.min(latency_us);
    }

    /// At the end of an interval: move the window by its mean latency, start the next.
    fn maybe_move(&mut self, now_us: u64) {
        let Some(start_us) = self.interval_start_us else {
            return;
        };
        if now_us.saturating_sub(start_us) < duration_us(self.config.interval) {
            return;
        }
        if !self.backed_off && self.samples > 0 {
            let mean_us = self.latency_sum_us / self.samples;
            self.limit = self.next_limit(mean_us);
        }
        self.interval_start_us = None;
        self.samples = 0;
        self.latency_sum_us = 0;
        self.in_flight_peak = 0;
        self.backed_off = false;
    }

    fn next_limit(&self, mean_us: u64) -> usize {
        let Some(target_us) = self.target_latency_us() else {
            return self.limit;
        };
        let limit = self.limit;
        if mean_us > target_us {
            // In proportion to how far over (a mean twice the target says half the window
            // fits), a quarter of the way there, and at least one: sustained latency over the
            // target always reaches the smallest window.
            let fits = (limit as u128 * u128::from(target_us) / u128::from(mean_us)) as usize;
            let step = ((limit - fits) / 4).max(1);
            return limit.saturating_sub(step).max(self.config.min);
        }
        // Grow only a window in use: an idle client's latency says nothing about a larger one.
        if self.in_flight_peak.saturating_mul(2) >= limit {
            let step = limit.isqrt().max(1);
            return limit.saturating_add(step).min(self.config.max);
        }
        limit
    }
}

fn duration_us(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `max`, a 5 ms floor (round figures below).
    fn config(max: usize) -> WindowConfig {
        WindowConfig {
            target_floor: Duration::from_millis(5),
            ..WindowConfig::up_to(max)
        }
    }

    /// Feeds replies of `latency_us`, 1 ms apart from `*now_us`, each with the window full,
    /// until the window moves once (one interval).
    fn interval(window: &mut Window, now_us: &mut u64, latency_us: u64) {
        loop {
            *now_us += 1_000;
            let in_flight = window.limit();
            window.on_reply(*now_us, latency_us, in_flight);
            if window.interval_start_us.is_none() {
                return;
            }
        }
    }

    #[test]
    fn a_new_window_starts_at_its_largest_and_holds_without_samples() {
        let window = Window::new(config(512));
        assert_eq!(window.limit(), 512);
        assert_eq!(window.min_latency_us(), None);
        assert_eq!(window.target_latency_us(), None);
    }

    #[test]
    fn latency_over_the_target_shrinks_the_window_a_quarter_of_the_way_to_what_fits() {
        let mut window = Window::new(config(512));
        let mut now = 0;
        // Minimum 1 ms: target 2 × 1 + 5 = 7 ms.
        interval(&mut window, &mut now, 1_000);
        assert_eq!(window.target_latency_us(), Some(7_000));
        assert_eq!(window.limit(), 512);
        // Mean 8 ms over one interval: 512 × 7 ÷ 8 = 448 fit; a quarter of the 64 over.
        interval(&mut window, &mut now, 8_000);
        assert_eq!(window.limit(), 496);
        // Far over (70 ms): 49 fit; a quarter of the 447 over.
        interval(&mut window, &mut now, 70_000);
        assert_eq!(window.limit(), 385);
        // Just over: one less.
        interval(&mut window, &mut now, 7_001);
        assert_eq!(window.limit(), 384);
    }

    #[test]
    fn an_idle_window_does_not_grow_but_a_full_one_grows_by_its_square_root() {
        let mut window = Window::new(WindowConfig {
            initial: 16,
            ..config(512)
        });
        let mut now = 0;
        for _ in 0..50 {
            now += 1_000;
            window.on_reply(now, 1_000, 1);
        }
        assert_eq!(
            window.limit(),
            16,
            "one request in flight says nothing of 16"
        );
        interval(&mut window, &mut now, 1_000);
        assert_eq!(window.limit(), 20, "16 + √16");
    }

    #[test]
    fn a_burst_of_overload_refusals_halves_the_window_once_per_interval() {
        let mut window = Window::new(config(512));
        for _ in 0..100 {
            window.on_overloaded(1_000);
        }
        assert_eq!(window.limit(), 256);
        window.on_overloaded(12_000);
        window.on_overloaded(12_001);
        assert_eq!(window.limit(), 128);
    }

    #[test]
    fn a_minimum_is_forgotten_after_two_memories_so_the_target_follows_a_slower_validator() {
        let mut window = Window::new(config(64));
        window.on_reply(0, 1_000, 1);
        window.on_reply(10_000_000, 50_000, 1);
        assert_eq!(window.min_latency_us(), Some(1_000), "kept one memory back");
        window.on_reply(20_000_000, 50_000, 1);
        assert_eq!(window.min_latency_us(), Some(50_000));
    }

    #[test]
    fn bounds_are_clamped_so_the_window_is_never_zero() {
        let window = Window::new(WindowConfig {
            min: 0,
            max: 0,
            initial: 0,
            ..config(1)
        });
        assert_eq!(window.limit(), 1);
        assert_eq!(window.config().min, 1);
    }
}
