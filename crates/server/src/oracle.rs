//! The node's valuation oracle: a background thread that owns a [`LiveOracle`] and a record
//! source (a recorded feed replayed at its timestamps, looping), publishes per-asset prices
//! through a watch channel, the `oracle` event and metrics, and what the producer and the block
//! reporter read from it: the tâtonnement start ([`choose_start`]) and the advisory band check
//! ([`band_check`]).
//!
//! Advisory only. Validators see different feeds at different times, so nothing committed may
//! depend on an oracle: the band check runs after a block is durable and only reports; the warm
//! start only moves where the proposer's search begins (the header carries the result, and
//! followers and recovery check it exactly, whatever the start).

use prometheus::core::Collector;
use prometheus::{Encoder, Gauge, GaugeVec, IntCounter, IntCounterVec, IntGaugeVec, Opts};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::{broadcast, watch};
use walras_api::wire::{
    OracleBandJson, OracleDeviationJson, OraclePriceJson, OraclePricesJson,
    OracleVenueExcludedJson, OracleVenueJson, OracleVenueUsedJson,
};
use walras_oracle::read_jsonl;
use walras_oracle::OracleConfig as CoreConfig;
use walras_oracle::PriceStatus;
pub use walras_oracle::{AssetMap, AssetMapError};
use walras_oracle::{LiveOracle, LoopedFeed, Publication};

/// Where the tâtonnement of a new block starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WarmStart {
    /// From the books' own fit (median limit prices). `walras bench warm-start` found it best on
    /// whole two-sided market batches, but in the node (a block's new offers against resting
    /// books) it took more iterations than `Previous` (BENCHMARKS.md, "Where tâtonnement
    /// should start").
    Fit,
    /// From the previous block's valuations, else the fit. The default: fewest iterations in
    /// the node under the trading load (BENCHMARKS.md).
    #[default]
    Previous,
    /// From the oracle's prices when every asset has a healthy one, else as `Previous`.
    Oracle,
}

/// Which start a block's tâtonnement used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartUsed {
    Fit,
    Previous,
    Oracle,
}

impl StartUsed {
    pub fn name(self) -> &'static str {
        match self {
            StartUsed::Fit => "fit",
            StartUsed::Previous => "previous",
            StartUsed::Oracle => "oracle",
        }
    }
}

/// The start prices for `policy`: `oracle` are the oracle's prices per exchange unit (one per
/// asset, in asset order) when every asset has a healthy one, `previous` the last block's
/// valuations. A start is used only when it names every asset with a positive finite price.
pub fn choose_start(
    policy: WarmStart,
    previous: &[u128],
    assets: u16,
    oracle: Option<&[f64]>,
) -> (Option<Vec<f64>>, StartUsed) {
    let n = usize::from(assets);
    if policy == WarmStart::Oracle {
        if let Some(prices) =
            oracle.filter(|p| p.len() == n && p.iter().all(|x| x.is_finite() && *x > 0.0))
        {
            return (Some(prices.to_vec()), StartUsed::Oracle);
        }
    }
    if policy != WarmStart::Fit && previous.len() == n && previous.iter().all(|v| *v > 0) {
        return (
            Some(previous.iter().map(|v| *v as f64).collect()),
            StartUsed::Previous,
        );
    }
    (None, StartUsed::Fit)
}

/// Where the oracle's records come from.
#[derive(Clone, Debug)]
pub enum OracleSource {
    /// A recorded feed (`walras gen feed`, JSON lines), replayed paced at its receive times, looping.
    Feed(PathBuf),
    /// Live venues through the connectors of `walras-oracle-net`.
    Venues(Vec<VenueUrl>),
}

/// `walras node --oracle-*`.
#[derive(Clone, Debug)]
pub struct OracleSettings {
    pub source: OracleSource,
    /// `None`: the default map for the genesis's asset count ([`AssetMap::default_for`]).
    pub asset_map: Option<AssetMap>,
    /// Band check: deviations beyond this many basis points are flagged.
    pub band_bps: f64,
    /// How often prices are published.
    pub publish_interval: Duration,
    /// A publication older than this (wall clock) is not used for a warm start.
    pub max_age: Duration,
    /// PEM files of certificate authorities trusted beside Mozilla's roots for `wss://` and
    /// `https://` venues (`--oracle-ca`).
    pub tls_ca_files: Vec<PathBuf>,
}

impl OracleSettings {
    pub fn feed(path: PathBuf) -> OracleSettings {
        OracleSettings {
            source: OracleSource::Feed(path),
            asset_map: None,
            band_bps: 200.0,
            publish_interval: Duration::from_millis(200),
            max_age: Duration::from_secs(5),
            tls_ca_files: Vec::new(),
        }
    }
}

/// The `oracle` event is sent at most this often (prices are published more often).
const ORACLE_EVENT_EVERY: Duration = Duration::from_secs(1);

/// One publication as the node keeps it.
#[derive(Debug)]
pub struct OracleSnapshot {
    pub json: OraclePricesJson,
    /// When it was published (wall clock of this process).
    pub published: Instant,
    /// Healthy price per exchange unit, by exchange asset id.
    pub per_unit: BTreeMap<u16, f64>,
}

/// What the SSE stream sends besides blocks.
#[derive(Clone, Debug)]
pub enum OracleEvent {
    Prices(Arc<OraclePricesJson>),
    Band(Arc<OracleBandJson>),
}

/// The oracle's side of the node's shared state.
pub struct OracleHandle {
    pub map: AssetMap,
    pub band_bps: f64,
    pub max_age: Duration,
    pub source: String,
    /// The latest publication (`None` before the first).
    pub latest: watch::Sender<Option<Arc<OracleSnapshot>>>,
    pub events: broadcast::Sender<OracleEvent>,
    pub metrics: OracleMetrics,
}

impl OracleHandle {
    pub fn new(settings: &OracleSettings, assets: u16) -> Result<OracleHandle, prometheus::Error> {
        let map = settings
            .asset_map
            .clone()
            .unwrap_or_else(|| AssetMap::default_for(assets));
        Ok(OracleHandle {
            map,
            band_bps: settings.band_bps,
            max_age: settings.max_age,
            source: match &settings.source {
                OracleSource::Feed(path) => format!("feed {}", path.display()),
                OracleSource::Venues(venues) => format!(
                    "venues {}",
                    venues
                        .iter()
                        .map(|v| v.venue.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            },
            latest: watch::channel(None).0,
            events: broadcast::channel(64).0,
            metrics: OracleMetrics::new()?,
        })
    }

    pub fn latest(&self) -> Option<Arc<OracleSnapshot>> {
        self.latest.borrow().clone()
    }

    /// The oracle's start prices per exchange unit, when every asset `0..assets` has a healthy
    /// price in a publication younger than `max_age`.
    pub fn start_prices(&self, assets: u16) -> Option<Vec<f64>> {
        let latest = self.latest()?;
        if latest.published.elapsed() > self.max_age {
            return None;
        }
        (0..assets)
            .map(|id| latest.per_unit.get(&id).copied())
            .collect()
    }

    /// Turns a core publication into the node's snapshot: mapped assets only, by id.
    pub fn snapshot(&self, publication: &Publication, published_unix_ms: u64) -> OracleSnapshot {
        let mut per_unit = BTreeMap::new();
        let prices = self
            .map
            .entries()
            .iter()
            .map(|entry| {
                let found = publication.prices.iter().find(|p| p.asset == entry.symbol);
                if let Some(price) = publication.healthy_price(&entry.symbol) {
                    per_unit.insert(entry.id, price / entry.units as f64);
                }
                OraclePriceJson {
                    asset: entry.id,
                    symbol: entry.symbol.clone(),
                    units: entry.units.to_string(),
                    price: found.and_then(|p| p.price),
                    status: found.map_or("unavailable".into(), |p| status_name(p.status)),
                    age_ms: found.map_or(0.0, |p| p.age_ns as f64 / 1e6),
                    dispersion_bps: found.map_or(0.0, |p| p.dispersion_bps),
                    venues_used: found.map_or_else(Vec::new, |p| {
                        p.venues_used
                            .iter()
                            .map(|u| OracleVenueUsedJson {
                                venue: u.venue.clone(),
                                symbol: u.symbol.clone(),
                                price: u.price,
                                weight: u.weight,
                            })
                            .collect()
                    }),
                    venues_excluded: found.map_or_else(
                        || {
                            vec![OracleVenueExcludedJson {
                                venue: String::new(),
                                symbol: entry.symbol.clone(),
                                reason: "no venue quotes this asset in the oracle's records".into(),
                            }]
                        },
                        |p| {
                            p.venues_excluded
                                .iter()
                                .map(|x| OracleVenueExcludedJson {
                                    venue: x.venue.clone(),
                                    symbol: x.symbol.clone(),
                                    reason: x.reason.clone(),
                                })
                                .collect()
                        },
                    ),
                    method: found.map_or_else(String::new, |p| p.method.clone()),
                }
            })
            .collect();
        OracleSnapshot {
            json: OraclePricesJson {
                published_unix_ms,
                numeraire: self.map.numeraire.clone(),
                source: self.source.clone(),
                prices,
                venues: publication
                    .venues
                    .iter()
                    .map(|v| OracleVenueJson {
                        venue: v.venue.clone(),
                        synced: v.counts.synced,
                        resyncing: v.counts.resyncing,
                        crossed: v.counts.crossed,
                        stale: v.counts.stale,
                        thin: v.counts.thin,
                    })
                    .collect(),
            },
            published: Instant::now(),
            per_unit,
        }
    }
}

fn status_name(status: PriceStatus) -> String {
    match status {
        PriceStatus::Ok => "ok",
        PriceStatus::InsufficientVenues => "insufficient_venues",
        PriceStatus::Unavailable => "unavailable",
    }
    .into()
}

/// The band check of one block: each asset's clearing valuation ratio against the oracle's
/// price ratio, relative to the lowest-id asset with a healthy oracle price. `None` without a
/// reference or without valuations for every asset.
pub fn band_check(
    map: &AssetMap,
    per_unit: &BTreeMap<u16, f64>,
    valuations: &[u128],
    height: u64,
    band_bps: f64,
) -> Option<OracleBandJson> {
    let valuation = |id: u16| valuations.get(usize::from(id)).copied().filter(|v| *v > 0);
    let (&reference, &reference_price) =
        per_unit.iter().find(|(id, _)| valuation(**id).is_some())?;
    let reference_valuation = valuation(reference)? as f64;
    let assets = per_unit
        .iter()
        .filter_map(|(&id, &price)| {
            let clearing = valuation(id)? as f64 / reference_valuation;
            let oracle = price / reference_price;
            let deviation_bps = (clearing / oracle - 1.0) * 1e4;
            Some(OracleDeviationJson {
                asset: id,
                symbol: map.by_id(id).map_or_else(String::new, |e| e.symbol.clone()),
                deviation_bps,
                // A NaN deviation (a broken price) is flagged, never passed.
                beyond_band: deviation_bps.is_nan() || deviation_bps.abs() > band_bps,
            })
        })
        .collect();
    Some(OracleBandJson {
        height,
        reference_asset: reference,
        band_bps,
        assets,
    })
}

/// Runs the band check of a committed block against the latest publication, records its
/// metrics and, beyond the band, sends the `oracle_band` warning.
pub fn check_block(
    handle: &OracleHandle,
    height: u64,
    valuations: &[u128],
) -> Option<OracleBandJson> {
    let latest = handle.latest()?;
    let band = band_check(
        &handle.map,
        &latest.per_unit,
        valuations,
        height,
        handle.band_bps,
    )?;
    for deviation in &band.assets {
        handle
            .metrics
            .band_deviation_bps
            .with_label_values(&[&deviation.symbol])
            .set(deviation.deviation_bps);
    }
    if band.assets.iter().any(|d| d.beyond_band) {
        handle.metrics.band_warnings_total.inc();
        let _ = handle
            .events
            .send(OracleEvent::Band(Arc::new(band.clone())));
    }
    Some(band)
}

/// Why a recorded oracle feed cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum OracleFeedError {
    #[error("opening the oracle feed {}: {source}", path.display())]
    Open {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the oracle feed {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: walras_oracle::FeedError,
    },
    #[error(
        "the oracle feed {} holds no records (write one with `walras gen feed`)",
        path.display()
    )]
    Empty { path: std::path::PathBuf },
}

/// Reads a recorded feed for [`run_feed`].
pub fn load_feed(path: &std::path::Path) -> Result<LoopedFeed, OracleFeedError> {
    let file = std::fs::File::open(path).map_err(|source| OracleFeedError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let records =
        read_jsonl(std::io::BufReader::new(file)).map_err(|source| OracleFeedError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    LoopedFeed::new(records).ok_or_else(|| OracleFeedError::Empty {
        path: path.to_path_buf(),
    })
}

/// The oracle thread: replays `feed` paced at its timestamps (looping), publishes every
/// `interval` until the node stops.
pub fn run_feed(
    handle: &OracleHandle,
    stop: tokio::sync::watch::Receiver<bool>,
    mut feed: LoopedFeed,
    interval: Duration,
) {
    let mut oracle = LiveOracle::new(CoreConfig::default());
    let started = Instant::now();
    let mut publisher = Publisher::default();
    while !*stop.borrow() {
        let now_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        for record in feed.due(now_ns) {
            // A refused record is counted (parse_errors) and its venue's rules catch what it hid.
            let _ = oracle.ingest(&record);
        }
        let publication = oracle.publish(now_ns);
        publisher.publish(handle, &publication, &oracle);
        std::thread::sleep(interval);
    }
}

/// What each publication does, whatever the record source: the snapshot into the watch
/// channel, metrics, and the `oracle` event at most once per [`ORACLE_EVENT_EVERY`].
#[derive(Default)]
pub struct Publisher {
    last_event: Option<Instant>,
    counted: (u64, u64),
}

impl Publisher {
    pub fn publish(
        &mut self,
        handle: &OracleHandle,
        publication: &Publication,
        oracle: &LiveOracle,
    ) {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let snapshot = Arc::new(handle.snapshot(publication, unix_ms));
        handle.metrics.record(publication, &snapshot);
        handle
            .metrics
            .records_total
            .inc_by(oracle.records.saturating_sub(self.counted.0));
        handle
            .metrics
            .parse_errors_total
            .inc_by(oracle.parse_errors.saturating_sub(self.counted.1));
        self.counted = (oracle.records, oracle.parse_errors);
        if self
            .last_event
            .is_none_or(|at| at.elapsed() >= ORACLE_EVENT_EVERY)
        {
            self.last_event = Some(Instant::now());
            let _ = handle
                .events
                .send(OracleEvent::Prices(Arc::new(snapshot.json.clone())));
        }
        handle.latest.send_replace(Some(snapshot));
    }
}

/// One `--oracle-venue NAME=WS_URL[,REST_BASE]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VenueUrl {
    pub venue: String,
    pub ws_url: String,
    pub rest_base: Option<String>,
}

impl std::str::FromStr for VenueUrl {
    type Err = String;
    fn from_str(text: &str) -> Result<VenueUrl, String> {
        let (venue, urls) = text.split_once('=').ok_or_else(|| {
            format!("{text:?}: expected NAME=WS_URL[,REST_BASE], e.g. binance=ws://127.0.0.1:9000/ws,http://127.0.0.1:9001")
        })?;
        let (ws_url, rest_base) = match urls.split_once(',') {
            Some((ws, rest)) => (ws.to_string(), Some(rest.to_string())),
            None => (urls.to_string(), None),
        };
        Ok(VenueUrl {
            venue: venue.to_string(),
            ws_url,
            rest_base,
        })
    }
}

/// The connectors' endpoints: each venue's symbols from the asset map, plus the stablecoin
/// books (USDT, USDC in USD) on venues that quote in USD, which price the USDT-quoted venues.
pub fn endpoints(map: &AssetMap, venues: &[VenueUrl]) -> Vec<walras_oracle_net::Endpoint> {
    venues
        .iter()
        .map(|v| {
            let mut symbols: Vec<String> = map
                .entries()
                .iter()
                .filter_map(|e| e.venues.get(&v.venue).cloned())
                .collect();
            if let Some(protocol) = walras_oracle::venue_protocol(&v.venue) {
                if walras_oracle::venue_quote(protocol) == "USD" {
                    for stable in ["USDT", "USDC"] {
                        symbols.push(walras_oracle::symbol_for(protocol, stable, "USD"));
                    }
                }
            }
            walras_oracle_net::Endpoint {
                venue: v.venue.clone(),
                ws_url: v.ws_url.clone(),
                rest_base: v.rest_base.clone(),
                symbols,
            }
        })
        .collect()
}

/// Runs the live connectors (on the node's runtime) until the node stops.
pub async fn run_venues(
    handle: Arc<OracleHandle>,
    stop: tokio::sync::watch::Receiver<bool>,
    endpoints: Vec<walras_oracle_net::Endpoint>,
    interval: Duration,
    tls: walras_oracle_net::TlsClient,
) {
    let options = walras_oracle_net::LiveOptions {
        endpoints,
        connector: walras_oracle_net::ConnectorConfig {
            tls: Some(tls),
            ..walras_oracle_net::ConnectorConfig::default()
        },
        oracle: CoreConfig::default(),
        publish_every: interval,
        resync_after: Duration::from_secs(1),
    };
    let mut publisher = Publisher::default();
    let result = walras_oracle_net::run_live(
        options,
        |publication, oracle| publisher.publish(&handle, publication, oracle),
        stop,
    )
    .await;
    if let Err(error) = result {
        tracing::warn!("the oracle's connectors did not start: {error}");
    }
}

/// The oracle's metrics, rendered after the node's own (only when an oracle runs).
pub struct OracleMetrics {
    books: IntGaugeVec,
    publications_total: IntCounter,
    prices_total: IntCounterVec,
    unhealthy_used_total: IntCounter,
    records_total: IntCounter,
    parse_errors_total: IntCounter,
    last_update_age_seconds: Gauge,
    band_deviation_bps: GaugeVec,
    band_warnings_total: IntCounter,
}

impl OracleMetrics {
    pub fn new() -> Result<OracleMetrics, prometheus::Error> {
        Ok(OracleMetrics {
            books: IntGaugeVec::new(
                Opts::new(
                    "walras_oracle_books",
                    "Oracle books by venue and health at the last publication.",
                ),
                &["venue", "health"],
            )?,
            publications_total: IntCounter::new(
                "walras_oracle_publications_total",
                "Oracle price publications.",
            )?,
            prices_total: IntCounterVec::new(
                Opts::new(
                    "walras_oracle_prices_total",
                    "Published prices of mapped assets, by status.",
                ),
                &["status"],
            )?,
            unhealthy_used_total: IntCounter::new(
                "walras_oracle_unhealthy_books_used_total",
                "Venue prices taken from a book that was not synced (must stay 0).",
            )?,
            records_total: IntCounter::new(
                "walras_oracle_records_total",
                "Venue records the oracle received.",
            )?,
            parse_errors_total: IntCounter::new(
                "walras_oracle_parse_errors_total",
                "Venue records the oracle's normalisers refused.",
            )?,
            last_update_age_seconds: Gauge::new(
                "walras_oracle_last_update_age_seconds",
                "Seconds since the oracle last published.",
            )?,
            band_deviation_bps: GaugeVec::new(
                Opts::new(
                    "walras_oracle_band_deviation_bps",
                    "Last block's clearing ratio against the oracle's, in basis points, by asset.",
                ),
                &["asset"],
            )?,
            band_warnings_total: IntCounter::new(
                "walras_oracle_band_warnings_total",
                "Blocks whose clearing left the oracle band for some asset.",
            )?,
        })
    }

    fn record(&self, publication: &Publication, snapshot: &OracleSnapshot) {
        self.publications_total.inc();
        self.unhealthy_used_total.inc_by(publication.unhealthy_used);
        for price in &snapshot.json.prices {
            self.prices_total.with_label_values(&[&price.status]).inc();
        }
        for venue in &publication.venues {
            let c = &venue.counts;
            for (health, count) in [
                ("synced", c.synced),
                ("resyncing", c.resyncing),
                ("crossed", c.crossed),
                ("stale", c.stale),
                ("thin", c.thin),
            ] {
                self.books
                    .with_label_values(&[&venue.venue, health])
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
    }

    /// The exposition text; `age` is the time since the last publication, if any.
    pub fn render(&self, age: Option<Duration>) -> String {
        self.last_update_age_seconds
            .set(age.map_or(f64::NAN, |a| a.as_secs_f64()));
        let collectors: [&dyn Collector; 9] = [
            &self.books,
            &self.publications_total,
            &self.prices_total,
            &self.unhealthy_used_total,
            &self.records_total,
            &self.parse_errors_total,
            &self.last_update_age_seconds,
            &self.band_deviation_bps,
            &self.band_warnings_total,
        ];
        let mut families = Vec::new();
        for collector in collectors {
            for mut family in collector.collect() {
                if family.get_metric().is_empty() {
                    continue;
                }
                // Sorted by label values so the text does not depend on hash order.
                family.mut_metric().sort_by(|a, b| {
                    let values = |m: &prometheus::proto::Metric| {
                        m.get_label()
                            .iter()
                            .map(|l| l.value().to_string())
                            .collect::<Vec<_>>()
                    };
                    values(a).cmp(&values(b))
                });
                families.push(family);
            }
        }
        let mut text = Vec::new();
        if let Err(error) = prometheus::TextEncoder::new().encode(&families, &mut text) {
            tracing::warn!("encoding the oracle metrics: {error}");
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_oracle::AssetEntry;

    fn map() -> AssetMap {
        let entry = |id: u16, symbol: &str, units: u128| AssetEntry {
            id,
            symbol: symbol.into(),
            units,
            venues: BTreeMap::new(),
        };
        AssetMap::new(
            "USD",
            vec![
                entry(0, "BTC", 100),
                entry(1, "ETH", 10),
                entry(2, "LINK", 1),
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_oracle_start_is_used_only_when_every_asset_is_healthy_else_previous_else_fit() {
        let previous = [4u128 << 80, 2 << 80, 1 << 80];
        let oracle = [40.0, 20.0, 10.0];
        let (prices, used) = choose_start(WarmStart::Oracle, &previous, 3, Some(&oracle));
        assert_eq!(
            (prices.as_deref(), used),
            (Some(&oracle[..]), StartUsed::Oracle)
        );
        // An unhealthy oracle (no publication, a missing asset, a non-positive price) falls back.
        for unhealthy in [None, Some(&oracle[..2]), Some(&[40.0, 0.0, 10.0][..])] {
            let (prices, used) = choose_start(WarmStart::Oracle, &previous, 3, unhealthy);
            assert_eq!(used, StartUsed::Previous);
            assert_eq!(prices.unwrap()[0], (4u128 << 80) as f64);
            // ... and without a previous block, to the fit.
            assert_eq!(
                choose_start(WarmStart::Oracle, &[], 3, unhealthy),
                (None, StartUsed::Fit)
            );
        }
        assert_eq!(
            choose_start(WarmStart::Fit, &previous, 3, Some(&oracle)),
            (None, StartUsed::Fit)
        );
        assert_eq!(
            choose_start(WarmStart::Previous, &previous, 3, Some(&oracle)).1,
            StartUsed::Previous
        );
        assert_eq!(
            choose_start(WarmStart::Previous, &[1, 0, 1], 3, None),
            (None, StartUsed::Fit)
        );
    }

    #[test]
    fn the_band_check_compares_ratios_per_exchange_unit_against_the_first_priced_asset() {
        let map = map();
        // Oracle per unit: BTC 1000/100 = 10, ETH 100/10 = 10, LINK 5/1 = 5.
        let per_unit: BTreeMap<u16, f64> = [(0, 10.0), (1, 10.0), (2, 5.0)].into();
        // Clearing: ETH at par with BTC (0 bps), LINK at 0.55 of BTC instead of 0.5 (+1000 bps).
        let valuations = [1000u128 << 40, 1000 << 40, 550 << 40];
        let band = band_check(&map, &per_unit, &valuations, 9, 200.0).unwrap();
        assert_eq!(band.reference_asset, 0);
        assert_eq!(band.height, 9);
        let by_symbol: BTreeMap<&str, (f64, bool)> = band
            .assets
            .iter()
            .map(|d| (d.symbol.as_str(), (d.deviation_bps, d.beyond_band)))
            .collect();
        assert!(by_symbol["BTC"].0.abs() < 1e-9 && !by_symbol["BTC"].1);
        assert!(by_symbol["ETH"].0.abs() < 1e-9 && !by_symbol["ETH"].1);
        assert!((by_symbol["LINK"].0 - 1000.0).abs() < 1e-6 && by_symbol["LINK"].1);
        // Without a healthy reference, or without valuations, there is no check.
        assert!(band_check(&map, &BTreeMap::new(), &valuations, 9, 200.0).is_none());
        assert!(band_check(&map, &per_unit, &[], 9, 200.0).is_none());
        // A reference without a valuation is skipped for the next priced asset.
        let band = band_check(&map, &per_unit, &[0, 1 << 40, 1 << 40], 9, 200.0).unwrap();
        assert_eq!(band.reference_asset, 1);
    }

    /// A feed that is missing, not JSON lines, or empty is refused with the error that names
    /// the file and what went wrong (before: one string, the same type for all three).
    #[test]
    fn a_missing_garbled_or_empty_oracle_feed_is_a_typed_error_naming_the_file() {
        let dir = walras_testkit::TempDir::new("oracle-feed-errors");
        let missing = dir.path().join("missing.jsonl");
        assert!(matches!(
            load_feed(&missing),
            Err(OracleFeedError::Open { path, .. }) if path == missing
        ));
        let garbled = dir.path().join("garbled.jsonl");
        std::fs::write(&garbled, "not json\n").unwrap();
        let error = load_feed(&garbled).err().unwrap();
        assert!(matches!(&error, OracleFeedError::Read { path, .. } if *path == garbled));
        assert!(error.to_string().contains("garbled.jsonl"), "{error}");
        let empty = dir.path().join("empty.jsonl");
        std::fs::write(&empty, "\n\n").unwrap();
        let error = load_feed(&empty).err().unwrap();
        assert!(matches!(&error, OracleFeedError::Empty { path } if *path == empty));
        assert!(error.to_string().contains("walras gen feed"), "{error}");
    }
}

/// The oracle inside a node, in process: the state root does not depend on it, the route
/// answers 404/503/200, and the band check warns.
#[cfg(test)]
mod node_tests {
    use super::*;
    use crate::config::{proposer_engine_config, NodeConfig};
    use crate::node::{produce_block, ProducerConfig, Shared, Signatures};
    use crate::recovery::open_and_recover;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;
    use walras_api::wire::DevGenesisJson;
    use walras_crypto::Hash;
    use walras_oracle::PublishedPrice;
    use walras_oracle::{HealthCounts, VenueHealth};
    use walras_types::{AccountId, AssetId, Operation, Price, SignedTransaction, Transaction};

    const DEV: DevGenesisJson = DevGenesisJson {
        seed: 5,
        accounts: 60,
        assets: 3,
    };

    fn config(dir: &std::path::Path, oracle: bool) -> NodeConfig {
        // Built here, not by `walras_testkit::dev_node_config`: the test kit links the library
        // build of this crate, whose `NodeConfig` is another type than this test build's.
        NodeConfig {
            data_dir: dir.to_path_buf(),
            listen: "127.0.0.1:0".into(),
            genesis: crate::GenesisSource::Dev(DEV, walras_devnet::dev_genesis_builder),
            block_interval: Duration::from_millis(100),
            max_block_txs: 1000,
            mempool_capacity: 1000,
            threads: 1,
            clearing_timeout: Duration::from_millis(500),
            rate_limit_rps: 0,
            rate_limit_burst: 1,
            consensus: crate::Consensus::Solo,
            serve: crate::ServeLimits::default(),
            oracle: oracle.then(|| OracleSettings::feed(dir.join("unused-feed.jsonl"))),
            warm_start: WarmStart::default(),
            commit_bound: crate::overload::COMMIT_BOUND_DEFAULT,
        }
    }

    fn sign(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
        let transaction = Transaction {
            source: AccountId(source),
            sequence,
            operation,
        };
        let signature =
            walras_devnet::dev_keypair(&DEV, transaction.source).sign(&transaction.encode());
        SignedTransaction {
            transaction,
            signature: *signature.as_bytes(),
        }
    }

    /// Rounds of crossing offers on every pair, from accounts holding the sold asset.
    fn batches() -> Vec<Vec<(Hash, SignedTransaction)>> {
        let genesis = walras_devnet::dev_genesis(&DEV, 1).unwrap();
        let holders = |asset: u16| -> Vec<u64> {
            genesis
                .accounts
                .iter()
                .filter(|a| {
                    a.balances
                        .iter()
                        .any(|(held, n)| held.0 == asset && *n >= 100_000)
                })
                .map(|a| a.id.0)
                .collect()
        };
        let holders: Vec<Vec<u64>> = (0..3).map(holders).collect();
        let mut used = std::collections::BTreeSet::new();
        let mut pick = |asset: u16| {
            let account = holders[usize::from(asset)]
                .iter()
                .copied()
                .find(|a| !used.contains(a))
                .expect("enough holders");
            used.insert(account);
            account
        };
        let mut sellers = Vec::new();
        for (sell, buy) in [(0u16, 1u16), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2)] {
            sellers.push((pick(sell), sell, buy));
        }
        (1..=3u64)
            .map(|round| {
                sellers
                    .iter()
                    .enumerate()
                    .map(|(i, &(source, sell, buy))| {
                        let limit = ["0.5", "0.8", "0.6", "0.9", "0.7", "0.4"][i];
                        let signed = sign(
                            source,
                            round,
                            Operation::CreateOffer {
                                sell: AssetId(sell),
                                buy: AssetId(buy),
                                amount: 10_000 + 1_000 * round,
                                min_price: Price::parse_limit(limit).unwrap(),
                            },
                        );
                        (walras_engine::transaction_hash(&signed), signed)
                    })
                    .collect()
            })
            .collect()
    }

    fn price(asset: &str, price: f64, status: PriceStatus) -> PublishedPrice {
        PublishedPrice {
            asset: asset.into(),
            price: Some(price),
            status,
            age_ns: 1_000_000,
            dispersion_bps: 1.5,
            venues_used: Vec::new(),
            venues_excluded: Vec::new(),
            method: "test".into(),
        }
    }

    /// Publishes prices far from anything the books clear at (LINK 100× BTC), so the band
    /// check fires on every block.
    fn publish(handle: &OracleHandle, prices: Vec<PublishedPrice>) {
        let publication = Publication {
            now_ns: 1,
            prices,
            venues: vec![VenueHealth {
                venue: "binance".into(),
                counts: HealthCounts {
                    synced: 3,
                    ..HealthCounts::default()
                },
            }],
            unhealthy_used: 0,
        };
        let snapshot = handle.snapshot(&publication, 1);
        handle.latest.send_replace(Some(Arc::new(snapshot)));
    }

    fn skewed() -> Vec<PublishedPrice> {
        vec![
            price("BTC", 1.0, PriceStatus::Ok),
            price("ETH", 50.0, PriceStatus::Ok),
            price("LINK", 100.0, PriceStatus::Ok),
        ]
    }

    fn roots(oracle: bool, warm_start: WarmStart) -> (Vec<Hash>, u64) {
        let dir = walras_testkit::TempDir::new("oracle-root");
        let config = config(dir.path(), oracle);
        let shared = open_and_recover(&config).unwrap();
        let mut warnings = None;
        if let Some(handle) = shared.oracle.as_ref() {
            warnings = Some(handle.events.subscribe());
            publish(handle, skewed());
        }
        let mut engine = proposer_engine_config(&config);
        // Deterministic clearing whatever the machine's load: an iteration cap, no deadline.
        engine.clearing_iterations_max = 20_000;
        engine.clearing_timeout = None;
        let producer = ProducerConfig {
            block_interval: Duration::from_millis(1),
            max_block_txs: 100,
            engine,
            warm_start,
        };
        let mut roots = Vec::new();
        for batch in batches() {
            let outcome = produce_block(&shared, &producer, batch, Signatures::Unchecked).unwrap();
            assert_eq!(outcome.accepted, 6, "every offer is valid");
            let tip = shared.tip();
            roots.push(tip.state_root);
            // The block hash covers the header's valuations, which a start could move.
            roots.push(tip.block_hash);
        }
        let mut band_warnings = 0;
        if let Some(mut events) = warnings {
            while let Ok(event) = events.try_recv() {
                if let OracleEvent::Band(band) = event {
                    assert!(band.assets.iter().any(|d| d.beyond_band));
                    band_warnings += 1;
                }
            }
        }
        (roots, band_warnings)
    }

    /// Compares state roots and block hashes (the header's valuations included): the check
    /// is sensitive, since the same run with `WarmStart::Oracle` on the oracle side (its skewed
    /// prices as the start) gives other block hashes and fails it (tried by hand).
    #[test]
    fn the_state_root_is_the_same_with_and_without_an_oracle() {
        for warm_start in [WarmStart::Fit, WarmStart::Previous] {
            let (without, _) = roots(false, warm_start);
            let (with, warnings) = roots(true, warm_start);
            assert_eq!(with, without, "{warm_start:?}");
            // The oracle was live in the second run: its band check fired on every block.
            assert_eq!(warnings, 3, "{warm_start:?}");
        }
    }

    #[test]
    fn an_unhealthy_oracle_is_not_a_warm_start() {
        let dir = walras_testkit::TempDir::new("oracle-unhealthy");
        let config = config(dir.path(), true);
        let shared = open_and_recover(&config).unwrap();
        let handle = shared.oracle.as_ref().unwrap();
        // No publication yet.
        assert_eq!(handle.start_prices(3), None);
        // One asset not `ok`.
        let mut prices = skewed();
        prices[2].status = PriceStatus::InsufficientVenues;
        publish(handle, prices);
        assert_eq!(handle.start_prices(3), None);
        // All healthy: per exchange unit (the default dev map has one unit per token).
        publish(handle, skewed());
        assert_eq!(handle.start_prices(3), Some(vec![1.0, 50.0, 100.0]));
        // Healthy but older than `max_age`: not used.
        let mut old = OracleHandle::new(&config.oracle.clone().unwrap(), 3).unwrap();
        old.max_age = Duration::ZERO;
        publish(&old, skewed());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(old.start_prices(3), None);
    }

    async fn get(app: axum::Router, path: &str) -> (StatusCode, serde_json::Value) {
        let response = app
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[test]
    fn the_prices_route_answers_404_without_an_oracle_503_without_a_price_then_200() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let router = |shared: Arc<Shared>| {
            crate::router(
                shared,
                None,
                Arc::new(crate::limits::ClientSlots::new(8, 256)),
            )
        };
        let without = walras_testkit::TempDir::new("oracle-route-none");
        let shared = Arc::new(open_and_recover(&config(without.path(), false)).unwrap());
        let (status, body) = runtime.block_on(get(router(shared), "/v1/oracle/prices"));
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["code"], "oracle_not_configured");

        let with = walras_testkit::TempDir::new("oracle-route");
        let shared = Arc::new(open_and_recover(&config(with.path(), true)).unwrap());
        let (status, body) = runtime.block_on(get(router(shared.clone()), "/v1/oracle/prices"));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "oracle_no_price");
        let handle = shared.oracle.as_ref().unwrap();
        let mut unhealthy = skewed();
        for p in &mut unhealthy {
            p.status = PriceStatus::Unavailable;
            p.price = None;
        }
        publish(handle, unhealthy);
        let (status, body) = runtime.block_on(get(router(shared.clone()), "/v1/oracle/prices"));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 of 3 venue books synced"));
        publish(handle, skewed());
        let (status, body) = runtime.block_on(get(router(shared.clone()), "/v1/oracle/prices"));
        assert_eq!(status, StatusCode::OK);
        let prices: OraclePricesJson = serde_json::from_value(body).unwrap();
        assert_eq!(prices.numeraire, "USD");
        let symbols: Vec<(u16, &str, &str)> = prices
            .prices
            .iter()
            .map(|p| (p.asset, p.symbol.as_str(), p.status.as_str()))
            .collect();
        assert_eq!(
            symbols,
            [(0, "BTC", "ok"), (1, "ETH", "ok"), (2, "LINK", "ok")]
        );
        // The oracle's metrics are part of /metrics.
        let response = runtime.block_on(async {
            router(shared)
                .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
                .await
                .unwrap()
        });
        let bytes = runtime
            .block_on(axum::body::to_bytes(response.into_body(), 1 << 20))
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(
            text.contains("walras_oracle_last_update_age_seconds"),
            "{text}"
        );
    }
}
