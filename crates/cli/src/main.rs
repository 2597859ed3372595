//! `walras`: the command-line interface to the Walras exchange.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

use std::process::ExitCode;

/// mimalloc, not glibc's malloc: a restart at 10M accounts allocates tens of millions of small
/// objects on every thread, and glibc grew its per-thread arenas a few pages at a time under
/// the process's memory-map lock (`mprotect`, page faults and malloc were a fifth of the
/// restart's profile; BENCHMARKS, "Restart at 10M accounts under 10 s").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
#[cfg(feature = "dev-tools")]
mod demo;
mod gateway;
mod init;
mod keygen;
#[cfg(feature = "dev-tools")]
mod loadgen;
#[cfg(feature = "dev-tools")]
mod localnet;
mod node;
#[cfg(feature = "dev-tools")]
mod oracle;
mod participant;
mod payments;
mod query;
mod remote;
#[cfg(feature = "dev-tools")]
mod sim;
#[cfg(feature = "dev-tools")]
mod supervise;
mod symbols;
mod tx;
mod watch;

#[cfg(feature = "dev-tools")]
use walras_bench::{bench, clear, demo_batch, gen, replay};

use clap::{Parser, Subcommand};

/// Walras: a batch exchange that clears every block at one set of asset valuations.
#[derive(Parser, Debug)]
#[command(name = "walras", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    #[cfg(feature = "dev-tools")]
    /// Run a node under load: a fresh node, the load generator against it, a summary.
    Demo(demo::DemoArgs),
    #[cfg(feature = "dev-tools")]
    /// Clear one generated batch without a node, and verify it exactly.
    DemoBatch(demo_batch::DemoBatchArgs),
    #[cfg(feature = "dev-tools")]
    /// Clear a batch of limit sell offers from a CSV file.
    Clear(clear::ClearArgs),
    #[cfg(feature = "dev-tools")]
    /// Generate workloads.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Create a node's store with its genesis (`--genesis FILE` or `--dev`), without starting it.
    Init(init::InitArgs),
    /// Run a node: store, HTTP API, and a solo block producer or a CometBFT validator.
    Node(node::NodeArgs),
    /// Run the fair-access gateway in front of a node started with --block-source gateway.
    Gateway(gateway::GatewayArgs),
    #[cfg(feature = "dev-tools")]
    /// Create and start (or stop: `localnet down`) an N-validator CometBFT network on loopback.
    Localnet(localnet::LocalnetArgs),
    #[cfg(feature = "dev-tools")]
    /// Execute a generated workload's blocks and report throughput.
    Replay(replay::ReplayArgs),
    #[cfg(feature = "dev-tools")]
    /// Measure performance.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Make a key file: a fresh random key, or a development account's key.
    Keygen(keygen::KeygenArgs),
    /// Account transactions, signed and sent to a node.
    #[command(subcommand)]
    Account(tx::AccountCommand),
    /// Offer transactions, signed and sent to a node.
    #[command(subcommand)]
    Offer(tx::OfferCommand),
    /// Pay another account: a payment transaction, signed and sent to a node.
    Pay(tx::PayArgs),
    /// Fast payments (Accept): validators, wallets, localnet, benchmark.
    #[command(subcommand)]
    Payments(payments::PaymentsCommand),
    /// Read a node's state: status, accounts, offers, books, blocks, prices, transactions.
    Query(query::QueryArgs),
    /// Follow committed blocks, and an account's fills, as JSON lines (reconnects and resumes
    /// after the last height printed).
    Watch(watch::WatchArgs),
    #[cfg(feature = "dev-tools")]
    /// The valuation oracle: replay a recorded feed, value one book.
    #[command(subcommand)]
    Oracle(oracle::OracleCommand),
    #[cfg(feature = "dev-tools")]
    /// Deterministic simulations (the fair-access gateway: `sim dbo`).
    #[command(subcommand)]
    Sim(sim::SimCommand),
    #[cfg(feature = "dev-tools")]
    /// Offer a node an open-loop load of signed transactions and measure commit latency.
    ///
    /// Reports what was offered and sent; what the node refused, by HTTP status and code
    /// (`503 mempool_full`, `429 rate_limited`, ...); failures apart from refusals (requests
    /// with no answer, admitted transactions `expired` past the node's commit bound);
    /// goodput (accepted in a block, per second) beside committed per second; and latency of
    /// what committed only. `--json` prints it for scripts; `--presign` takes signing out of
    /// the measured run, so the offered rate can go far past what the node commits.
    #[command(long_about)]
    Loadgen(loadgen::LoadgenArgs),
}

/// `walras gen ...`: the offline generators, and the oracle's recorded feeds.
#[cfg(feature = "dev-tools")]
#[derive(Subcommand, Debug)]
enum GenCommand {
    #[command(flatten)]
    Offline(gen::GenCommand),
    /// Write a recorded venue feed (each venue's wire format, with injected faults).
    Feed(oracle::FeedArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        #[cfg(feature = "dev-tools")]
        Command::Demo(args) => demo::run(args),
        #[cfg(feature = "dev-tools")]
        Command::DemoBatch(args) => Ok(demo_batch::run(args)?),
        #[cfg(feature = "dev-tools")]
        Command::Clear(args) => Ok(clear::run(args)?),
        #[cfg(feature = "dev-tools")]
        Command::Gen(GenCommand::Offline(command)) => Ok(gen::run(command)?),
        #[cfg(feature = "dev-tools")]
        Command::Gen(GenCommand::Feed(args)) => oracle::gen_feed(args),
        Command::Init(args) => init::run(args),
        Command::Node(args) => node::run(args),
        Command::Gateway(args) => gateway::run(args),
        #[cfg(feature = "dev-tools")]
        Command::Localnet(args) => localnet::run(args),
        #[cfg(feature = "dev-tools")]
        Command::Replay(args) => Ok(replay::run(args)?),
        #[cfg(feature = "dev-tools")]
        Command::Bench(command) => Ok(bench::run(command)?),
        Command::Keygen(args) => keygen::run(args),
        Command::Account(command) => tx::run_account(command),
        Command::Offer(command) => tx::run_offer(command),
        Command::Pay(args) => tx::run_pay(args),
        Command::Payments(command) => payments::run(command),
        Command::Query(args) => query::run(args),
        Command::Watch(args) => watch::run(args),
        #[cfg(feature = "dev-tools")]
        Command::Oracle(command) => oracle::run(command),
        #[cfg(feature = "dev-tools")]
        Command::Sim(command) => sim::run_command(command),
        #[cfg(feature = "dev-tools")]
        Command::Loadgen(args) => loadgen::run(args),
    }
}

fn main() -> ExitCode {
    init_logging();
    let command = Cli::parse();
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`walras gen offers | head`): what it wanted, it
        // has; stop quietly, as `cat` and `grep` do.
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", message(&error));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes, `outer: cause: ...`, each said once. Most of the workspace's
/// errors already end their message with their cause (as `StoreError` does) and also expose
/// it as `source()`; a cause whose text the message already holds is not repeated.
fn message(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The node's log (tracing events) goes to stderr, at `info` unless `WALRAS_LOG` names another
/// filter (`warn`, `walras_server=debug`, ...). Command output stays on stdout.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WALRAS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
