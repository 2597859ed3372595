//! `walras gen`: workload generators.

mod workload;

use super::market_args::MarketArgs;
use super::{args, ToolError};
use std::io::{BufWriter, Write};
use walras_sim::{generate_offers, OfferModel, OfferWorkload};
use walras_types::offers_csv;

#[derive(clap::Subcommand, Debug)]
pub enum GenCommand {
    /// Write an offers CSV to stdout.
    Offers(GenOffersArgs),
    /// Write a genesis and blocks of signed transactions (SPEEDEX §7 model, with injected
    /// faults) to a directory.
    Workload(workload::GenWorkloadArgs),
}

#[derive(clap::Args, Debug)]
pub struct GenOffersArgs {
    /// Number of assets N
    #[arg(long, value_parser = args::asset_count)]
    assets: usize,
    /// Number of offers
    #[arg(long)]
    offers: usize,
    /// Random seed: the same seed gives the same offers
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Market model: market (two-sided books around the rate), cycles (SPEEDEX §7), skewed
    /// (§6.2-like volume), wide (valuations 1e-6..1e6)
    #[arg(long, default_value = "cycles")]
    model: OfferModel,
    #[command(flatten)]
    market: MarketArgs,
}

pub fn run(command: GenCommand) -> Result<(), ToolError> {
    match command {
        GenCommand::Offers(args) => {
            let workload = OfferWorkload {
                assets: args.assets,
                offers: args.offers,
                seed: args.seed,
                model: args.model,
                market: args.market.shape(),
            };
            workload.validate().map_err(ToolError::OfferParams)?;
            let generated = generate_offers(&workload);
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            offers_csv::write_offers(&mut out, &generated.offers)?;
            out.flush()?;
            Ok(())
        }
        GenCommand::Workload(args) => workload::run(args),
    }
}
