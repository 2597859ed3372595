//! `walras`: the command-line interface to the Walras exchange.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = cli::Cli::parse();
    match cli::run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
