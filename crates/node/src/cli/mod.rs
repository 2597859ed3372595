//! Command definitions and dispatch.

mod args;
mod bench;
mod clear;
mod demo;
mod gen;
mod node;
mod replay;

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
    /// Run the main job on the embedded default: a batch generated, cleared and verified.
    Demo(demo::DemoArgs),
    /// Clear a batch of limit sell offers from a CSV file.
    Clear(clear::ClearArgs),
    /// Generate workloads.
    #[command(subcommand)]
    Gen(gen::GenCommand),
    /// Run a solo node: store, block producer and HTTP API.
    Node(node::NodeArgs),
    /// Execute a generated workload's blocks and report throughput.
    Replay(replay::ReplayArgs),
    /// Measure performance.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
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
        Command::Clear(args) => clear::run(args),
        Command::Gen(command) => gen::run(command),
        Command::Node(args) => node::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Bench(command) => bench::run(command),
    }
}
