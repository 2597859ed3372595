//! The client's adaptive in-flight window (issue 31) under arbitrary samples: it never leaves its
//! bounds, sustained latency over the target takes it to the smallest window, low latency with
//! the window in use takes it to the largest, and overload answers shrink it.

use std::time::Duration;

use proptest::prelude::*;
use walras_payments_net::{Window, WindowConfig};

/// One thing the window can be told.
#[derive(Clone, Debug)]
enum Event {
    Reply {
        after_us: u64,
        latency_us: u64,
        in_flight: usize,
    },
    Overloaded {
        after_us: u64,
    },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (0..20_000u64, 0..200_000u64, 0..1_024usize).prop_map(
            |(after_us, latency_us, in_flight)| Event::Reply { after_us, latency_us, in_flight }
        ),
        1 => (0..20_000u64).prop_map(|after_us| Event::Overloaded { after_us }),
    ]
}

fn config() -> impl Strategy<Value = WindowConfig> {
    (1..8usize, 1..600usize, 0..700usize, 0..20_000u64).prop_map(|(min, max, initial, floor_us)| {
        WindowConfig {
            min,
            max,
            initial,
            target_floor: Duration::from_micros(floor_us),
            ..WindowConfig::up_to(max)
        }
    })
}

/// Applies `events` from `*now_us`; returns the window after each.
fn apply(window: &mut Window, now_us: &mut u64, events: &[Event]) -> Vec<usize> {
    events
        .iter()
        .map(|event| {
            match *event {
                Event::Reply {
                    after_us,
                    latency_us,
                    in_flight,
                } => {
                    *now_us += after_us;
                    window.on_reply(*now_us, latency_us, in_flight);
                }
                Event::Overloaded { after_us } => {
                    *now_us += after_us;
                    window.on_overloaded(*now_us);
                }
            }
            window.limit()
        })
        .collect()
}

/// Replies of `latency_us` every millisecond, the window full, for `intervals` intervals.
fn sustain(window: &mut Window, now_us: &mut u64, latency_us: u64, intervals: usize) {
    let per_interval = window.config().interval.as_micros() as usize / 1_000 + 1;
    for _ in 0..intervals * per_interval {
        *now_us += 1_000;
        let in_flight = window.limit();
        window.on_reply(*now_us, latency_us, in_flight);
    }
}

/// Forgets the history's minimum latency (two memories on, one reply in each): `fast_us` is the
/// minimum from here for a memory.
fn forget_history(window: &mut Window, now_us: &mut u64, fast_us: u64) {
    let memory_us = window.config().min_latency_memory.as_micros() as u64;
    for advance in [2 * memory_us, memory_us] {
        *now_us += advance;
        let in_flight = window.limit();
        window.on_reply(*now_us, fast_us, in_flight);
    }
    assert_eq!(window.min_latency_us(), Some(fast_us));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_window_never_leaves_its_bounds(config in config(), events in prop::collection::vec(event(), 0..400)) {
        let mut window = Window::new(config);
        let (min, max) = (window.config().min, window.config().max);
        prop_assert!(min >= 1 && min <= max);
        let mut now = 0;
        for limit in apply(&mut window, &mut now, &events) {
            prop_assert!((min..=max).contains(&limit), "{limit} outside {min}..={max}");
        }
    }

    /// After any history, a minimum latency set by fast replies and then latency over the target
    /// (2 × minimum + floor) for long enough (each interval shrinks it by one at least; less than
    /// the minimum's memory) takes the window to its smallest.
    #[test]
    fn sustained_latency_over_the_target_shrinks_the_window_to_its_smallest(
        config in config(),
        events in prop::collection::vec(event(), 0..100),
        fast_us in 100..5_000u64,
        over_by_us in 1..100_000u64,
    ) {
        let mut window = Window::new(config);
        let mut now = 0;
        apply(&mut window, &mut now, &events);
        // The fast replies are the minimum throughout (the phase below is shorter than a memory).
        forget_history(&mut window, &mut now, fast_us);
        let target = window.target_latency_us().expect("a sample was taken");
        prop_assert!(target >= 2 * fast_us);
        let intervals = window.config().max + 1;
        sustain(&mut window, &mut now, target + over_by_us, intervals);
        prop_assert_eq!(window.limit(), window.config().min);
    }

    /// After any history, replies at the minimum latency with the window in use take it to its
    /// largest (growth by √window per interval).
    #[test]
    fn low_latency_with_the_window_in_use_grows_it_to_its_largest(
        config in config(),
        events in prop::collection::vec(event(), 0..100),
        fast_us in 100..5_000u64,
    ) {
        let mut window = Window::new(config);
        let mut now = 0;
        apply(&mut window, &mut now, &events);
        forget_history(&mut window, &mut now, fast_us);
        let intervals = 3 * window.config().max.isqrt() + 5;
        sustain(&mut window, &mut now, fast_us, intervals);
        prop_assert_eq!(window.limit(), window.config().max);
    }

    /// An overload answer never grows the window, and two at one instant (one closes any interval
    /// that already backed off, the other opens a new one) at least halve it.
    #[test]
    fn overload_answers_shrink_the_window(
        config in config(),
        events in prop::collection::vec(event(), 0..200),
        after_us in 0..20_000u64,
    ) {
        let mut window = Window::new(config);
        let mut now = 0;
        apply(&mut window, &mut now, &events);
        let before = window.limit();
        now += after_us + window.config().interval.as_micros() as u64;
        window.on_overloaded(now);
        prop_assert!(window.limit() <= before);
        window.on_overloaded(now);
        prop_assert!(window.limit() <= (before / 2).max(window.config().min));
    }
}
