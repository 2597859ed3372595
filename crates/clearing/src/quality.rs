//! Clearing quality, measured rather than assumed (SPEEDEX appendix B and §6.2).
//!
//! - Utility of one unit sold by an offer is `p_sell − limit · p_buy` (in value units): what the
//!   offer gains over its reservation price. *Realized* sums it over what traded; *unrealized*
//!   over what could have traded at the batch rate (limit ≤ rate) but did not.
//! - Achieved μ: the smallest μ for which every offer with limit below `(1 − μ) · rate` traded in
//!   full.
//! - Achieved ε: the smallest commission with which the chosen amounts conserve every asset.

use crate::book::OrderBooks;
use crate::settle::Settlement;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Quality {
    pub realized_utility: f64,
    pub unrealized_utility: f64,
    /// unrealized / realized; 0 when nothing could trade, infinite when something could but
    /// nothing did.
    pub unrealized_utility_ratio: f64,
    pub achieved_mu: f64,
    pub achieved_epsilon: f64,
}

pub(crate) fn measure(books: &OrderBooks, settlement: &Settlement) -> Quality {
    let valuations: Vec<f64> = settlement.valuations().iter().map(|v| v.0 as f64).collect();
    let mut quality = Quality::default();
    let assets = books.assets();
    let mut received = vec![0.0f64; assets];
    let mut gross_paid = vec![0.0f64; assets];
    for pair in settlement.pairs() {
        let book = &books.pairs()[pair.book_index];
        let in_the_money = books.count_at_or_below(book, pair.rate);
        let (sell_value, buy_value) = (
            valuations[pair.sell as usize],
            valuations[pair.buy as usize],
        );
        let rate = pair.rate.to_f64();
        for (index, offer) in books.offers(book).take(in_the_money).enumerate() {
            let sold = pair.sold_by(index, offer.amount) as f64;
            let unit_utility = (sell_value - offer.min_price.to_f64() * buy_value).max(0.0);
            quality.realized_utility += sold * unit_utility;
            quality.unrealized_utility += (offer.amount as f64 - sold) * unit_utility;
        }
        let first_unfilled = pair.first_unfilled();
        if first_unfilled < in_the_money {
            let first_short = books.offer_at(book, first_unfilled).min_price.to_f64();
            quality.achieved_mu = quality.achieved_mu.max(1.0 - first_short / rate);
        }
        received[pair.sell as usize] += pair.sold as f64;
        gross_paid[pair.buy as usize] += pair.sold as f64 * rate;
    }
    for asset in 0..assets {
        if gross_paid[asset] > 0.0 {
            let needed = 1.0 - received[asset] / gross_paid[asset];
            quality.achieved_epsilon = quality.achieved_epsilon.max(needed);
        }
    }
    quality.unrealized_utility_ratio = if quality.realized_utility > 0.0 {
        quality.unrealized_utility / quality.realized_utility
    } else if quality.unrealized_utility > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    quality
}
