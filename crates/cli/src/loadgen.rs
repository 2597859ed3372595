//! `walras loadgen`: the open-loop load generator against a running node (see
//! [`walras_loadgen`]).

use super::remote::{block_on, NodeArgs};
use anyhow::{anyhow, Context};
use std::time::Duration;
use walras_loadgen::{mix::Mix, LoadgenConfig, LoadgenReport};

#[derive(clap::Args, Debug)]
pub(crate) struct LoadgenArgs {
    #[command(flatten)]
    node: NodeArgs,
    /// Transactions offered per second, whatever the node does
    #[arg(long, value_parser = positive_number)]
    rate: f64,
    /// How long to send
    #[arg(long, value_parser = positive_number)]
    seconds: f64,
    /// Development accounts to send from (ids 0..N). Each account has at most one request in
    /// flight and 48 transactions outstanding: raise it for high rates
    #[arg(long, default_value_t = 1000)]
    accounts: usize,
    /// Interval between batch requests, in milliseconds
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    batch_ms: u64,
    /// trading: offers near the current prices, some cancels and payments; payments: payments only; resting: offers far above the prices, which rest (to build a state of many open offers)
    #[arg(long, value_enum, default_value = "trading")]
    mix: Mix,
    /// Seed of the transaction choices
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sign the run's transactions before the clock starts (rate x seconds, at most 2,000,000,
    /// plus 8 per account), so that signing never limits what is offered: for overload runs
    /// far past the node's capacity. A refused transaction is sent again later, the same
    /// bytes. The trading mix has no cancels then (which offers rest is learnt from blocks)
    #[arg(long)]
    presign: bool,
    /// With --presign: sign this many instead (refused transactions are sent again, so under
    /// overload about what the node commits in the run, plus 8 per account, is enough)
    #[arg(long, requires = "presign", value_parser = clap::value_parser!(u64).range(1..))]
    presign_count: Option<u64>,
    /// Count an admitted transaction not seen in a block after this many milliseconds as
    /// `expired` (default: the node's commit bound from GET /v1/status plus 2,000)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    expire_after_ms: Option<u64>,
    /// Print the report as JSON on stdout (the text summary then goes to stderr)
    #[arg(long)]
    json: bool,
}

pub(crate) fn positive_number(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value > 0.0 => Ok(value),
        _ => Err(format!("'{text}' is not a positive number")),
    }
}

pub(crate) fn run(args: LoadgenArgs) -> anyhow::Result<()> {
    let config = LoadgenConfig {
        accounts: args.accounts,
        batch_interval: Duration::from_millis(args.batch_ms),
        mix: args.mix,
        seed: args.seed,
        progress: true,
        presign: args.presign,
        presign_count: args.presign_count,
        expire_after: args.expire_after_ms.map(Duration::from_millis),
        ..LoadgenConfig::new(
            &args.node.node,
            args.rate,
            Duration::from_secs_f64(args.seconds),
        )
    };
    let report = block_on(walras_loadgen::run(&config))??;
    if args.json {
        eprint!("{}", report.summary());
        let json = serde_json::to_string_pretty(&report).context("cannot print JSON")?;
        println!("{json}");
    } else {
        print!("{}", report.summary());
    }
    check_committed(&report)
}

/// A run in which nothing committed measured nothing: say so with a failing exit.
pub(crate) fn check_committed(report: &LoadgenReport) -> anyhow::Result<()> {
    if report.counts.committed == 0 {
        return Err(anyhow!(
            "none of the {} transactions sent was seen in a block ({} blocks seen): is the \
             node producing blocks?",
            report.counts.sent,
            report.counts.blocks
        ));
    }
    Ok(())
}
