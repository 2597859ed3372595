//! `walras bench warm-start`: where tâtonnement should start (issue 15's warm-start question).
//! For each generated market batch, clearing runs three times from three starts:
//!
//! - `cold`: the fit to the books' median limit prices (what a node does without history);
//! - `previous`: the previous block's prices, modelled as the batch's true valuations moved
//!   by `--drift` (per asset, log-normal with that standard deviation): the market moved
//!   between two blocks;
//! - `oracle`: outside reference prices, modelled as the true valuations with a
//!   `--oracle-error` (same form): what a healthy valuation oracle gives.
//!
//! The oracle here is that model, not the live pipeline: its figures say what a start at a
//! given distance is worth, so the node's rule (which start to use) can be chosen on them.

use super::clearing_args::ClearingArgs;
use super::{args, market_args, ToolError};
use serde::Serialize;
use walras_clearing::{ClearingParams, OrderBooks, SupplyGrid};
use walras_sim::{generate_offers, MarketShape, OfferModel, OfferWorkload, PairChoice, Rng};

#[derive(clap::Args, Debug)]
pub struct WarmStartArgs {
    #[arg(long, default_value = "50", value_parser = args::asset_count)]
    assets: usize,
    #[arg(long, default_value_t = 100_000)]
    offers: usize,
    /// Seeds 1..=N
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Noise width of the market's limit prices
    #[arg(long, default_value = "0.1%", value_parser = market_args::spread_ppm)]
    spread: u32,
    /// How far the market moved since the previous block (standard deviation per asset),
    /// comma-separated, as `1%` or a fraction
    #[arg(long, value_delimiter = ',', default_value = "0.1%,1%,5%", value_parser = relative)]
    drift: Vec<f64>,
    /// The reference prices' error (standard deviation per asset)
    #[arg(long, default_value = "0.05%", value_parser = relative)]
    oracle_error: f64,
    #[command(flatten)]
    clearing: ClearingArgs,
    /// Print one JSON object per run instead of the table
    #[arg(long)]
    json: bool,
}

/// A relative size: `1%` or `0.01`, in [0, 1].
fn relative(text: &str) -> Result<f64, String> {
    let value = match text.strip_suffix('%') {
        Some(number) => number.parse::<f64>().map(|v| v / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("'{text}' is not a number or a percentage"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("'{text}' is outside 0..=100%"))
    }
}

#[derive(Serialize)]
struct StartFigures {
    seed: u64,
    drift: f64,
    start: &'static str,
    converged: bool,
    iterations: u64,
    millis: f64,
}

pub fn run(args: WarmStartArgs) -> Result<(), ToolError> {
    if !args.json {
        let command: Vec<String> = std::env::args().collect();
        println!("# command: {}", command.join(" "));
        println!(
            "# market books: {} assets, {} offers, spread {}%, uniform pairs; oracle error {}%; medians over {} seeds",
            args.assets,
            args.offers,
            f64::from(args.spread) / 1e4,
            args.oracle_error * 100.0,
            args.seeds
        );
        println!("drift     start     conv  iters  millis");
    }
    for &drift in &args.drift {
        let mut runs: Vec<StartFigures> = Vec::new();
        for seed in 1..=args.seeds {
            runs.extend(run_seed(&args, seed, drift)?);
        }
        if args.json {
            for run in &runs {
                println!("{}", serde_json::to_string(run)?);
            }
            continue;
        }
        for start in ["cold", "previous", "oracle"] {
            let of: Vec<&StartFigures> = runs.iter().filter(|run| run.start == start).collect();
            let converged = of.iter().filter(|run| run.converged).count();
            let iterations = median(of.iter().map(|run| run.iterations as f64).collect());
            let millis = median(of.iter().map(|run| run.millis).collect());
            println!(
                "{:<8}  {:<8}  {}/{}  {:>5.0}  {:>6.1}",
                format!("{}%", drift * 100.0),
                start,
                converged,
                of.len(),
                iterations,
                millis
            );
        }
    }
    Ok(())
}

fn run_seed(args: &WarmStartArgs, seed: u64, drift: f64) -> Result<Vec<StartFigures>, ToolError> {
    let workload = OfferWorkload {
        assets: args.assets,
        offers: args.offers,
        seed,
        model: OfferModel::Market,
        market: MarketShape {
            spread_ppm: args.spread,
            pairs: PairChoice::Uniform,
            ..MarketShape::default()
        },
    };
    workload.validate().map_err(ToolError::OfferParams)?;
    let generated = generate_offers(&workload);
    let books = OrderBooks::build(generated.offers, args.assets, 1)?;
    let grid = SupplyGrid::for_mu(&books, args.clearing.mu);
    let mut rng = Rng::new(seed ^ 0x5741_524d_5354_4152);
    let moved = |rng: &mut Rng, width: f64| -> Vec<f64> {
        generated
            .valuations
            .iter()
            .map(|value| value * (width * rng.normal()).exp())
            .collect()
    };
    let starts = [
        ("cold", None),
        ("previous", Some(moved(&mut rng, drift))),
        ("oracle", Some(moved(&mut rng, args.oracle_error))),
    ];
    let mut figures = Vec::new();
    for (start, start_prices) in starts {
        let params = ClearingParams {
            start_prices,
            ..args.clearing.params()
        };
        let clearing = args.clearing.clear(&books, grid.as_ref(), &params, 1)?;
        figures.push(StartFigures {
            seed,
            drift,
            start,
            converged: clearing.converged,
            iterations: clearing.iterations,
            millis: clearing.millis(),
        });
    }
    Ok(figures)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}
