//! The oracle as a long-running process drives it: records arrive one at a time (from a
//! recorded feed replayed at its timestamps, or from live connectors), and prices are published
//! on demand. Single-threaded and pure: time comes in as `now_ns`, nothing here sleeps or does
//! I/O. The node's oracle task owns one [`LiveOracle`] and one record source.
//!
//! The threaded `replay` is the parallel form for a whole recorded feed;
//! a node values a few dozen assets at a publication interval of 100 ms or more, which one
//! thread does with room to spare (see `docs/oracle.md`), so the node does not need worker
//! threads and keeps the published sequence trivially deterministic.

use crate::aggregate::{aggregate_all, PriceStatus, PublishedPrice};
use crate::book::Health;
use crate::config::OracleConfig;
use crate::partition::Partition;
use crate::record::{Record, RecordKind};
use crate::router::{InstrumentKey, RouteError, Router};
use std::collections::{BTreeMap, BTreeSet};

/// Counts of books by health at one publication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HealthCounts {
    pub synced: u64,
    pub resyncing: u64,
    pub crossed: u64,
    pub stale: u64,
    pub thin: u64,
}

/// One venue's book health counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VenueHealth {
    pub venue: String,
    pub counts: HealthCounts,
}

/// What one publication gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Publication {
    /// The oracle's time of the publication.
    pub now_ns: u64,
    /// One price per asset seen, in a fixed (name) order.
    pub prices: Vec<PublishedPrice>,
    /// Book health per venue, by venue name.
    pub venues: Vec<VenueHealth>,
    /// Venue prices used from a book that is not `Synced` at `now_ns` (always 0: the
    /// aggregation takes only synced books; counted so that a test and a metric can show it).
    pub unhealthy_used: u64,
}

impl Publication {
    /// The price of `asset` when its status is `Ok`.
    pub fn healthy_price(&self, asset: &str) -> Option<f64> {
        self.prices
            .iter()
            .find(|p| p.asset == asset)
            .filter(|p| p.status == PriceStatus::Ok)
            .and_then(|p| p.price)
    }
}

/// Records in, prices out.
pub struct LiveOracle {
    cfg: OracleConfig,
    router: Router,
    partition: Partition,
    /// Records the normalisers or the router refused (kept counting: a venue changing its
    /// format shows up here, not as a silently frozen price).
    pub parse_errors: u64,
    pub last_error: Option<String>,
    pub records: u64,
}

impl LiveOracle {
    pub fn new(cfg: OracleConfig) -> LiveOracle {
        LiveOracle {
            router: Router::new(cfg.kraken_depth),
            partition: Partition::new(cfg.clone()),
            cfg,
            parse_errors: 0,
            last_error: None,
            records: 0,
        }
    }

    /// Registers an instrument's base and quote from metadata (see [`Router::register`]).
    pub fn register(
        &mut self,
        venue: &str,
        symbol: &str,
        base: &str,
        quote: &str,
    ) -> Result<(), RouteError> {
        self.router.register(venue, symbol, base, quote)
    }

    /// Applies one record at its receive time. A refused record is counted and returned as the
    /// error; the books it would have touched are unchanged (a venue's sequencing rule catches
    /// what it hid).
    pub fn ingest(&mut self, record: &Record) -> Result<(), RouteError> {
        self.records += 1;
        match self.router.route(record) {
            Ok(items) => {
                for item in &items {
                    self.partition.apply(item, record.recv_ns);
                }
                Ok(())
            }
            Err(error) => {
                self.parse_errors += 1;
                self.last_error = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// Instruments whose book waits for a snapshot at `now_ns` (a connector fetches or
    /// resubscribes for them).
    pub fn resyncing(&self, now_ns: u64) -> Vec<InstrumentKey> {
        self.partition
            .book_report(now_ns)
            .into_iter()
            .filter(|(_, health, _)| matches!(health, Health::Resyncing(_)))
            .map(|(key, _, _)| key)
            .collect()
    }

    /// Values the books that changed, then aggregates every asset at `now_ns`.
    pub fn publish(&mut self, now_ns: u64) -> Publication {
        self.partition.value_dirty();
        let mut quotes = self.partition.quotes(now_ns);
        quotes.sort_by(|a, b| (&a.venue, &a.symbol).cmp(&(&b.venue, &b.symbol)));
        let prices = aggregate_all(
            &quotes,
            now_ns,
            &self.cfg.aggregate,
            &self.cfg.method.name(),
        );
        let health: BTreeMap<(&str, &str), &Health> = quotes
            .iter()
            .map(|q| ((q.venue.as_str(), q.symbol.as_str()), &q.health))
            .collect();
        let unhealthy_used = prices
            .iter()
            .flat_map(|p| &p.venues_used)
            .filter(|u| {
                health
                    .get(&(u.venue.as_str(), u.symbol.as_str()))
                    .is_none_or(|h| !h.is_good())
            })
            .count() as u64;
        let mut venues: BTreeMap<String, HealthCounts> = BTreeMap::new();
        for q in &quotes {
            let counts = venues.entry(q.venue.clone()).or_default();
            match q.health {
                Health::Synced => counts.synced += 1,
                Health::Resyncing(_) => counts.resyncing += 1,
                Health::Crossed => counts.crossed += 1,
                Health::Stale => counts.stale += 1,
                Health::Thin => counts.thin += 1,
            }
        }
        Publication {
            now_ns,
            prices,
            venues: venues
                .into_iter()
                .map(|(venue, counts)| VenueHealth { venue, counts })
                .collect(),
            unhealthy_used,
        }
    }
}

/// A recorded feed replayed at its timestamps, looping. Each pass is shifted to start where the
/// previous one ended, and begins with a disconnect of every connection the feed uses: the
/// books resync and take the feed's opening snapshots again, as a connector reconnecting
/// would. (Without it the second pass's sequence numbers would run backwards and every book
/// would rightly refuse them.)
pub struct LoopedFeed {
    records: Vec<Record>,
    connections: BTreeSet<(String, u32)>,
    /// Feed time of the first record (time 0 of a pass).
    first_ns: u64,
    /// Length of one pass.
    period_ns: u64,
    pass: u64,
    next: usize,
    /// Disconnects owed at the start of the current pass.
    owe_disconnects: bool,
}

/// The pause between the last record of a pass and the first of the next.
pub const LOOP_GAP_NS: u64 = 100_000_000;

impl LoopedFeed {
    /// `None` for a feed without records.
    pub fn new(records: Vec<Record>) -> Option<LoopedFeed> {
        let first_ns = records.iter().map(|r| r.recv_ns).min()?;
        let last_ns = records.iter().map(|r| r.recv_ns).max()?;
        let connections = records.iter().map(|r| (r.venue.clone(), r.conn)).collect();
        let mut records = records;
        // Receive order is time order; a stable sort keeps same-time records as recorded.
        records.sort_by_key(|r| r.recv_ns);
        Some(LoopedFeed {
            records,
            connections,
            first_ns,
            period_ns: last_ns - first_ns + LOOP_GAP_NS,
            pass: 0,
            next: 0,
            owe_disconnects: false,
        })
    }

    /// Length of one pass.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Passes started so far (the first is 0).
    pub fn pass(&self) -> u64 {
        self.pass
    }

    /// The records due by `now_ns` (time since the replay started), with their receive times
    /// moved onto that clock.
    pub fn due(&mut self, now_ns: u64) -> Vec<Record> {
        let mut out = Vec::new();
        loop {
            let pass_start = self.pass.saturating_mul(self.period_ns);
            if self.owe_disconnects {
                if pass_start > now_ns {
                    return out;
                }
                out.extend(self.connections.iter().map(|(venue, conn)| Record {
                    recv_ns: pass_start,
                    venue: venue.clone(),
                    conn: *conn,
                    kind: RecordKind::Disconnect,
                    path: None,
                    payload: String::new(),
                }));
                self.owe_disconnects = false;
            }
            let Some(record) = self.records.get(self.next) else {
                self.pass += 1;
                self.next = 0;
                self.owe_disconnects = true;
                continue;
            };
            let at = pass_start + (record.recv_ns - self.first_ns);
            if at > now_ns {
                return out;
            }
            let mut record = record.clone();
            record.recv_ns = at;
            out.push(record);
            self.next += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_feed, FeedConfig};
    use crate::venues::{default_assets, default_venues};

    fn feed(seconds: u64, faults: f64) -> Vec<Record> {
        generate_feed(&FeedConfig {
            venues: default_venues(5),
            assets: default_assets(3),
            seconds,
            seed: 7,
            faults,
            ..FeedConfig::default()
        })
    }

    #[test]
    fn a_looped_feed_keeps_time_moving_and_resyncs_every_pass() {
        let records = feed(2, 0.0);
        let count = records.len();
        let mut looped = LoopedFeed::new(records).unwrap();
        let period = looped.period_ns();
        let mut all = Vec::new();
        let mut now = 0;
        while now < 3 * period {
            now += 50_000_000;
            all.extend(looped.due(now));
        }
        assert!(all.windows(2).all(|w| w[0].recv_ns <= w[1].recv_ns));
        assert!(all.iter().all(|r| r.recv_ns <= now));
        let disconnects = all
            .iter()
            .filter(|r| r.kind == RecordKind::Disconnect)
            .count();
        // Passes 1 and 2 began (the third pass starts at 3 × period, at most `now`).
        assert!(looped.pass() >= 2);
        assert!(disconnects >= 2 * 5, "{disconnects}");
        assert!(all.len() >= 2 * count);
    }

    #[test]
    fn the_live_oracle_prices_every_asset_through_passes_of_a_faulty_feed() {
        let records = feed(4, 0.01);
        let mut looped = LoopedFeed::new(records).unwrap();
        let period = looped.period_ns();
        let mut oracle = LiveOracle::new(OracleConfig::default());
        let mut now = 0;
        let mut ok_after_second_pass = 0;
        let mut publications = 0;
        let mut unhealthy_seen = 0;
        while now < 2 * period + period / 2 {
            now += 100_000_000;
            for record in looped.due(now) {
                let _ = oracle.ingest(&record);
            }
            let publication = oracle.publish(now);
            publications += 1;
            // Never an unhealthy book among the venues used.
            assert_eq!(publication.unhealthy_used, 0);
            unhealthy_seen += publication
                .venues
                .iter()
                .map(|v| v.counts.resyncing + v.counts.crossed)
                .sum::<u64>();
            if now > period + period / 2 {
                ok_after_second_pass += ["BTC", "ETH", "LINK"]
                    .iter()
                    .filter(|a| publication.healthy_price(a).is_some())
                    .count();
            }
        }
        assert!(publications > 20);
        // The faults and the loop's disconnects did make books unhealthy along the way.
        assert!(unhealthy_seen > 0);
        assert_eq!(oracle.parse_errors, 0, "{:?}", oracle.last_error);
        // Half a pass after the loop's disconnects, every asset is priced again.
        assert!(ok_after_second_pass > 0);
        let last = oracle.publish(now);
        for asset in ["BTC", "ETH", "LINK"] {
            assert!(
                last.healthy_price(asset).is_some(),
                "{asset}: {:?}",
                last.prices
            );
        }
    }
}
