//! `walras gateway`: the fair-access gateway in front of a node run with
//! `--block-source gateway` (see `docs/gateway.md` and [`walras_gateway_net`]); `walras gateway
//! participant`: a participant of one ([`super::participant`]).

use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;
use walras_client::keyfile;
use walras_gateway_net::{parse_participant_keys, CutMode, GatewayConfig, PARTICIPANTS_MAX};

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct GatewayArgs {
    #[command(subcommand)]
    command: Option<GatewayCommand>,
    /// The node's base URL (on this host: the link is served to loopback peers only).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    node: String,
    /// The gateway's key file (`walras keygen --out FILE`); give its public key to the node's
    /// --gateway-key.
    #[arg(long, required = true)]
    key: Option<PathBuf>,
    /// Address participants connect to (TCP, length-prefixed frames).
    #[arg(long, default_value = "127.0.0.1:9090")]
    listen: String,
    /// Address participants may connect to over WebSocket instead (`ws://ADDR`; the same frames,
    /// one per binary message, and the same handshake and buffers); none if not given.
    #[arg(long)]
    listen_ws: Option<String>,
    /// Address of /metrics (HTTP); none if not given.
    #[arg(long)]
    metrics_listen: Option<String>,
    /// The participants file: one Ed25519 public key per line (as `walras keygen` prints it),
    /// participant i being the i-th key; `#` starts a comment. A participant's Hello must be
    /// signed with its key.
    #[arg(long, value_name = "FILE", required = true)]
    participant_keys: Option<PathBuf>,
    /// W: a trade answering block N within W (delivery-clock time) goes into block N+1.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    window_ms: u64,
    /// A participant whose round trip or silence exceeds this stops holding seals back.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    straggler_threshold_ms: u64,
    /// Most trades per block: the node's --max-block-txs.
    #[arg(long, default_value_t = 50_000)]
    block_trades_max: usize,
    /// Trades the ordering buffer holds; beyond it trades are refused (participants are told).
    #[arg(long, default_value_t = 1 << 20)]
    queue_len_max: usize,
    /// Trades one participant may hold in the ordering buffer (beyond it only its trades are
    /// refused); default: --queue-len-max divided by the number of participants.
    #[arg(long)]
    participant_queue_max: Option<usize>,
    /// `dbo` (delivery-clock cut), or `timer` (arrival order, a block every --timer-interval-ms:
    /// the unfair baseline, for comparisons only).
    #[arg(long, value_enum, default_value = "dbo")]
    cut: Cut,
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    timer_interval_ms: u64,
}

#[derive(clap::Subcommand, Debug)]
enum GatewayCommand {
    /// Be a participant of a gateway: connect, keep the release buffer, send the orders read
    /// as JSON lines on stdin (or given by flags), print notices, blocks and fills as JSON lines
    Participant(Box<super::participant::ParticipantArgs>),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    Dbo,
    Timer,
}

pub(crate) fn run(args: GatewayArgs) -> anyhow::Result<()> {
    if let Some(GatewayCommand::Participant(participant)) = args.command {
        return super::participant::run(*participant);
    }
    let (Some(key), Some(participant_keys)) = (&args.key, &args.participant_keys) else {
        return Err(anyhow::Error::msg(
            "walras gateway needs --key FILE and --participant-keys FILE",
        ));
    };
    if args.block_trades_max == 0 || args.queue_len_max == 0 {
        return Err(anyhow::Error::msg(
            "--block-trades-max and --queue-len-max must be positive",
        ));
    }
    let key = keyfile::read(key)?;
    let text = std::fs::read_to_string(participant_keys).with_context(|| {
        format!(
            "reading the participants file {}",
            participant_keys.display()
        )
    })?;
    let participant_keys = parse_participant_keys(&text, PARTICIPANTS_MAX)
        .with_context(|| format!("in {}", participant_keys.display()))?;
    let mut config = GatewayConfig::new(&args.node, key, participant_keys);
    config.listen = args.listen;
    config.listen_ws = args.listen_ws;
    config.metrics_listen = args.metrics_listen;
    config.window = Duration::from_millis(args.window_ms);
    config.straggler_threshold = Duration::from_millis(args.straggler_threshold_ms);
    config.block_trades_max = args.block_trades_max;
    config.queue_len_max = args.queue_len_max;
    if args.participant_queue_max == Some(0) {
        return Err(anyhow::Error::msg(
            "--participant-queue-max must be positive",
        ));
    }
    config.participant_queue_max = args.participant_queue_max;
    config.cut = match args.cut {
        Cut::Dbo => CutMode::Dbo,
        Cut::Timer => CutMode::Timer {
            interval: Duration::from_millis(args.timer_interval_ms),
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| anyhow::anyhow!("starting the async runtime: {error}"))?;
    runtime.block_on(async move {
        let gateway = walras_gateway_net::start(config).await?;
        // The first line on stdout: scripts and tests wait for it.
        println!("walras gateway listening on {}", gateway.address);
        if let Some(ws) = gateway.ws_address {
            println!("websocket on ws://{ws}");
        }
        if let Some(metrics) = gateway.metrics_address {
            println!("metrics on http://{metrics}/metrics");
        }
        tokio::select! {
            result = gateway.wait() => result.map_err(|error| anyhow::Error::msg(error.to_string())),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}
