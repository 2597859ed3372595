//! Per-client limits: a token bucket per IP address, refilled at `rate_per_s` up to `burst`
//! (pure: the caller passes the time, so it is tested without sleeping), and a cap on the event
//! streams each client (and all clients together) may hold open.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The most clients tracked; beyond it, buckets that are full again are forgotten (a full
/// bucket carries no information), bounding memory against many source addresses.
const CLIENTS_TRACKED_MAX: usize = 65_536;

struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

pub struct RateLimiter {
    rate_per_s: f64,
    burst: f64,
    buckets: HashMap<IpAddr, Bucket>,
}

impl RateLimiter {
    /// `rate_per_s` requests per second per client, with bursts of up to `burst`.
    pub fn new(rate_per_s: u32, burst: u32) -> RateLimiter {
        RateLimiter {
            rate_per_s: f64::from(rate_per_s),
            burst: f64::from(burst.max(1)),
            buckets: HashMap::new(),
        }
    }

    /// Takes one token for `client` at `now`; `Err(seconds)` says how long until one is free.
    pub fn check(&mut self, client: IpAddr, now: Instant) -> Result<(), f64> {
        if self.buckets.len() >= CLIENTS_TRACKED_MAX {
            self.forget_full(now);
        }
        let (rate, burst) = (self.rate_per_s, self.burst);
        let bucket = self.buckets.entry(client).or_insert(Bucket {
            tokens: burst,
            refilled_at: now,
        });
        let elapsed_s = now
            .saturating_duration_since(bucket.refilled_at)
            .as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed_s * rate).min(burst);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err((1.0 - bucket.tokens) / rate)
        }
    }

    fn forget_full(&mut self, now: Instant) {
        let (rate, burst) = (self.rate_per_s, self.burst);
        self.buckets.retain(|_, bucket| {
            let elapsed_s = now
                .saturating_duration_since(bucket.refilled_at)
                .as_secs_f64();
            bucket.tokens + elapsed_s * rate < burst
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_client_cannot_take_every_event_stream_slot() {
        let slots = Arc::new(EventStreamSlots::new(2, 3));
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            "10.0.0.3".parse().unwrap(),
        );
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
        let mut limiter = RateLimiter::new(10, 3);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check(a, start).is_ok());
        }
        let wait_s = limiter.check(a, start).unwrap_err();
        assert!(
            (wait_s - 0.1).abs() < 1e-9,
            "one token per 100 ms, got {wait_s}"
        );
        assert!(
            limiter.check(b, start).is_ok(),
            "another client has its own bucket"
        );
        assert!(limiter.check(a, start + Duration::from_millis(100)).is_ok());
        assert!(limiter
            .check(a, start + Duration::from_millis(100))
            .is_err());
    }
}
