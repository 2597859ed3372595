//! `walras gen feed`, `walras oracle replay` and `walras oracle value`: the valuation oracle's
//! recorded feeds, its parallel pipeline over them, and one book valued for analysts
//! (`walras_oracle`). The live connectors and the exchange integration come later.

use anyhow::{anyhow, Context};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;
use walras_oracle::{
    default_assets, default_venues, generate_feed, read_jsonl, write_jsonl, FeedConfig,
};
use walras_oracle::{replay, OracleConfig, ReplayOptions};
use walras_oracle::{value_book_text, Method};

/// The most venues and assets a generated feed may name.
const VENUES_MAX: usize = 64;
const ASSETS_MAX: usize = 512;

#[derive(clap::Args, Debug)]
pub(crate) struct FeedArgs {
    /// Venues (cycling through Binance, Coinbase, Kraken, OKX and Bitstamp wire formats).
    #[arg(long, default_value_t = 5)]
    venues: usize,
    /// Assets quoted on every venue.
    #[arg(long, default_value_t = 10)]
    assets: usize,
    /// Seconds of feed.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Share of book messages that carry a fault: gaps, duplicates, reorders, crossed levels,
    /// bad checksums, disconnects (0.01 = 1%).
    #[arg(long, default_value_t = 0.0)]
    faults: f64,
    /// The assets' true prices at the start, in USD per whole token, comma-separated, in
    /// asset order (a node maps exchange asset i to the feed's i-th asset, one unit per
    /// token): give a chain's prices (`walras query prices`) so that its oracle band check
    /// compares like with like. Assets beyond the list get seeded random prices.
    #[arg(long, value_name = "P0,P1,...", value_delimiter = ',', value_parser = positive_price)]
    prices: Vec<f64>,
    /// The recorded feed (JSON lines) to write.
    #[arg(long)]
    out: PathBuf,
}

/// A positive, finite decimal price.
fn positive_price(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(price) if price.is_finite() && price > 0.0 => Ok(price),
        _ => Err(format!("{text:?} is not a positive price")),
    }
}

pub(crate) fn gen_feed(args: FeedArgs) -> anyhow::Result<()> {
    if !(1..=VENUES_MAX).contains(&args.venues) || !(1..=ASSETS_MAX).contains(&args.assets) {
        return Err(anyhow!(
            "use 1..={VENUES_MAX} venues and 1..={ASSETS_MAX} assets"
        ));
    }
    if !(0.0..=0.5).contains(&args.faults) {
        return Err(anyhow!("--faults is a share of messages in 0..=0.5"));
    }
    if args.prices.len() > args.assets {
        return Err(anyhow!(
            "--prices gives {} prices for {} assets",
            args.prices.len(),
            args.assets
        ));
    }
    let config = FeedConfig {
        venues: default_venues(args.venues),
        assets: default_assets(args.assets),
        seconds: args.seconds,
        seed: args.seed,
        faults: args.faults,
        usd_prices: args.prices,
        ..FeedConfig::default()
    };
    let records = generate_feed(&config);
    let file =
        File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut out = BufWriter::new(file);
    write_jsonl(&records, &mut out)?;
    out.flush()?;
    eprintln!(
        "walras gen feed: {} records ({} venues x {} assets, {} s) in {}",
        records.len(),
        args.venues,
        args.assets,
        args.seconds,
        args.out.display()
    );
    Ok(())
}

#[derive(clap::Subcommand, Debug)]
pub(crate) enum OracleCommand {
    /// Replay a recorded feed through the pipeline: per-asset prices, a digest, throughput.
    Replay(ReplayArgs),
    /// Value one order book given on the command line.
    Value(ValueArgs),
    /// Run the oracle on live venues through the connectors; print prices every second.
    Live(LiveArgs),
    /// Serve a recorded feed as a loopback mock venue (WebSocket and REST) for `oracle live`
    /// and `node --oracle-venue`; prints the --venue arguments, serves until interrupted.
    MockVenue(MockVenueArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct LiveArgs {
    /// NAME=WS_URL[,REST_BASE] (repeatable); NAME is binance, coinbase, kraken, okx or
    /// bitstamp, optionally with a suffix. wss:// and https:// are checked against Mozilla's
    /// roots (built in) and any --ca.
    #[arg(long = "venue", required = true)]
    venues: Vec<String>,
    /// A PEM file of certificate authorities to trust beside Mozilla's roots (repeatable).
    #[arg(long = "ca", value_name = "PEM")]
    ca_files: Vec<PathBuf>,
    /// The asset map (TOML; docs/oracle.md). Default: the first --assets assets of
    /// `walras gen feed` on the five default venues.
    #[arg(long)]
    asset_map: Option<PathBuf>,
    #[arg(long, default_value_t = 4)]
    assets: u16,
    /// Stop after this many seconds (0: run until interrupted).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Print one JSON object per second (prices) and a last one (summary).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct MockVenueArgs {
    /// A recorded feed (from `walras gen feed`).
    #[arg(long)]
    feed: PathBuf,
    /// Factor of recorded time (2 = twice as fast).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// A recorded feed (from `walras gen feed`).
    file: PathBuf,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// `max` (as fast as possible) or a factor of recorded time (`1` = real time).
    #[arg(long, default_value = "max")]
    speed: String,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ValueArgs {
    /// Bids as PRICE:QUANTITY,... (best first or in any order).
    #[arg(long)]
    bids: String,
    /// Asks as PRICE:QUANTITY,...
    #[arg(long)]
    asks: String,
    /// mid | weighted-mid | depth-vwap
    #[arg(long, default_value = "mid")]
    method: String,
    /// depth-vwap: the quantity up to which prices are averaged.
    #[arg(long)]
    depth: Option<f64>,
    /// depth-vwap: the quantity step.
    #[arg(long)]
    step: Option<f64>,
}

pub(crate) fn run(command: OracleCommand) -> anyhow::Result<()> {
    match command {
        OracleCommand::Replay(args) => replay_command(args),
        OracleCommand::Value(args) => value_command(args),
        OracleCommand::Live(args) => live_command(args),
        OracleCommand::MockVenue(args) => mock_venue_command(args),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn live_command(args: LiveArgs) -> anyhow::Result<()> {
    use walras_server::oracle::{endpoints, AssetMap, VenueUrl};
    let map = match &args.asset_map {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            AssetMap::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
        }
        None if args.assets >= 1 => AssetMap::default_for(args.assets),
        None => return Err(anyhow!("--assets must be at least 1")),
    };
    let venues = args
        .venues
        .iter()
        .map(|text| text.parse::<VenueUrl>().map_err(|e| anyhow!("--venue {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let options = walras_oracle_net::LiveOptions {
        endpoints: endpoints(&map, &venues),
        connector: walras_oracle_net::ConnectorConfig {
            tls: Some(
                walras_oracle_net::TlsClient::with_extra_cas(&args.ca_files)
                    .map_err(|e| anyhow!("--ca: {e}"))?,
            ),
            ..walras_oracle_net::ConnectorConfig::default()
        },
        oracle: OracleConfig::default(),
        publish_every: std::time::Duration::from_secs(1),
        resync_after: std::time::Duration::from_secs(1),
    };
    let json = args.json;
    let seconds = args.seconds;
    runtime()?.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            if seconds == 0 {
                let _ = tokio::signal::ctrl_c().await;
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(seconds)) => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            let _ = stop_tx.send(true);
        });
        let summary = walras_oracle_net::run_live(
            options,
            |publication, _| {
                let prices: Vec<serde_json::Value> = map
                    .entries()
                    .iter()
                    .map(|entry| {
                        let found = publication.prices.iter().find(|p| p.asset == entry.symbol);
                        serde_json::json!({
                            "asset": entry.id,
                            "symbol": entry.symbol,
                            "price": found.and_then(|p| p.price),
                            "status": found.map(|p| p.status),
                            "venues_used": found.map_or(0, |p| p.venues_used.len()),
                            "venues_excluded": found.map(|p| &p.venues_excluded),
                        })
                    })
                    .collect();
                if json {
                    println!("{}", serde_json::json!({"now_ns": publication.now_ns, "prices": prices}));
                } else {
                    let line: Vec<String> = prices
                        .iter()
                        .map(|p| format!("{} {} ({})", p["symbol"].as_str().unwrap_or(""), p["price"], p["status"]))
                        .collect();
                    println!("{:.1}s  {}", publication.now_ns as f64 / 1e9, line.join("  "));
                }
            },
            stop_rx,
        )
        .await?;
        let venues: serde_json::Map<String, serde_json::Value> = summary
            .venues
            .iter()
            .map(|(venue, (connects, disconnects, snapshots))| {
                (venue.clone(), serde_json::json!({"connects": connects, "disconnects": disconnects, "snapshots": snapshots}))
            })
            .collect();
        let report = serde_json::json!({
            "summary": {
                "records": summary.records,
                "parse_errors": summary.parse_errors,
                "publications": summary.publications,
                "unhealthy_books_used": summary.unhealthy_used,
                "resync_requests": summary.resync_requests,
                "venues": venues,
            }
        });
        if json {
            println!("{report}");
        } else {
            eprintln!("{report}");
        }
        anyhow::Ok(())
    })
}

fn mock_venue_command(args: MockVenueArgs) -> anyhow::Result<()> {
    if !(args.speed.is_finite() && args.speed > 0.0) {
        return Err(anyhow!("--speed must be a positive factor"));
    }
    let file =
        File::open(&args.feed).with_context(|| format!("opening {}", args.feed.display()))?;
    let records =
        read_jsonl(BufReader::new(file)).with_context(|| format!("{}", args.feed.display()))?;
    let venues: std::collections::BTreeSet<String> =
        records.iter().map(|r| r.venue.clone()).collect();
    runtime()?.block_on(async move {
        let mock = walras_oracle_net::MockVenue::start(records, args.speed).await?;
        for venue in &venues {
            let endpoint = mock.endpoint(venue, Vec::new());
            println!(
                "--venue {venue}={},{}",
                endpoint.ws_url,
                endpoint.rest_base.unwrap_or_default()
            );
        }
        // Scripts and tests read the lines above, then this one.
        println!("serving {} venues; interrupt to stop", venues.len());
        let _ = tokio::signal::ctrl_c().await;
        anyhow::Ok(())
    })
}

fn replay_command(args: ReplayArgs) -> anyhow::Result<()> {
    let speed = match args.speed.as_str() {
        "max" => None,
        text => match text.parse::<f64>() {
            Ok(factor) if factor > 0.0 && factor.is_finite() => Some(factor),
            _ => return Err(anyhow!("--speed {text}: use max or a positive factor")),
        },
    };
    if !(1..=64).contains(&args.threads) {
        return Err(anyhow!("--threads must be 1..=64"));
    }
    let file =
        File::open(&args.file).with_context(|| format!("opening {}", args.file.display()))?;
    let records =
        read_jsonl(BufReader::new(file)).with_context(|| format!("{}", args.file.display()))?;
    let options = ReplayOptions {
        threads: args.threads,
        speed,
    };
    let report = replay(&records, &OracleConfig::default(), options);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "{} records, {} events in {:.0} ms ({:.0} events/s, {} threads); digest {}",
        report.records,
        report.events,
        report.elapsed_ms,
        report.events_per_s,
        report.threads,
        report.digest
    );
    for price in &report.prices {
        println!("{}", serde_json::to_string(price)?);
    }
    Ok(())
}

fn value_command(args: ValueArgs) -> anyhow::Result<()> {
    let method = match args.method.as_str() {
        "mid" => Method::Mid,
        "weighted-mid" => Method::WeightedMid,
        "depth-vwap" => match (args.depth, args.step) {
            (Some(depth), Some(step)) if depth > 0.0 && step > 0.0 && step <= depth => {
                Method::DepthVwap { depth, step }
            }
            _ => {
                return Err(anyhow!(
                    "depth-vwap needs --depth D and --step S with 0 < S <= D"
                ))
            }
        },
        other => {
            return Err(anyhow!(
                "--method {other}: use mid, weighted-mid or depth-vwap"
            ))
        }
    };
    let valuation = value_book_text(&args.bids, &args.asks, &method).context("book")?;
    println!("{}", serde_json::to_string(&valuation)?);
    Ok(())
}
