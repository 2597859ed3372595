//! Per-client limits: a rate limit per client IP address, and a cap on the event streams each
//! client (and all clients together) may hold open.
//!
//! The rate limit is the `governor` crate's keyed limiter (GCRA). With a replenish interval of
//! `t = 1 s / rate_per_s` and a burst of `b`, it admits exactly what a token bucket refilled at
//! `rate_per_s` up to `b` tokens would (the property test below checks this against such a
//! bucket, in integer nanoseconds), and its "not until" is that bucket's wait for one token.
//!
//! The event-stream slots stay hand-written: governor limits how *often* a client may do
//! something, not how many long-lived things it *holds* at once (a cell it grants is never given
//! back), and tokio's `Semaphore` has one pool, not a share per client.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::Quota;

/// The most clients tracked; beyond it, clients whose bucket is full again (a full bucket
/// carries no information; governor waits one replenish interval more to be sure) are
/// forgotten, bounding memory against many source addresses.
const CLIENTS_TRACKED_MAX: usize = 65_536;

/// `rate_per_s` requests per second per client IP, in bursts of up to `burst`.
pub struct RateLimiter<C: Clock = DefaultClock> {
    limiter: governor::RateLimiter<
        IpAddr,
        DefaultKeyedStateStore<IpAddr>,
        C,
        NoOpMiddleware<C::Instant>,
    >,
}

impl RateLimiter {
    /// `None` when `rate_per_s` is 0 (no limit); a `burst` of 0 counts as 1.
    pub fn new(rate_per_s: u32, burst: u32) -> Option<RateLimiter> {
        RateLimiter::with_clock(rate_per_s, burst, DefaultClock::default())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// As [`RateLimiter::new`], reading time from `clock` (tests pass a fake one).
    pub fn with_clock(rate_per_s: u32, burst: u32, clock: C) -> Option<RateLimiter<C>> {
        let rate_per_s = NonZeroU32::new(rate_per_s)?;
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(rate_per_s).allow_burst(burst);
        Some(RateLimiter {
            limiter: governor::RateLimiter::new(quota, DefaultKeyedStateStore::default(), clock),
        })
    }

    /// Takes one request's worth for `client`; `Err(wait)` says how long until one is free.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        if self.limiter.len() >= CLIENTS_TRACKED_MAX {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&client)
            .map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
    }

    /// Clients whose state is not that of a fresh client (bounded by [`CLIENTS_TRACKED_MAX`]
    /// at the next check).
    #[cfg(test)]
    fn clients_tracked(&self) -> usize {
        self.limiter.len()
    }
}

/// Open event streams, per client IP and in all. One client must not be able to hold every
/// slot: each may hold at most `per_client_max`, and all together at most `total_max`.
pub struct EventStreamSlots {
    per_client_max: usize,
    total_max: usize,
    open: Mutex<OpenStreams>,
}

#[derive(Default)]
struct OpenStreams {
    /// Only clients with at least one open stream (so memory is bounded by `total_max`).
    per_client: BTreeMap<IpAddr, usize>,
    total: usize,
}

/// Why a client may not open another event stream.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamRefusal {
    /// This client already holds its share.
    Client { open: usize, max: usize },
    /// All clients together hold every slot.
    Total { max: usize },
}

/// One open event stream; its slot is given back when dropped.
pub struct EventStreamSlot {
    slots: Arc<EventStreamSlots>,
    client: IpAddr,
}

impl EventStreamSlots {
    pub fn new(per_client_max: usize, total_max: usize) -> EventStreamSlots {
        EventStreamSlots {
            per_client_max,
            total_max,
            open: Mutex::new(OpenStreams::default()),
        }
    }

    /// Takes a slot for `client`, or says which cap it would exceed.
    pub fn take(self: &Arc<Self>, client: IpAddr) -> Result<EventStreamSlot, StreamRefusal> {
        let mut open = self.lock();
        let held = open.per_client.get(&client).copied().unwrap_or(0);
        if held >= self.per_client_max {
            return Err(StreamRefusal::Client {
                open: held,
                max: self.per_client_max,
            });
        }
        if open.total >= self.total_max {
            return Err(StreamRefusal::Total {
                max: self.total_max,
            });
        }
        open.per_client.insert(client, held + 1);
        open.total += 1;
        Ok(EventStreamSlot {
            slots: self.clone(),
            client,
        })
    }

    /// Open streams in all.
    pub fn total(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OpenStreams> {
        // The counts are updated together before the lock is released: a panic elsewhere
        // cannot leave them inconsistent.
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for EventStreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.lock();
        open.total -= 1;
        if let Some(held) = open.per_client.get_mut(&self.client) {
            *held -= 1;
            if *held == 0 {
                open.per_client.remove(&self.client);
            }
        }
    }
}

/// The commission explanations pay out at, and the permit that keeps them one at a time.
pub struct ExplainGate {
    epsilon: walras_types::Fraction,
    permits: Arc<tokio::sync::Semaphore>,
}

impl ExplainGate {
    pub fn new(epsilon: walras_types::Fraction) -> ExplainGate {
        ExplainGate {
            epsilon,
            permits: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    /// The commission explanations pay out at (the engine's ε).
    pub fn epsilon(&self) -> walras_types::Fraction {
        self.epsilon
    }

    /// The one permit, or `None` while another explanation holds it.
    pub fn try_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.permits.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    //! The event-stream caps (per client and in all, and a closed stream freeing its slot), and
    //! the rate limiter against a token bucket written out in integer nanoseconds: same admits,
    //! same waits, for any rate, burst and sequence of requests from a few clients.

    use super::*;
    use governor::clock::FakeRelativeClock;
    use proptest::prelude::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn one_client_cannot_take_every_event_stream_slot() {
        let slots = Arc::new(EventStreamSlots::new(2, 3));
        let (a, b, c) = (ip(1), ip(2), ip(3));
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert_eq!(
            slots.take(a).err(),
            Some(StreamRefusal::Client { open: 2, max: 2 })
        );
        let _third = slots.take(b).unwrap();
        assert_eq!(
            slots.take(c).err(),
            Some(StreamRefusal::Total { max: 3 }),
            "the global cap still holds"
        );
        drop(first);
        assert_eq!(slots.total(), 2);
        assert!(slots.take(c).is_ok(), "a closed stream frees its slot");
    }

    #[test]
    fn a_client_gets_its_burst_then_the_rate_and_others_are_independent() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(10, 3, clock.clone()).unwrap();
        let (a, b) = (ip(1), ip(2));
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        assert_eq!(
            limiter.check(a),
            Err(Duration::from_millis(100)),
            "one request per 100 ms"
        );
        assert!(
            limiter.check(b).is_ok(),
            "another client has its own bucket"
        );
        clock.advance(Duration::from_millis(100));
        assert!(limiter.check(a).is_ok());
        assert!(limiter.check(a).is_err());
    }

    #[test]
    fn a_rate_of_zero_is_no_limit_and_a_burst_of_zero_is_one() {
        assert!(RateLimiter::new(0, 5).is_none());
        let limiter = RateLimiter::with_clock(1, 0, FakeRelativeClock::default()).unwrap();
        assert!(limiter.check(ip(1)).is_ok());
        assert_eq!(limiter.check(ip(1)), Err(Duration::from_secs(1)));
    }

    #[test]
    fn clients_back_to_a_full_bucket_are_forgotten_beyond_the_tracked_maximum() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(1_000, 1, clock.clone()).unwrap();
        for n in 0..CLIENTS_TRACKED_MAX as u32 {
            assert!(limiter.check(IpAddr::from(n.to_be_bytes())).is_ok());
        }
        assert_eq!(limiter.clients_tracked(), CLIENTS_TRACKED_MAX);
        // Every bucket is full again 1 ms later; governor forgets a client one replenish
        // interval after that (its test for "same as fresh" is conservative by one interval).
        clock.advance(Duration::from_millis(1));
        let busy = IpAddr::from([192, 168, 0, 1]);
        assert!(limiter.check(busy).is_ok());
        assert_eq!(limiter.clients_tracked(), CLIENTS_TRACKED_MAX + 1);
        clock.advance(Duration::from_millis(1));
        assert!(limiter.check(busy).is_ok());
        assert_eq!(
            limiter.clients_tracked(),
            1,
            "only the client seen in the last interval stays"
        );
        assert!(
            limiter.check(busy).is_err(),
            "a remembered client is still limited"
        );
    }

    /// A token bucket in nanoseconds of credit: full is `burst * t`, a request costs `t`, and
    /// credit grows by one per nanosecond.
    struct Bucket {
        credit_ns: u64,
        at_ns: u64,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_limiter_admits_and_waits_exactly_as_a_token_bucket(
            rate_per_s in 1u32..=1_000,
            burst in 0u32..=20,
            requests in proptest::collection::vec((0u8..3, 0u64..2_000_000_000), 1..200),
        ) {
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::with_clock(rate_per_s, burst, clock.clone()).unwrap();
            let t_ns = 1_000_000_000 / u64::from(rate_per_s);
            let full_ns = t_ns * u64::from(burst.max(1));
            let mut buckets: BTreeMap<u8, Bucket> = BTreeMap::new();
            let mut now_ns = 0u64;
            for (client, gap_ns) in requests {
                // Gaps mostly shorter than one interval, so that clients run dry.
                let gap_ns = gap_ns % (2 * t_ns);
                clock.advance(Duration::from_nanos(gap_ns));
                now_ns += gap_ns;
                let bucket = buckets.entry(client).or_insert(Bucket { credit_ns: full_ns, at_ns: now_ns });
                bucket.credit_ns = (bucket.credit_ns + (now_ns - bucket.at_ns)).min(full_ns);
                bucket.at_ns = now_ns;
                let expected = if bucket.credit_ns >= t_ns {
                    bucket.credit_ns -= t_ns;
                    Ok(())
                } else {
                    Err(Duration::from_nanos(t_ns - bucket.credit_ns))
                };
                prop_assert_eq!(limiter.check(ip(client)), expected);
            }
        }
    }
}
