//! `walras node`: run a node, solo or as a CometBFT validator (see [`walras_server`]).

use super::args;
use anyhow::anyhow;
use std::path::PathBuf;
use std::time::Duration;
use walras_server::cometbft::{binary_or_find, CometbftConfig};
use walras_server::{
    Consensus, GatewayLinkConfig, NodeConfig, OracleSettings, OracleSource, ServeLimits, WarmStart,
};

#[derive(clap::Args, Debug)]
pub(crate) struct NodeArgs {
    /// Data directory. A directory with a store (data.mdb) is reopened, never re-initialised;
    /// one without (missing or empty) gets a new store only from --genesis FILE or --dev.
    #[arg(long)]
    data: PathBuf,
    /// Address to serve the HTTP API on (port 0: any free port, printed on the first line).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    #[command(flatten)]
    genesis: args::GenesisArgs,
    /// A block is cut when this long has passed since the last one and something is waiting.
    #[arg(long, default_value_t = 250)]
    block_interval_ms: u64,
    /// ... or when this many transactions are waiting.
    #[arg(long, default_value_t = 50_000)]
    max_block_txs: usize,
    /// Most pending transactions; beyond it submissions get 503 (back-pressure).
    #[arg(long, default_value_t = 200_000)]
    mempool_capacity: usize,
    /// An admitted transaction is committed within this many milliseconds of its admission,
    /// or dropped unproposed (counted, `walras_transactions_shed_total{reason="expired"}`).
    /// Admission refuses `mempool_full` (503, Retry-After) what the mempool could not commit
    /// within it at the commit rate measured over recent blocks, before checking signatures.
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    commit_bound_ms: u64,
    /// Execution threads (default: all cores).
    #[arg(long, value_parser = args::thread_count)]
    threads: Option<usize>,
    /// Wall-clock limit of tâtonnement per block. Small batches that do not converge run to
    /// it (the block is still exact, only less complete), so it bounds their latency.
    #[arg(long, default_value_t = 100)]
    clearing_timeout_ms: u64,
    /// Requests per second per client IP (0: no limit).
    #[arg(long, default_value_t = 2_000)]
    rate_limit_rps: u32,
    #[arg(long, default_value_t = 4_000)]
    rate_limit_burst: u32,
    /// Who orders blocks: this node alone, or CometBFT (this node is its ABCI++ application
    /// and starts it as a child process).
    #[arg(long, value_enum, default_value = "solo")]
    consensus: ConsensusKind,
    /// CometBFT's home (config/, data/; outside --data), for --consensus cometbft.
    #[arg(long, required_if_eq("consensus", "cometbft"))]
    cometbft_home: Option<PathBuf>,
    /// The cometbft executable. Default: $WALRAS_COMETBFT, the PATH, then ~/go/bin.
    #[arg(long)]
    cometbft_bin: Option<PathBuf>,
    /// Connections served at once; one more is answered 503 and closed. Default: 1024, or
    /// fewer if the open-file limit (raised to its hard limit at start) leaves no room.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    connections_max: Option<u64>,
    /// A connection that sends no complete request head within this long (a new one, or one
    /// kept alive between requests) is closed.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    header_timeout_ms: u64,
    /// Event streams (/v1/events) one client IP may hold open; all clients together hold at
    /// most 256.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    event_streams_per_client: u64,
    /// What cuts blocks in solo mode: the node's own timer (--block-interval-ms), or only the
    /// fair-access gateway's sealed batches (`walras gateway`; the public submit and event
    /// endpoints then refuse participants).
    #[arg(long, value_enum, default_value = "timer")]
    block_source: BlockSource,
    /// The gateway's public key (hex, `walras keygen`'s public key of the gateway's key file),
    /// for --block-source gateway: sealed batches signed by any other key are refused.
    #[arg(long, required_if_eq("block_source", "gateway"))]
    gateway_key: Option<String>,
    /// With --block-source gateway: the operator's listener, which serves what the public
    /// listener closes to participants (events, blocks, books, prices). Port 0: any free port,
    /// printed on the second line of stdout. Keep it off the participants' network.
    #[arg(long, default_value = "127.0.0.1:0")]
    operator_listen: String,
    /// Run the valuation oracle on a recorded feed (`walras gen feed`), replayed at its
    /// timestamps in a loop: `GET /v1/oracle/prices`, the `oracle` event, metrics, the band
    /// check, and `--warm-start oracle`. Advisory: nothing committed depends on it.
    #[arg(long, conflicts_with = "oracle_venue")]
    oracle_feed: Option<PathBuf>,
    /// Run the valuation oracle on live venues instead (repeatable): NAME=WS_URL[,REST_BASE],
    /// e.g. binance=ws://127.0.0.1:9000/ws/binance,http://127.0.0.1:9001/rest/binance. NAME is
    /// binance, coinbase, kraken, okx or bitstamp (optionally with a suffix); the symbols
    /// come from the asset map. wss:// and https:// are checked against Mozilla's roots (built
    /// in) and any --oracle-ca.
    #[arg(long)]
    oracle_venue: Vec<String>,
    /// A PEM file of certificate authorities to trust beside Mozilla's roots for --oracle-venue
    /// (repeatable): a private venue gateway, a test CA.
    #[arg(long, value_name = "PEM", requires = "oracle_venue")]
    oracle_ca: Vec<PathBuf>,
    /// The oracle's asset map (TOML: exchange asset id, symbol, units per token, venue
    /// symbols; see docs/oracle.md). Default: asset i is the i-th asset `walras gen feed` writes.
    #[arg(long)]
    oracle_asset_map: Option<PathBuf>,
    /// Band check: a block whose clearing ratio for some asset is further than this from the
    /// oracle's, in basis points, gets an `oracle_band` warning event.
    #[arg(long, default_value_t = 200.0)]
    oracle_band_bps: f64,
    /// Where each block's tâtonnement starts: the previous block's prices (fewest iterations
    /// in the node, BENCHMARKS.md), the books' fit, or the oracle's when all are healthy
    /// (else previous).
    #[arg(long, value_enum, default_value = "previous")]
    warm_start: WarmStartArg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum WarmStartArg {
    Fit,
    Previous,
    Oracle,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BlockSource {
    Timer,
    Gateway,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ConsensusKind {
    Solo,
    Cometbft,
}

pub(crate) fn run(args: NodeArgs) -> anyhow::Result<()> {
    if args.max_block_txs == 0 || args.mempool_capacity == 0 {
        return Err(anyhow!(
            "--max-block-txs and --mempool-capacity must be positive"
        ));
    }
    let genesis = args.genesis.source()?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let consensus = match (args.consensus, args.block_source) {
        (ConsensusKind::Solo, BlockSource::Timer) => Consensus::Solo,
        (ConsensusKind::Solo, BlockSource::Gateway) => {
            let text = args.gateway_key.as_deref().ok_or_else(|| {
                anyhow::Error::msg("--block-source gateway needs --gateway-key PUBLIC_KEY_HEX")
            })?;
            let gateway_key = text
                .parse()
                .map_err(|error| anyhow::anyhow!("--gateway-key: {error}"))?;
            Consensus::Gateway(GatewayLinkConfig {
                gateway_key,
                operator_listen: args.operator_listen.clone(),
            })
        }
        (ConsensusKind::Cometbft, BlockSource::Gateway) => {
            return Err(anyhow::Error::msg(
                "--block-source gateway works with --consensus solo only (CometBFT orders \
                 replicated blocks)",
            ))
        }
        (ConsensusKind::Cometbft, BlockSource::Timer) => Consensus::Cometbft(CometbftConfig {
            binary: binary_or_find(args.cometbft_bin)?,
            home: args
                .cometbft_home
                .ok_or_else(|| anyhow!("--consensus cometbft needs --cometbft-home"))?,
        }),
    };
    if !(args.oracle_band_bps.is_finite() && args.oracle_band_bps >= 0.0) {
        return Err(anyhow!("--oracle-band-bps must be a non-negative number"));
    }
    let has_oracle = args.oracle_feed.is_some() || !args.oracle_venue.is_empty();
    if args.warm_start == WarmStartArg::Oracle && !has_oracle {
        return Err(anyhow!(
            "--warm-start oracle needs an oracle: add --oracle-feed FILE or --oracle-venue"
        ));
    }
    if args.oracle_asset_map.is_some() && !has_oracle {
        return Err(anyhow!(
            "--oracle-asset-map needs an oracle: add --oracle-feed FILE or --oracle-venue"
        ));
    }
    let source = match (args.oracle_feed, args.oracle_venue.is_empty()) {
        (Some(feed), _) => Some(OracleSource::Feed(feed)),
        (None, false) => Some(OracleSource::Venues(
            args.oracle_venue
                .iter()
                .map(|text| {
                    text.parse()
                        .map_err(|e: String| anyhow!("--oracle-venue {e}"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
        )),
        (None, true) => None,
    };
    let oracle = match source {
        None => None,
        Some(source) => {
            let asset_map = match &args.oracle_asset_map {
                None => None,
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| anyhow!("reading {}: {e}", path.display()))?;
                    let map = walras_server::oracle::AssetMap::parse(&text)
                        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
                    Some(map)
                }
            };
            Some(OracleSettings {
                source,
                asset_map,
                band_bps: args.oracle_band_bps,
                tls_ca_files: args.oracle_ca.clone(),
                ..OracleSettings::feed(PathBuf::new())
            })
        }
    };
    let config = NodeConfig {
        data_dir: args.data,
        listen: args.listen,
        genesis,
        block_interval: Duration::from_millis(args.block_interval_ms.max(1)),
        max_block_txs: args.max_block_txs,
        mempool_capacity: args.mempool_capacity,
        commit_bound: Duration::from_millis(args.commit_bound_ms),
        threads,
        clearing_timeout: Duration::from_millis(args.clearing_timeout_ms.max(1)),
        rate_limit_rps: args.rate_limit_rps,
        rate_limit_burst: args.rate_limit_burst.max(1),
        consensus,
        serve: ServeLimits {
            connections_max: args.connections_max.map(|max| max as usize),
            header_timeout: Duration::from_millis(args.header_timeout_ms),
            event_streams_per_client_max: args.event_streams_per_client as usize,
        },
        oracle,
        warm_start: match args.warm_start {
            WarmStartArg::Fit => WarmStart::Fit,
            WarmStartArg::Previous => WarmStart::Previous,
            WarmStartArg::Oracle => WarmStart::Oracle,
        },
    };
    Ok(walras_server::run(config)?)
}
