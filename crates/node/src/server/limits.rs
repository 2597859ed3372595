//! Per-client rate limiting: a token bucket per IP address, refilled at `rate_per_s` up to
//! `burst`. Pure (the caller passes the time), so it is tested without sleeping.

use std::collections::HashMap;
use std::net::IpAddr;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
