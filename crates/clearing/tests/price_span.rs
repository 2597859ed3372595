//! Clearing over the whole accepted price span: valuations from 1e-12 to 1e11 (limits near
//! 1e11 one way and 1e-11 the other), settled exactly at given valuations (tâtonnement is not
//! involved, so the test checks only the integer arithmetic of prices, rates and payouts).

use walras_clearing::OrderBooks;
use walras_clearing::{quantize, settle};
use walras_types::{AccountId, AssetId, Fraction, Offer, OfferId, Price, Valuation};

/// Valuations spanning 23 decades; neighbours are 1e11, 1e6 and 1e6 apart.
const TRUE_VALUATIONS: [f64; 4] = [1e11, 1.0, 1e-6, 1e-12];

/// Every neighbouring pair, both ways, each offer worth about `value` units of asset 1 (per pair,
/// so that both the most and the least valuable asset hold whole units of at most 2^63).
fn offers() -> Vec<Offer> {
    let mut offers = Vec::new();
    let pairs = [
        (0, 1, 1e14),
        (1, 0, 1e14),
        (1, 2, 1e6),
        (2, 1, 1e6),
        (2, 3, 1e3),
        (3, 2, 1e3),
    ];
    for (sell, buy, value) in pairs {
        for k in 0..5u64 {
            let ratio = TRUE_VALUATIONS[sell] / TRUE_VALUATIONS[buy];
            // Limits 0.5%..2.5% below the ratio: in the money at the true valuations.
            let limit = ratio * (1.0 - 0.005 * (k + 1) as f64);
            let amount = (value / TRUE_VALUATIONS[sell] * (1.0 + k as f64)) as u64;
            offers.push(Offer {
                id: OfferId(offers.len() as u64),
                account: AccountId(k),
                sell: AssetId(sell as u16),
                buy: AssetId(buy as u16),
                amount,
                min_price: Price::from_f64(limit),
            });
        }
    }
    offers
}

#[test]
fn quantized_valuations_keep_nine_digits_across_twenty_four_decades() {
    let floats = [1e12, 1.234_567_891e-12, 3.3, 7.77e-12];
    let valuations = quantize(&floats).unwrap();
    for (i, a) in valuations.iter().enumerate() {
        for (j, b) in valuations.iter().enumerate() {
            let exact = floats[i] / floats[j];
            let quantized = a.0 as f64 / b.0 as f64;
            let relative = (quantized / exact - 1.0).abs();
            assert!(relative < 1e-12, "{i}/{j}: relative error {relative:e}");
            // The rate as a price: exact floor, so within one ulp (8.3e-25) below the ratio.
            if (1e-12..=1e12).contains(&exact) {
                let rate = a.rate_to(*b).to_f64();
                assert!(
                    (rate / exact - 1.0).abs() < 1e-12,
                    "rate {i}->{j}: {rate:e}"
                );
            }
        }
    }
}

#[test]
fn settlement_at_valuations_spanning_the_range_conserves_and_respects_limits() {
    let offers = offers();
    for offer in &offers {
        assert!(offer.min_price.is_valid_limit(), "{offer:?}");
    }
    let books = OrderBooks::build(offers.clone(), 4, 1).unwrap();
    let valuations = quantize(&TRUE_VALUATIONS).unwrap();
    let epsilon = Fraction::power_of_two(15);
    let mu = Fraction::power_of_two(10);
    let settlement = settle(
        &books,
        &valuations,
        epsilon,
        mu,
        epsilon.to_f64() * 0.875,
        None,
    )
    .unwrap();
    let mut received = [0u128; 4];
    let mut paid = [0u128; 4];
    let mut traded_pairs = std::collections::BTreeSet::new();
    for fill in settlement.fills(&books) {
        let offer = offers[fill.offer.0 as usize];
        let rate: Price =
            valuations[offer.sell.0 as usize].rate_to(valuations[offer.buy.0 as usize]);
        assert!(
            offer.min_price <= rate,
            "offer {} beyond its limit",
            offer.id.0
        );
        assert_eq!(
            fill.bought as u128,
            rate.discounted_floor(epsilon).mul_amount_floor(fill.sold),
            "offer {} payout",
            offer.id.0
        );
        assert!(
            walras_clearing::PayoutTerms::new(rate, epsilon).meets_limit(
                offer.min_price,
                fill.sold,
                fill.bought as u128
            ),
            "offer {} paid below its limit",
            offer.id.0
        );
        received[offer.sell.0 as usize] += fill.sold as u128;
        paid[offer.buy.0 as usize] += fill.bought as u128;
        traded_pairs.insert((offer.sell.0, offer.buy.0));
    }
    for asset in 0..4 {
        assert!(
            received[asset] >= paid[asset],
            "asset {asset} not conserved"
        );
        assert_eq!(
            received[asset] - paid[asset],
            settlement.burned()[asset] as u128
        );
    }
    // Every pair is in the money at the true valuations, at the top of the range (1e11) and at
    // the bottom (1e-11, 1e-6) alike.
    assert_eq!(traded_pairs.len(), 6, "{traded_pairs:?}");
    assert!(valuations
        .iter()
        .all(|v| v.0 >= Valuation::NORMALIZED_MAX / 10u128.pow(24)));
}
