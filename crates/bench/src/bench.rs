//! `walras bench`: benchmarks that print their figures with the command that produced them.

use super::clearing_args::ClearingArgs;
use super::{args, market_args, ToolError};
use serde::Serialize;
use std::time::Instant;
use walras_clearing::{query_demand, query_demand_on_grid, DemandWorkspace};
use walras_clearing::{ClearingParams, OrderBooks, SupplyGrid};
use walras_sim::{generate_offers, MarketShape, OfferModel, OfferWorkload, PairChoice};

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Clearing speed and quality over generated batches (books built outside the timing).
    Clearing(ClearingBenchArgs),
    /// Iterations and time of clearing from a cold start, the previous block's prices and
    /// outside reference prices (the valuation oracle's warm start).
    WarmStart(crate::warm_start::WarmStartArgs),
}

#[derive(clap::Args, Debug)]
pub struct ClearingBenchArgs {
    #[arg(long, default_value = "50", value_parser = args::asset_count)]
    assets: usize,
    /// Batch sizes, comma-separated
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10000,100000,500000,1000000"
    )]
    offers: Vec<usize>,
    /// Models, comma-separated: market, cycles, skewed, wide
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "market,cycles,skewed,wide"
    )]
    models: Vec<OfferModel>,
    /// market model: spreads, comma-separated (each a percentage or a fraction)
    #[arg(long, value_delimiter = ',', default_value = "0.1%,1%", value_parser = market_args::spread_ppm)]
    spreads: Vec<u32>,
    /// market model: pair choices, comma-separated (uniform, power-law)
    #[arg(
        long = "pair-choices",
        value_delimiter = ',',
        default_value = "uniform,power-law"
    )]
    pair_choices: Vec<PairChoice>,
    /// market model: valuations spread over 10^-D..=10^D
    #[arg(long, default_value_t = 2)]
    valuation_decades: u8,
    /// Independent instances (seeds) per model and size; figures are medians over them
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// First seed
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    clearing: ClearingArgs,
    #[arg(long, default_value = "1", value_parser = args::thread_count)]
    threads: usize,
    /// Demand queries timed per instance, after clearing, at the clearing prices moved randomly
    #[arg(long, default_value_t = 300)]
    queries: usize,
    /// Largest relative move of each price between two timed queries
    #[arg(long, default_value_t = 1e-3)]
    jitter: f64,
    /// Start tâtonnement from equal valuations instead of the fit to the books
    #[arg(long)]
    cold_start: bool,
    /// Tâtonnement's steps search the books exactly instead of reading the supply table
    #[arg(long)]
    exact_queries: bool,
    /// Print one JSON object per instance instead of the table
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone)]
struct InstanceFigures {
    model: String,
    /// The market shape (market model only), e.g. `market/1%/uniform`.
    label: String,
    offers: usize,
    seed: u64,
    converged: bool,
    iterations: u64,
    millis: f64,
    price_millis: f64,
    settle_millis: f64,
    prepare_millis: f64,
    queries: u64,
    query_micros_tatonnement: f64,
    check_queries: u64,
    check_micros_tatonnement: f64,
    grid_query_micros_warm: f64,
    grid_query_micros_cold: f64,
    exact_query_micros_warm: f64,
    exact_query_micros_cold: f64,
    unrealized_utility_ratio: f64,
    achieved_mu: f64,
    repairs: u32,
    /// Units that offers below `(1 − μ) · rate` hold beyond what they can sell at their limits
    /// (dust): when positive, μ-completeness cannot hold and `converged` is false for that reason.
    mu_shortfall: u128,
    prices_converged: bool,
}

pub fn run(command: BenchCommand) -> Result<(), ToolError> {
    match command {
        BenchCommand::Clearing(args) => bench_clearing(args),
        BenchCommand::WarmStart(args) => crate::warm_start::run(args),
    }
}

fn bench_clearing(args: ClearingBenchArgs) -> Result<(), ToolError> {
    let command: Vec<String> = std::env::args().collect();
    if !args.json {
        println!("# command: {}", command.join(" "));
        println!("# machine: {}", machine_description());
        println!(
            "# assets {}, ε {:.3e}, μ {:.3e}, threads {}, timeout {} ms; medians over {} seeds",
            args.assets,
            args.clearing.epsilon.to_f64(),
            args.clearing.mu.to_f64(),
            args.threads,
            args.clearing.timeout_ms,
            args.seeds
        );
        println!(
            "{:<16} {:>8} {:>5} {:>6} {:>7} {:>7} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "model",
            "offers",
            "conv",
            "iters",
            "queries",
            "millis",
            "prepare",
            "tat_q_us",
            "grid_warm",
            "grid_cold",
            "exact_wrm",
            "exact_cld",
            "unrealized"
        );
    }
    for (model, shape) in model_shapes(&args) {
        for &offers in &args.offers {
            let mut figures = Vec::new();
            for seed in args.seed..args.seed + args.seeds {
                let figure = run_instance(&args, model, shape, offers, seed)?;
                if args.json {
                    println!("{}", serde_json::to_string(&figure)?);
                }
                figures.push(figure);
            }
            if !args.json {
                print_row(&label(model, shape), offers, &figures);
            }
        }
    }
    Ok(())
}

/// Every (model, shape) to run: the market model once per spread and pair choice.
fn model_shapes(args: &ClearingBenchArgs) -> Vec<(OfferModel, MarketShape)> {
    let mut runs = Vec::new();
    for &model in &args.models {
        if model != OfferModel::Market {
            runs.push((model, MarketShape::default()));
            continue;
        }
        for &pairs in &args.pair_choices {
            for &spread_ppm in &args.spreads {
                runs.push((
                    model,
                    MarketShape {
                        spread_ppm,
                        pairs,
                        valuation_decades: args.valuation_decades,
                    },
                ));
            }
        }
    }
    runs
}

fn label(model: OfferModel, shape: MarketShape) -> String {
    if model != OfferModel::Market {
        return model.name().to_string();
    }
    let pairs = match shape.pairs {
        PairChoice::Uniform => "uni",
        PairChoice::PowerLaw => "pow",
    };
    format!("mkt/{}%/{pairs}", shape.spread_ppm as f64 / 1e4)
}

fn run_instance(
    args: &ClearingBenchArgs,
    model: OfferModel,
    shape: MarketShape,
    offers: usize,
    seed: u64,
) -> Result<InstanceFigures, ToolError> {
    let workload = OfferWorkload {
        assets: args.assets,
        offers,
        seed,
        model,
        market: shape,
    };
    workload.validate().map_err(ToolError::OfferParams)?;
    let generated = generate_offers(&workload);
    let prepare_started = Instant::now();
    let books = OrderBooks::build(generated.offers, args.assets, args.threads)?;
    let supply_grid = SupplyGrid::for_mu(&books, args.clearing.mu);
    let prepare_millis = prepare_started.elapsed().as_secs_f64() * 1e3;
    let params = ClearingParams {
        start_prices: args.cold_start.then(|| vec![1.0; args.assets]),
        ..args.clearing.params()
    };
    // --exact-queries: tâtonnement's steps search the books (the table is still timed below).
    let step_grid = supply_grid.as_ref().filter(|_| !args.exact_queries);
    let clearing = args
        .clearing
        .clear(&books, step_grid, &params, args.threads)?;
    let prices: Vec<f64> = clearing
        .settlement
        .valuations()
        .iter()
        .map(|valuation| valuation.0 as f64)
        .collect();
    let times = time_queries(
        &books,
        supply_grid.as_ref(),
        &prices,
        args.clearing.mu.to_f64(),
        args.queries,
        args.jitter,
    );
    Ok(InstanceFigures {
        model: model.name().to_string(),
        label: label(model, shape),
        offers,
        seed,
        converged: clearing.converged,
        iterations: clearing.iterations,
        millis: clearing.millis(),
        price_millis: clearing.price_millis,
        settle_millis: clearing.settle_millis,
        prepare_millis,
        queries: clearing.queries,
        query_micros_tatonnement: clearing.query_micros_mean,
        check_queries: clearing.check_queries,
        check_micros_tatonnement: clearing.check_micros_mean,
        grid_query_micros_warm: times.grid_warm,
        grid_query_micros_cold: times.grid_cold,
        exact_query_micros_warm: times.exact_warm,
        exact_query_micros_cold: times.exact_cold,
        unrealized_utility_ratio: clearing.quality.unrealized_utility_ratio,
        achieved_mu: clearing.quality.achieved_mu,
        repairs: clearing.settlement.repairs(),
        mu_shortfall: clearing.settlement.mu_shortfall(),
        prices_converged: clearing.prices_converged,
    })
}

/// Median single-thread demand-query times, in µs.
struct QueryTimes {
    /// The supply-table query tâtonnement's steps use, prices moving between queries.
    grid_warm: f64,
    /// The same after every cache line was evicted.
    grid_cold: f64,
    /// The exact query (convergence checks), search hints from the previous query.
    exact_warm: f64,
    /// The exact query with fresh hints after every cache line was evicted.
    exact_cold: f64,
}

/// Times demand queries at `prices`, each price moved by up to `jitter` (relative) per query.
fn time_queries(
    books: &OrderBooks,
    grid: Option<&SupplyGrid>,
    prices: &[f64],
    mu: f64,
    queries: usize,
    jitter: f64,
) -> QueryTimes {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut moved = |prices: &[f64], trial: &mut Vec<f64>| {
        trial.clear();
        for price in prices {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let uniform = (state >> 11) as f64 / (1u64 << 53) as f64;
            trial.push(price * (1.0 + (uniform - 0.5) * 2.0 * jitter));
        }
    };
    let mut workspace = DemandWorkspace::new(books);
    let mut trial = Vec::with_capacity(prices.len());
    let mut evictor = vec![0u8; 48 << 20]; // larger than the last-level cache
    let mut times: [Vec<f64>; 4] = Default::default();
    let timed = |run: &mut dyn FnMut()| {
        let started = Instant::now();
        run();
        started.elapsed().as_secs_f64() * 1e6
    };
    for query in 0..queries.max(1) {
        moved(prices, &mut trial);
        if let Some(grid) = grid {
            times[0].push(timed(&mut || {
                query_demand_on_grid(books, grid, &trial, &mut workspace)
            }));
        }
        times[2].push(timed(&mut || {
            query_demand(books, &trial, mu, &mut workspace)
        }));
        if query % 10 == 0 {
            let mut fresh = DemandWorkspace::new(books);
            for (kind, slot) in [(true, 1), (false, 3)] {
                evictor
                    .iter_mut()
                    .for_each(|byte| *byte = byte.wrapping_add(1));
                std::hint::black_box(&evictor);
                match (kind, grid) {
                    (true, Some(grid)) => times[slot].push(timed(&mut || {
                        query_demand_on_grid(books, grid, &trial, &mut fresh)
                    })),
                    (true, None) => {}
                    (false, _) => {
                        times[slot].push(timed(&mut || query_demand(books, &trial, mu, &mut fresh)))
                    }
                }
            }
        }
    }
    if std::env::var_os("WALRAS_BENCH_MIN").is_some() {
        let fastest = |values: &[f64]| values.iter().cloned().fold(f64::INFINITY, f64::min);
        eprintln!(
            "fastest: grid warm {:.1} cold {:.1}, exact warm {:.1} cold {:.1} µs",
            fastest(&times[0]),
            fastest(&times[1]),
            fastest(&times[2]),
            fastest(&times[3])
        );
    }
    let [grid_warm, grid_cold, exact_warm, exact_cold] = times.map(|mut values| {
        if values.is_empty() {
            f64::NAN
        } else {
            median(&mut values)
        }
    });
    QueryTimes {
        grid_warm,
        grid_cold,
        exact_warm,
        exact_cold,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn print_row(label: &str, offers: usize, figures: &[InstanceFigures]) {
    let pick = |get: fn(&InstanceFigures) -> f64| {
        let mut values: Vec<f64> = figures.iter().map(get).collect();
        median(&mut values)
    };
    let converged = figures.iter().filter(|figure| figure.converged).count();
    println!(
        "{:<16} {:>8} {:>2}/{:<2} {:>6.0} {:>7.0} {:>7.1} {:>7.1} {:>8.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.4}%",
        label,
        offers,
        converged,
        figures.len(),
        pick(|figure| figure.iterations as f64),
        pick(|figure| figure.queries as f64),
        pick(|figure| figure.millis),
        pick(|figure| figure.prepare_millis),
        pick(|figure| figure.query_micros_tatonnement),
        pick(|figure| figure.grid_query_micros_warm),
        pick(|figure| figure.grid_query_micros_cold),
        pick(|figure| figure.exact_query_micros_warm),
        pick(|figure| figure.exact_query_micros_cold),
        pick(|figure| figure.unrealized_utility_ratio) * 100.0,
    );
}

/// CPU model and core count, for the record.
fn machine_description() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|name| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |count| count.get());
    format!("{model}, {cores} cores available")
}
