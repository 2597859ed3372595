//! The parallel pipeline (paper §2.5): records are normalised and routed on the caller's thread,
//! instruments are partitioned by asset across worker threads (so every venue of one asset, its
//! valuations and its live aggregate stay on one core, the paper's static assignment), and a
//! collector publishes one deterministic aggregate per publication tick.
//!
//! Overload policy: queues are bounded and the router blocks when one is full; book messages are
//! never dropped (a dropped delta is a corrupt book). Work is shed at valuation instead: a worker
//! drains its queue in batches and values each instrument once per batch, on its newest book
//! (conflation to the newest book per instrument). Because a tick is valued on the book as of
//! the tick, the published sequence does not depend on how much was conflated, so it is
//! bit-identical for any thread count.

use crate::aggregate::{
    aggregate_all, aggregate_asset, InstrumentQuote, PriceStatus, PublishedPrice,
};
use crate::book::Health;
use crate::config::OracleConfig;
use crate::latency::{histogram, micros, LatencyReport, Percentiles};
use crate::partition::Partition;
use crate::record::Record;
use crate::router::{InstrumentKey, Routed, Router};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Most queued items a worker takes in one batch.
pub const BATCH_MAX: usize = 1_024;
/// Parse errors kept verbatim in the report.
pub const ERRORS_KEPT_MAX: usize = 20;
/// Most worker threads.
pub const THREADS_MAX: usize = 256;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BookSummary {
    pub instruments: usize,
    pub resyncs: BTreeMap<String, u64>,
    /// Instruments that resynced at least once and are synced at the end.
    pub recovered: usize,
    /// Instruments not synced at the end, with their health.
    pub unrecovered: Vec<String>,
    /// Venue prices used by an aggregate while their book was not `Synced` (must be 0).
    pub unhealthy_books_used: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub threads: usize,
    pub records: usize,
    pub events: u64,
    pub parse_errors: u64,
    pub errors: Vec<String>,
    pub ticks: u64,
    /// SHA-256 over the JSON of every tick's published prices, in order.
    pub digest: String,
    pub elapsed_ms: f64,
    pub events_per_s: f64,
    pub valuations: u64,
    pub latency: LatencyReport,
    pub status_counts: BTreeMap<String, u64>,
    pub books: BookSummary,
    /// The last tick's prices.
    pub prices: Vec<PublishedPrice>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayOptions {
    pub threads: usize,
    /// `None`: as fast as possible; `Some(s)`: paced at `s` × recorded time.
    pub speed: Option<f64>,
}

enum WorkItem {
    Event {
        item: Box<Routed>,
        recv_ns: u64,
        sent: Instant,
    },
    Tick {
        index: u64,
        now_ns: u64,
    },
    Stop {
        now_ns: u64,
    },
}

struct TickResult {
    index: u64,
    now_ns: u64,
    quotes: Vec<InstrumentQuote>,
}

struct WorkerDone {
    partition_events: u64,
    valuations: u64,
    resyncs: BTreeMap<String, u64>,
    books: Vec<(InstrumentKey, Health, u64)>,
    to_valuation: Histogram<u64>,
    to_aggregate: Histogram<u64>,
}

type Rates = Arc<RwLock<BTreeMap<String, f64>>>;

fn worker(
    cfg: OracleConfig,
    rx: crossbeam_channel::Receiver<WorkItem>,
    tx: crossbeam_channel::Sender<TickResult>,
    rates: Rates,
) -> WorkerDone {
    let mut part = Partition::new(cfg.clone());
    let mut to_valuation = histogram();
    let mut to_aggregate = histogram();
    let method = cfg.method.name();
    let mut pending: Vec<(InstrumentKey, Instant)> = Vec::new();
    let mut last_ns = 0u64;
    let mut batch: Vec<WorkItem> = Vec::with_capacity(BATCH_MAX);
    // Values the dirty instruments (conflated), then the live aggregate of each touched asset.
    let mut flush =
        |part: &mut Partition, pending: &mut Vec<(InstrumentKey, Instant)>, now_ns: u64| {
            if pending.is_empty() {
                return;
            }
            let valued = part.value_dirty();
            let valued_at = Instant::now();
            for (_, sent) in pending.iter() {
                let _ = to_valuation.record(micros(valued_at.duration_since(*sent)));
            }
            let assets: BTreeSet<String> = valued
                .iter()
                .filter_map(|k| part.base_of(k).map(str::to_string))
                .collect();
            let live_rates = rates.read().map(|r| r.clone()).unwrap_or_default();
            let mut done_at: BTreeMap<String, Instant> = BTreeMap::new();
            for asset in assets {
                let quotes = part.asset_quotes(&asset, now_ns);
                let _ = aggregate_asset(
                    &asset,
                    &quotes,
                    &live_rates,
                    now_ns,
                    &cfg.aggregate,
                    &method,
                );
                done_at.insert(asset, Instant::now());
            }
            for (key, sent) in pending.drain(..) {
                let asset = part.base_of(&key).unwrap_or_default().to_string();
                if let Some(at) = done_at.get(&asset) {
                    let _ = to_aggregate.record(micros(at.duration_since(sent)));
                }
            }
        };
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while batch.len() < BATCH_MAX {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        let mut stop = false;
        for item in batch.drain(..) {
            match item {
                WorkItem::Event {
                    item,
                    recv_ns,
                    sent,
                } => {
                    part.apply(&item, recv_ns);
                    pending.push((item.info().key.clone(), sent));
                    last_ns = recv_ns;
                }
                WorkItem::Tick { index, now_ns } => {
                    flush(&mut part, &mut pending, last_ns);
                    let quotes = part.quotes(now_ns);
                    if tx
                        .send(TickResult {
                            index,
                            now_ns,
                            quotes,
                        })
                        .is_err()
                    {
                        stop = true;
                    }
                }
                WorkItem::Stop { now_ns } => {
                    flush(&mut part, &mut pending, now_ns);
                    stop = true;
                }
            }
        }
        flush(&mut part, &mut pending, last_ns);
        if stop {
            break;
        }
    }
    WorkerDone {
        partition_events: part.events,
        valuations: part.valuations,
        resyncs: part.resyncs.clone(),
        books: part.book_report(last_ns),
        to_valuation,
        to_aggregate,
    }
}

struct CollectorDone {
    ticks: u64,
    digest: String,
    status_counts: BTreeMap<String, u64>,
    unhealthy_used: u64,
    last: Vec<PublishedPrice>,
}

fn collector(
    cfg: OracleConfig,
    threads: usize,
    rx: crossbeam_channel::Receiver<TickResult>,
    rates: Rates,
) -> CollectorDone {
    let method = cfg.method.name();
    let mut waiting: BTreeMap<u64, (u64, usize, Vec<InstrumentQuote>)> = BTreeMap::new();
    let mut hasher = Sha256::new();
    let mut done = CollectorDone {
        ticks: 0,
        digest: String::new(),
        status_counts: BTreeMap::new(),
        unhealthy_used: 0,
        last: Vec::new(),
    };
    while let Ok(r) = rx.recv() {
        let entry = waiting.entry(r.index).or_insert((r.now_ns, 0, Vec::new()));
        entry.1 += 1;
        entry.2.extend(r.quotes);
        // Ticks complete in order: each worker sends its ticks in order.
        while let Some(first) = waiting.first_entry() {
            if first.get().1 < threads {
                break;
            }
            let (now_ns, _, mut quotes) = first.remove();
            quotes.sort_by(|a, b| (&a.venue, &a.symbol).cmp(&(&b.venue, &b.symbol)));
            let published = aggregate_all(&quotes, now_ns, &cfg.aggregate, &method);
            let health: BTreeMap<(&str, &str), &Health> = quotes
                .iter()
                .map(|q| ((q.venue.as_str(), q.symbol.as_str()), &q.health))
                .collect();
            let mut new_rates = BTreeMap::new();
            for p in &published {
                *done
                    .status_counts
                    .entry(format!("{:?}", p.status).to_lowercase())
                    .or_default() += 1;
                for u in &p.venues_used {
                    if health
                        .get(&(u.venue.as_str(), u.symbol.as_str()))
                        .is_none_or(|h| !h.is_good())
                    {
                        done.unhealthy_used += 1;
                    }
                }
                if let (Some(price), PriceStatus::Ok) = (p.price, p.status) {
                    new_rates.insert(p.asset.clone(), price);
                }
            }
            if let Ok(mut r) = rates.write() {
                *r = new_rates;
            }
            hasher.update(serde_json::to_vec(&published).unwrap_or_default());
            done.ticks += 1;
            done.last = published;
        }
    }
    done.digest = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    done
}

/// Replays recorded records through the pipeline on `options.threads` workers.
pub fn replay(records: &[Record], cfg: &OracleConfig, options: ReplayOptions) -> ReplayReport {
    let threads = options.threads.clamp(1, THREADS_MAX);
    let rates: Rates = Arc::new(RwLock::new(BTreeMap::new()));
    let started = Instant::now();
    let (result_tx, result_rx) = crossbeam_channel::bounded::<TickResult>(threads * 4);
    let mut report = ReplayReport {
        threads,
        records: records.len(),
        ..ReplayReport::default()
    };
    let (workers_done, collected) = std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (tx, rx) = crossbeam_channel::bounded::<WorkItem>(cfg.queue_capacity.max(1));
            senders.push(tx);
            let (cfg, result_tx, rates) = (cfg.clone(), result_tx.clone(), rates.clone());
            handles.push(scope.spawn(move || worker(cfg, rx, result_tx, rates)));
        }
        drop(result_tx);
        let collector_handle = {
            let (cfg, rates) = (cfg.clone(), rates.clone());
            scope.spawn(move || collector(cfg, threads, result_rx, rates))
        };
        let mut router = Router::new(cfg.kraken_depth);
        let mut owner: BTreeMap<String, usize> = BTreeMap::new();
        let interval = cfg.publish_interval_ns.max(1);
        let mut next_tick = records
            .first()
            .map_or(0, |r| (r.recv_ns / interval + 1) * interval);
        let mut tick_index = 0u64;
        let mut last_ns = 0u64;
        let send_tick = |tick_index: &mut u64, now_ns: u64| {
            for tx in &senders {
                let _ = tx.send(WorkItem::Tick {
                    index: *tick_index,
                    now_ns,
                });
            }
            *tick_index += 1;
        };
        for record in records {
            if let Some(speed) = options.speed.filter(|s| *s > 0.0) {
                let due = started + Duration::from_nanos((record.recv_ns as f64 / speed) as u64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            while record.recv_ns >= next_tick {
                send_tick(&mut tick_index, next_tick);
                next_tick += interval;
            }
            last_ns = last_ns.max(record.recv_ns);
            match router.route(record) {
                Ok(items) => {
                    for item in items {
                        let n = owner.len();
                        let w = *owner.entry(item.info().base.clone()).or_insert(n % threads);
                        report.events += 1;
                        let _ = senders[w].send(WorkItem::Event {
                            item: Box::new(item),
                            recv_ns: record.recv_ns,
                            sent: Instant::now(),
                        });
                    }
                }
                Err(e) => {
                    report.parse_errors += 1;
                    if report.errors.len() < ERRORS_KEPT_MAX {
                        report.errors.push(e.to_string());
                    }
                }
            }
        }
        send_tick(
            &mut tick_index,
            last_ns.max(next_tick.saturating_sub(interval)),
        );
        for tx in &senders {
            let _ = tx.send(WorkItem::Stop { now_ns: last_ns });
        }
        drop(senders);
        let done: Vec<Option<WorkerDone>> = handles.into_iter().map(|h| h.join().ok()).collect();
        (done, collector_handle.join().ok())
    });
    let elapsed = started.elapsed();
    let mut to_valuation = histogram();
    let mut to_aggregate = histogram();
    let mut books: Vec<(InstrumentKey, Health, u64)> = Vec::new();
    for w in workers_done.into_iter().flatten() {
        let _ = to_valuation.add(&w.to_valuation);
        let _ = to_aggregate.add(&w.to_aggregate);
        report.valuations += w.valuations;
        for (k, v) in w.resyncs {
            *report.books.resyncs.entry(k).or_default() += v;
        }
        books.extend(w.books);
        debug_assert!(w.partition_events <= report.events);
    }
    books.sort();
    report.books.instruments = books.len();
    report.books.recovered = books
        .iter()
        .filter(|b| b.2 > 0 && b.1 == Health::Synced)
        .count();
    report.books.unrecovered = books
        .iter()
        .filter(|b| matches!(b.1, Health::Resyncing(_)))
        .map(|b| format!("{} {}", b.0, crate::aggregate::health_text(&b.1)))
        .collect();
    if let Some(c) = collected {
        report.ticks = c.ticks;
        report.digest = c.digest;
        report.status_counts = c.status_counts;
        report.books.unhealthy_books_used = c.unhealthy_used;
        report.prices = c.last;
    }
    report.elapsed_ms = elapsed.as_secs_f64() * 1e3;
    report.events_per_s = report.events as f64 / elapsed.as_secs_f64().max(1e-9);
    report.latency = LatencyReport {
        event_to_valuation_us: Percentiles::of(&to_valuation),
        event_to_aggregate_us: Percentiles::of(&to_aggregate),
    };
    report
}
