//! Command definitions and dispatch.

mod args;
mod bench;
mod clear;
mod demo;
mod demo_batch;
mod gen;
mod init;
mod keygen;
mod loadgen;
mod localnet;
mod market_args;
mod node;
mod query;
mod remote;
mod replay;
mod tx;

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
    /// Run a node under load: a fresh node, the load generator against it, a summary.
    Demo(demo::DemoArgs),
    /// Clear one generated batch without a node, and verify it exactly.
    DemoBatch(demo_batch::DemoBatchArgs),
    /// Clear a batch of limit sell offers from a CSV file.
    Clear(clear::ClearArgs),
    /// Generate workloads.
    #[command(subcommand)]
    Gen(gen::GenCommand),
    /// Create a node's store with its genesis (`--genesis FILE` or `--dev`), without starting it.
    Init(init::InitArgs),
    /// Run a node: store, HTTP API, and a solo block producer or a CometBFT validator.
    Node(node::NodeArgs),
    /// Create and start (or stop: `localnet down`) an N-validator CometBFT network on loopback.
    Localnet(localnet::LocalnetArgs),
    /// Execute a generated workload's blocks and report throughput.
    Replay(replay::ReplayArgs),
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
    /// Read a node's state: status, accounts, offers, books, blocks, prices, transactions.
    Query(query::QueryArgs),
    /// Offer a node an open-loop load of signed transactions and measure commit latency.
    Loadgen(loadgen::LoadgenArgs),
}

/// An error for the user: printed as `error: <message>` with a non-zero exit.
#[derive(Debug)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(error: E) -> CliError {
        CliError(error.to_string())
    }
}

pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::DemoBatch(args) => demo_batch::run(args),
        Command::Clear(args) => clear::run(args),
        Command::Gen(command) => gen::run(command),
        Command::Init(args) => init::run(args),
        Command::Node(args) => node::run(args),
        Command::Localnet(args) => localnet::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Bench(command) => bench::run(command),
        Command::Keygen(args) => keygen::run(args),
        Command::Account(command) => tx::run_account(command),
        Command::Offer(command) => tx::run_offer(command),
        Command::Pay(args) => tx::run_pay(args),
        Command::Query(args) => query::run(args),
        Command::Loadgen(args) => loadgen::run(args),
    }
}
