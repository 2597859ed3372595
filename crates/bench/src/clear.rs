//! `walras clear`: clear one batch of offers from a CSV file (the command-line contract).

use super::clearing_args::ClearingArgs;
use super::{args, ToolError};
use serde::Serialize;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;
use walras_clearing::{Clearing, OrderBooks, SupplyGrid};
use walras_types::offers_csv;
use walras_types::Price;

#[derive(clap::Args, Debug)]
pub struct ClearArgs {
    /// Offers CSV: offer_id,account,sell,buy,amount,min_price
    #[arg(long)]
    offers: PathBuf,
    /// Number of assets N (assets are 0..N-1)
    #[arg(long, value_parser = args::asset_count)]
    assets: usize,
    #[command(flatten)]
    clearing: ClearingArgs,
    /// Threads racing tâtonnement instances (and sorting the books)
    #[arg(long, default_value = "1", value_parser = args::thread_count)]
    threads: usize,
    /// Write per-offer fills (offer_id,sold,bought) to this CSV file (a new one: see --force;
    /// never the offers file)
    #[arg(long)]
    fills: Option<PathBuf>,
    /// Overwrite an existing --fills file
    #[arg(long, requires = "fills")]
    force: bool,
    /// Print the result as one JSON object
    #[arg(long)]
    json: bool,
}

/// The JSON result of the command-line contract.
#[derive(Serialize)]
struct ClearReport {
    assets: usize,
    offers: usize,
    /// Per asset, its price in units of asset 0 (the node's unit: `prices[0]` is 1), for the
    /// assets that traded in one connected group of traded pairs with asset 0; `null` for the
    /// others (their valuations are where the price search started, not prices). Decimal
    /// strings of 12 significant digits, as the node serves them.
    prices: Vec<Option<String>>,
    /// The exact integer valuations the trades were computed with.
    valuations: Vec<u128>,
    trades: Vec<TradeReport>,
    burned: Vec<u64>,
    converged: bool,
    iterations: u64,
    /// Cut-repair steps after the race (thin books; see walras_clearing::cut).
    cut_steps: u32,
    epsilon: f64,
    mu: f64,
    achieved_epsilon: f64,
    achieved_mu: f64,
    realized_utility: f64,
    unrealized_utility: f64,
    /// `null` when nothing traded although something could have.
    unrealized_utility_ratio: Option<f64>,
    lp_with_lower_bounds: bool,
    repairs: u32,
    /// Units that offers below `(1 − μ) · rate` hold beyond what they can sell at their limits
    /// (dust): when positive, μ-completeness cannot hold and `converged` is false for that reason.
    mu_shortfall: u128,
    prices_converged: bool,
    threads: usize,
    instance: usize,
    millis: f64,
    /// Sorting and indexing the books, including the supply table (`grid_millis`).
    prepare_millis: f64,
    grid_millis: f64,
    price_millis: f64,
    settle_millis: f64,
    read_millis: f64,
}

#[derive(Serialize)]
struct TradeReport {
    sell: u16,
    buy: u16,
    sold: u64,
    bought: u64,
    rate: f64,
}

pub fn run(args: ClearArgs) -> Result<(), ToolError> {
    if let Some(fills) = &args.fills {
        check_fills_path(fills, &args.offers, args.force)?;
    }
    let read_started = Instant::now();
    let file = File::open(&args.offers).map_err(ToolError::io(format!(
        "cannot open {}",
        args.offers.display()
    )))?;
    let offers = offers_csv::read_offers(BufReader::new(file), args.assets)
        .map_err(|error| ToolError::Input(format!("{}: {error}", args.offers.display())))?;
    let read_millis = read_started.elapsed().as_secs_f64() * 1e3;
    let offer_count = offers.len();

    let prepare_started = Instant::now();
    let books = OrderBooks::build(offers, args.assets, args.threads)?;
    let grid_started = Instant::now();
    let supply_grid = SupplyGrid::for_mu(&books, args.clearing.mu);
    let grid_millis = grid_started.elapsed().as_secs_f64() * 1e3;
    let prepare_millis = prepare_started.elapsed().as_secs_f64() * 1e3;

    let params = args.clearing.params();
    let clearing = args
        .clearing
        .clear(&books, supply_grid.as_ref(), &params, args.threads)?;
    if let Some(path) = &args.fills {
        write_fills(path, args.force, &books, &clearing)?;
    }
    let mut report = report(&args, offer_count, &clearing, prepare_millis, read_millis);
    report.grid_millis = grid_millis;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print_summary(&mut out, &report)?;
    }
    Ok(())
}

/// Refuses, before any work, a `--fills` path that is the offers file itself (whatever path
/// names it: a link, `./`, `..`) and, without `force`, one that exists.
fn check_fills_path(fills: &Path, offers: &Path, force: bool) -> Result<(), ToolError> {
    let Ok(existing) = std::fs::metadata(fills) else {
        return Ok(()); // nothing there: created later, with create_new
    };
    let input = std::fs::metadata(offers)
        .map_err(ToolError::io(format!("cannot open {}", offers.display())))?;
    if (existing.dev(), existing.ino()) == (input.dev(), input.ino()) {
        return Err(ToolError::Refused(format!(
            "--fills {} is the offers file {}: writing fills would destroy the input; choose \
             another file",
            fills.display(),
            offers.display()
        )));
    }
    if !force {
        return Err(ToolError::Refused(format!(
            "--fills {} exists; add --force to overwrite it, or choose another file",
            fills.display()
        )));
    }
    Ok(())
}

fn write_fills(
    path: &Path,
    force: bool,
    books: &OrderBooks,
    clearing: &Clearing,
) -> Result<(), ToolError> {
    // Without --force the file must still not exist (create_new: no race with the check).
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .create_new(!force)
        .open(path)
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => ToolError::Refused(format!(
                "--fills {} exists; add --force to overwrite it, or choose another file",
                path.display()
            )),
            _ => ToolError::Io {
                doing: format!("cannot create {}", path.display()),
                source: error,
            },
        })?;
    let mut out = BufWriter::new(file);
    // The CSV row is the file format's; clearing's own fill converts at this edge.
    let rows = clearing
        .settlement
        .fills(books)
        .map(|fill| offers_csv::FillRow {
            offer_id: fill.offer,
            sold: fill.sold,
            bought: fill.bought,
        });
    offers_csv::write_fills(&mut out, rows)
        .and_then(|()| out.flush())
        .map_err(ToolError::io(format!("writing {}", path.display())))
}

/// The batch's prices by the node's rule (`engine::market`): units of asset 0 (Q48.80, exact),
/// `None` for an asset not priced against it by this clearing.
pub fn prices_in_asset0(settlement: &walras_clearing::Settlement) -> Vec<Option<Price>> {
    let valuations: Vec<u128> = settlement.valuations().iter().map(|v| v.0).collect();
    let traded = settlement
        .pairs()
        .iter()
        .filter(|pair| pair.sold > 0)
        .map(|pair| (pair.sell, pair.buy));
    let mut market = walras_engine::MarketPrices::new(valuations.len(), 0);
    market.record_clearing(1, &valuations, traded);
    market
        .assets()
        .iter()
        .map(|asset| asset.price_in_asset0.map(|price| price.rate))
        .collect()
}

fn report(
    args: &ClearArgs,
    offers: usize,
    clearing: &Clearing,
    prepare_millis: f64,
    read_millis: f64,
) -> ClearReport {
    let settlement = &clearing.settlement;
    let quality = &clearing.quality;
    ClearReport {
        assets: args.assets,
        offers,
        prices: prices_in_asset0(settlement)
            .iter()
            .map(|price| price.map(|price| price.to_string()))
            .collect(),
        valuations: settlement
            .valuations()
            .iter()
            .map(|valuation| valuation.0)
            .collect(),
        trades: settlement
            .pairs()
            .iter()
            .filter(|pair| pair.sold > 0)
            .map(|pair| TradeReport {
                sell: pair.sell,
                buy: pair.buy,
                sold: pair.sold,
                bought: pair.bought,
                rate: pair.rate.to_f64(),
            })
            .collect(),
        burned: settlement.burned().to_vec(),
        converged: clearing.converged,
        iterations: clearing.iterations,
        cut_steps: clearing.cut_steps,
        epsilon: args.clearing.epsilon.to_f64(),
        mu: args.clearing.mu.to_f64(),
        achieved_epsilon: quality.achieved_epsilon,
        achieved_mu: quality.achieved_mu,
        realized_utility: quality.realized_utility,
        unrealized_utility: quality.unrealized_utility,
        unrealized_utility_ratio: quality
            .unrealized_utility_ratio
            .is_finite()
            .then_some(quality.unrealized_utility_ratio),
        lp_with_lower_bounds: settlement.lp_with_lower_bounds(),
        repairs: settlement.repairs(),
        mu_shortfall: settlement.mu_shortfall(),
        prices_converged: clearing.prices_converged,
        threads: args.threads,
        instance: clearing.instance,
        millis: clearing.millis(),
        prepare_millis,
        grid_millis: 0.0,
        price_millis: clearing.price_millis,
        settle_millis: clearing.settle_millis,
        read_millis,
    }
}

fn print_summary(out: &mut impl Write, report: &ClearReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{} offers over {} assets: {} after {} iterations",
        report.offers,
        report.assets,
        if report.converged {
            "converged"
        } else {
            "did not converge"
        },
        report.iterations
    )?;
    writeln!(
        out,
        "{} pairs traded; unrealized/realized utility {}; achieved ε {:.3e}, μ {:.3e}",
        report.trades.len(),
        report.unrealized_utility_ratio.map_or(
            "n/a (nothing traded)".to_string(),
            |ratio| format!("{:.3}%", ratio * 100.0)
        ),
        report.achieved_epsilon,
        report.achieved_mu
    )?;
    writeln!(
        out,
        "clearing {:.1} ms (prices {:.1} ms, settlement {:.1} ms); books {:.1} ms; reading {:.1} ms",
        report.millis,
        report.price_millis,
        report.settle_millis,
        report.prepare_millis,
        report.read_millis
    )?;
    writeln!(
        out,
        "use --json for prices and trades, --fills FILE for per-offer fills"
    )
}
