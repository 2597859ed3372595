//! Recognising, before any tâtonnement, a batch in which nothing can trade.
//!
//! Every trade happens along a cycle of assets (what the auctioneer receives of an asset it must
//! pay out), and around a cycle the batch rates multiply to one. An offer S→B with limit `l` can
//! trade only where `p_S / p_B ≥ l`; so if every cycle of pairs has a product of cheapest limits
//! above one, no valuations let anything trade, and tâtonnement would only spin (issue 10: a
//! 40-offer batch ran 1.4 million iterations). Conversely, valuations under which no offer is in
//! the money exist exactly then: they solve the difference constraints
//! `ln p_S − ln p_B ≤ ln l_SB − margin`, found by Bellman–Ford shortest paths (a negative cycle means
//! some cycle could trade, and the ordinary race runs).

use crate::book::OrderBooks;

/// Relative margin by which every rate stays below every limit at the valuations returned.
pub(crate) const IDLE_MARGIN: f64 = 1e-6;
/// Bellman–Ford costs assets × pairs; above this the check is skipped (such books trade anyway).
const WORK_MAX: usize = 20_000_000;

/// Valuations (geometric mean 1) at which no offer's limit is at or below its rate, when such
/// valuations exist; `None` when some cycle of offers can trade (or the check is too large to run).
pub(crate) fn idle_valuations(books: &OrderBooks) -> Option<Vec<f64>> {
    let assets = books.assets();
    let pairs = books.pairs();
    if assets.saturating_mul(pairs.len()) > WORK_MAX {
        return None;
    }
    // Edge B → S of weight ln(cheapest limit of S→B) − margin: x_S ≤ x_B + weight.
    let edges: Vec<(usize, usize, f64)> = pairs
        .iter()
        .map(|pair| {
            let cheapest = books.offer_at(pair, 0).min_price.to_f64();
            (
                pair.buy as usize,
                pair.sell as usize,
                cheapest.ln() - IDLE_MARGIN,
            )
        })
        .collect();
    // Shortest distances from a virtual source joined to every asset by a zero edge.
    let mut distance = vec![0.0f64; assets];
    for _round in 0..assets {
        let mut changed = false;
        for &(from, to, weight) in &edges {
            let through = distance[from] + weight;
            if through < distance[to] {
                distance[to] = through;
                changed = true;
            }
        }
        if !changed {
            return Some(valuations_from(&distance));
        }
    }
    None // still relaxing after `assets` rounds: a negative cycle, so some cycle can trade
}

fn valuations_from(log_valuations: &[f64]) -> Vec<f64> {
    let mean = log_valuations.iter().sum::<f64>() / log_valuations.len().max(1) as f64;
    log_valuations
        .iter()
        .map(|log| (log - mean).exp())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

    fn offer(id: u64, sell: u16, buy: u16, limit: f64) -> Offer {
        Offer {
            id: OfferId(id),
            account: AccountId(0),
            sell: AssetId(sell),
            buy: AssetId(buy),
            amount: 100,
            min_price: Price::from_f64(limit),
        }
    }

    #[test]
    fn a_cycle_whose_limits_multiply_above_one_is_idle_and_rates_stay_below_limits() {
        let offers = vec![
            offer(0, 0, 1, 2.0),
            offer(1, 1, 2, 1.0),
            offer(2, 2, 0, 0.6),
            offer(3, 1, 0, 0.7),
        ];
        let books = OrderBooks::build(offers.clone(), 3, 1).unwrap();
        let prices =
            idle_valuations(&books).expect("2 × 1 × 0.6 > 1 and 0.7 × 2 > 1: nothing trades");
        for offer in &offers {
            let rate = prices[offer.sell.0 as usize] / prices[offer.buy.0 as usize];
            assert!(
                rate < offer.min_price.to_f64(),
                "offer {} in the money",
                offer.id.0
            );
        }
    }

    #[test]
    fn a_cycle_that_crosses_is_not_idle() {
        let offers = vec![offer(0, 0, 1, 0.9), offer(1, 1, 0, 1.0)];
        let books = OrderBooks::build(offers, 2, 1).unwrap();
        assert!(idle_valuations(&books).is_none());
    }
}
