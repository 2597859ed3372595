//! `walras sim dbo`: the deterministic simulator of the fair-access gateway (DBO), driving the
//! gateway's own release and ordering buffers (`walras_gateway::sim`): a summary line, or with
//! `--json` one JSON object (`fairness`, `latency_us` {`mean`,`p50`,`p99`,`p999`,`max`}, ...).

use anyhow::Context;
use std::path::PathBuf;
use walras_gateway::sim::{parse_trace_csv, run, LatencyModel, Scheme, SimConfig};

#[derive(clap::Subcommand, Debug)]
pub(crate) enum SimCommand {
    /// Simulate delivery-based ordering against direct delivery, the max-RTT bound and CloudEx.
    Dbo(DboArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct DboArgs {
    /// direct | dbo | max-rtt | cloudex
    #[arg(long)]
    scheme: String,
    /// Market participants (1..=1000).
    #[arg(long, default_value_t = 10)]
    participants: u32,
    /// Simulated seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// δ: the least time between two deliveries of a release buffer, µs.
    #[arg(long)]
    delta_us: Option<u64>,
    /// κ: how much faster than δ a release buffer may deliver a backlog.
    #[arg(long)]
    kappa: Option<f64>,
    /// τ: heartbeat interval, µs.
    #[arg(long)]
    tau_us: Option<u64>,
    /// CloudEx's hold-and-release threshold, µs.
    #[arg(long)]
    threshold_us: Option<u64>,
    /// Latencies from a trace (CSV header `time_us,participant,down_us,up_us`) instead of
    /// the synthetic model.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Print one JSON object (the full report) instead of a summary line.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run_command(command: SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Dbo(args) => dbo(args),
    }
}

fn dbo(args: DboArgs) -> anyhow::Result<()> {
    let scheme: Scheme = args
        .scheme
        .parse()
        .with_context(|| format!("--scheme {}", args.scheme))?;
    let mut config = SimConfig::new(scheme, args.participants, args.seconds, args.seed);
    if let Some(delta_us) = args.delta_us {
        config.delta_us = delta_us;
    }
    if let Some(kappa) = args.kappa {
        config.kappa = kappa;
    }
    if let Some(tau_us) = args.tau_us {
        config.tau_us = tau_us;
    }
    if let Some(threshold_us) = args.threshold_us {
        config.threshold_us = threshold_us;
    }
    if let Some(path) = &args.trace {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let rows = parse_trace_csv(&text).with_context(|| format!("{}", path.display()))?;
        config.latency = LatencyModel::Trace(rows);
    }
    let report = run(&config).context("sim dbo")?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let latency = &report.latency_us;
        println!(
            "{} with {} participants, {} s, seed {}: fairness {:.4}; latency µs mean {:.1} p50 \
             {:.1} p99 {:.1} p999 {:.1} max {:.1}",
            args.scheme,
            args.participants,
            args.seconds,
            args.seed,
            report.fairness,
            latency.mean,
            latency.p50,
            latency.p99,
            latency.p999,
            latency.max
        );
    }
    Ok(())
}
