//! `walras demo-batch`: the batch exchange's heart in one command, without a node.
//!
//! Generates a batch of limit sell offers, clears it at one set of valuations, verifies the
//! result exactly (conservation per asset, limit prices) and prints a readable summary.
//! (`walras demo` runs a whole node under load instead.)

use super::{args, ToolError};
use std::time::{Duration, Instant};
use walras_clearing::{
    clear, Budget, Clearing, ClearingParams, OrderBooks, PayoutTerms, Resources, SupplyGrid,
    SystemClock,
};
use walras_sim::{generate_offers, OfferModel, OfferWorkload};
use walras_types::{Fraction, Offer, Valuation};

#[derive(clap::Args, Debug)]
pub struct DemoBatchArgs {
    #[arg(long, default_value = "20", value_parser = args::asset_count)]
    assets: usize,
    #[arg(long, default_value_t = 200_000)]
    offers: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Market model: cycles, skewed or wide
    #[arg(long, default_value = "cycles")]
    model: OfferModel,
}

pub fn run(args: DemoBatchArgs) -> Result<(), ToolError> {
    let workload = OfferWorkload {
        assets: args.assets,
        offers: args.offers,
        seed: args.seed,
        model: args.model,
        market: Default::default(),
    };
    workload.validate().map_err(ToolError::OfferParams)?;
    println!("Walras batch demo: one batch of the batch exchange, cleared without a node");
    println!(
        "  generating {} limit sell offers over {} assets ({} model, seed {})",
        args.offers, args.assets, args.model, args.seed
    );
    let generated = generate_offers(&workload);
    let offers = generated.offers;
    let started = Instant::now();
    let books = OrderBooks::build(offers.clone(), args.assets, 2)?;
    println!(
        "  sorted and indexed the books in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let params = ClearingParams {
        epsilon: Fraction::power_of_two(15),
        mu: Fraction::power_of_two(10),
        ..ClearingParams::default()
    };
    let grid = SupplyGrid::for_mu(&books, params.mu);
    let budget = Budget::within(&SystemClock, Duration::from_secs(2), u64::MAX);
    let clearing = clear(&books, grid.as_ref(), &params, Resources::serial(budget))?;
    print_clearing(&books, &clearing);
    verify(&books, &offers, &clearing, params.epsilon)?;
    print_prices(clearing.settlement.valuations(), &generated.valuations);
    println!();
    println!("Next: `walras gen offers ... > offers.csv` then `walras clear --offers offers.csv --assets N --json`;");
    println!("      `walras bench clearing` for the benchmark table (see BENCHMARKS.md);");
    println!("      `walras demo` for a whole node under load.");
    Ok(())
}

fn print_clearing(books: &OrderBooks, clearing: &Clearing) {
    let settlement = &clearing.settlement;
    let traded = settlement.traded(books).count();
    println!(
        "  cleared in {:.1} ms: {} after {} tâtonnement iterations",
        clearing.millis(),
        if clearing.converged {
            "converged"
        } else {
            "timed out (best prices used)"
        },
        clearing.iterations
    );
    let (mut full, mut partial) = (0usize, 0usize);
    for (offer, fill) in settlement.traded(books).flat_map(|pair| pair.offer_fills()) {
        if fill.sold == offer.amount {
            full += 1;
        } else {
            partial += 1;
        }
    }
    println!(
        "  {traded} asset pairs traded; {full} offers filled in full, {partial} partially \
         (the last of a pair, or too small to trade in full at its limit)"
    );
    println!(
        "  quality: {:.4}% of utility left unrealized; achieved ε {:.2e}, μ {:.2e}",
        clearing.quality.unrealized_utility_ratio * 100.0,
        clearing.quality.achieved_epsilon,
        clearing.quality.achieved_mu
    );
}

/// Re-checks the result from the per-offer fills, exactly, as an auditor would.
fn verify(
    books: &OrderBooks,
    offers: &[Offer],
    clearing: &Clearing,
    epsilon: Fraction,
) -> Result<(), ToolError> {
    let by_id: std::collections::HashMap<u64, &Offer> =
        offers.iter().map(|offer| (offer.id.0, offer)).collect();
    let valuations = clearing.settlement.valuations();
    let mut net = vec![0i128; books.assets()];
    let mut fills = 0usize;
    for fill in clearing.settlement.fills(books) {
        let offer = by_id[&fill.offer.0];
        let rate = valuations[offer.sell.0 as usize].rate_to(valuations[offer.buy.0 as usize]);
        let terms = PayoutTerms::new(rate, epsilon);
        let paid = terms.payout(fill.sold);
        if offer.min_price > rate
            || fill.sold > offer.amount
            || u128::from(fill.bought) != paid
            || !terms.meets_limit(offer.min_price, fill.sold, paid)
        {
            return Err(ToolError::Verification(format!(
                "offer {} traded outside its limit",
                offer.id.0
            )));
        }
        net[offer.sell.0 as usize] += fill.sold as i128;
        net[offer.buy.0 as usize] -= fill.bought as i128;
        fills += 1;
    }
    if let Some(asset) = net.iter().position(|balance| *balance < 0) {
        return Err(ToolError::Verification(format!(
            "asset {asset} not conserved"
        )));
    }
    let burned: i128 = net.iter().sum();
    println!(
        "  verified {fills} fills exactly: every asset conserved ({burned} units burned as commission \
         and rounding), every offer paid at least sold × limit × (1 − ε) on its integer amounts"
    );
    Ok(())
}

fn print_prices(valuations: &[Valuation], true_valuations: &[f64]) {
    println!();
    println!("  asset   clearing valuation   model's valuation (both relative to asset 0)");
    let base = valuations[0].0 as f64;
    for (asset, valuation) in valuations.iter().enumerate().take(8) {
        println!(
            "  {:>5}   {:>18.6}   {:>17.6}",
            asset,
            valuation.0 as f64 / base,
            true_valuations[asset] / true_valuations[0]
        );
    }
    if valuations.len() > 8 {
        println!("  ... and {} more assets", valuations.len() - 8);
    }
}
