//! Valuations. The paper's worked example (§2.4.3) gives exact figures; a property test checks
//! that the O(levels) closed form of depth VWAP equals the paper's O(depth × levels) definition
//! to 1e-12 (relative) on random books and steps; notional depth and trade VWAP by hand.

use proptest::prelude::*;
use walras_oracle::{
    depth_vwap, depth_vwap_naive, mid, notional_depth, weighted_mid, TradeWindow, ValueError,
};

const BIDS: [(f64, f64); 2] = [(10.0, 1.0), (9.0, 4.0)];
const ASKS: [(f64, f64); 2] = [(11.0, 3.0), (12.0, 3.0)];

#[test]
fn the_papers_worked_example_gives_its_figures() {
    assert_eq!(mid(&BIDS, &ASKS).unwrap(), 10.5);
    // (Qb·Pa + Qa·Pb)/(Qb + Qa) = (1·11 + 3·10)/4 = 10.25; the paper's printed Qb·Qa denominator would give 13.67.
    assert_eq!(weighted_mid(&BIDS, &ASKS).unwrap(), 10.25);
    // Buy 1..5: 11, 11, 11, 11.25, 11.4 (mean 11.13); sell 1..5: 10, 9.5, 9.333, 9.25, 9.2 (mean 9.4567).
    let expected = (11.13 + (10.0 + 9.5 + 28.0 / 3.0 + 9.25 + 9.2) / 5.0) / 2.0;
    let naive = depth_vwap_naive(&BIDS, &ASKS, 5.0, 1.0).unwrap();
    let closed = depth_vwap(&BIDS, &ASKS, 5.0, 1.0).unwrap();
    assert!((naive - expected).abs() < 1e-12, "{naive} vs {expected}");
    assert!((closed - expected).abs() < 1e-12, "{closed} vs {expected}");
    assert!((closed - 10.293_333_333_333).abs() < 1e-9);
}

#[test]
fn depth_beyond_the_book_is_an_error_not_a_number() {
    assert!(matches!(
        depth_vwap(&BIDS, &ASKS, 7.0, 1.0),
        Err(ValueError::InsufficientDepth { .. })
    ));
    assert!(matches!(
        depth_vwap_naive(&BIDS, &ASKS, 7.0, 1.0),
        Err(ValueError::InsufficientDepth { .. })
    ));
    assert!(matches!(
        depth_vwap(&BIDS, &ASKS, 5.0, 0.0),
        Err(ValueError::BadParams(_))
    ));
    assert!(matches!(mid(&[], &ASKS), Err(ValueError::EmptySide(_))));
}

#[test]
fn notional_depth_is_the_average_price_for_a_quote_amount() {
    // Buying 44 of quote: 3 @ 11 (33) then 11/12 @ 12 → 44 / (3 + 11/12).
    let nd = notional_depth(&BIDS, &ASKS, 44.0).unwrap();
    assert!((nd.buy_average - 44.0 / (3.0 + 11.0 / 12.0)).abs() < 1e-12);
    // Selling for 19 of quote: 1 @ 10 then 1 @ 9 → 19 / 2.
    let nd = notional_depth(&BIDS, &ASKS, 19.0).unwrap();
    assert!((nd.sell_average - 9.5).abs() < 1e-12);
    assert!(notional_depth(&BIDS, &ASKS, 1e9).is_err());
}

#[test]
fn trade_vwap_counts_only_trades_inside_the_window() {
    let mut w = TradeWindow::new(1_000);
    assert_eq!(w.vwap(0), None);
    w.push(100, 10.0, 1.0);
    w.push(900, 12.0, 3.0);
    assert_eq!(w.vwap(1_000), Some((10.0 + 36.0) / 4.0));
    assert_eq!(
        w.vwap(1_500),
        Some(12.0),
        "the trade at 100 left the window"
    );
}

fn book_side(descending: bool) -> impl Strategy<Value = Vec<(f64, f64)>> {
    prop::collection::vec((1u32..500, 1u32..400), 1..60).prop_map(move |v| {
        let mut price = if descending { 10_000.0 } else { 10_001.0 };
        v.into_iter()
            .map(|(gap, qty)| {
                price += if descending {
                    -(gap as f64) / 100.0
                } else {
                    gap as f64 / 100.0
                };
                (price, qty as f64 / 8.0)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn closed_form_depth_vwap_equals_the_naive_definition_on_random_books(
        bids in book_side(true),
        asks in book_side(false),
        depth_share in 0.01f64..1.0,
        step_choice in 0usize..4,
    ) {
        let available = bids.iter().map(|l| l.1).sum::<f64>().min(asks.iter().map(|l| l.1).sum::<f64>());
        let step = [1.0, 0.5, 0.125, 3.0][step_choice];
        let depth = (available * depth_share).max(step);
        let naive = depth_vwap_naive(&bids, &asks, depth, step);
        let closed = depth_vwap(&bids, &asks, depth, step);
        match (naive, closed) {
            (Ok(a), Ok(b)) => prop_assert!(((a - b) / a).abs() <= 1e-12, "naive {} closed {} depth {} step {}", a, b, depth, step),
            (Err(e), Err(_)) => prop_assert!(depth > available * 0.999, "{:?} with depth {} of {}", e, depth, available),
            (a, b) => prop_assert!(false, "disagree: {:?} vs {:?}", a, b),
        }
    }
}

#[test]
fn the_analyst_form_parses_exact_levels_and_values_the_worked_example() {
    use walras_oracle::{parse_levels, value_book_text, Method};
    let v = value_book_text(
        "10:1,9:4",
        "11:3,12:3",
        &Method::DepthVwap {
            depth: 5.0,
            step: 1.0,
        },
    )
    .unwrap();
    assert!((v.price.unwrap() - 10.293_333_333_333_333).abs() < 1e-12);
    assert_eq!(
        (v.mid, v.weighted_mid, v.crossed),
        (Some(10.5), Some(10.25), false)
    );
    let short = value_book_text(
        "10:1",
        "11:1",
        &Method::DepthVwap {
            depth: 5.0,
            step: 1.0,
        },
    )
    .unwrap();
    assert!(short.price.is_none() && short.error.is_some());
    assert_eq!(
        parse_levels("9:1, 10:2,9:3", true).unwrap().len(),
        2,
        "a repeated price adds up"
    );
    assert!(parse_levels("10", true).is_err());
    assert!(parse_levels("10:-1", true).is_err());
    assert!(parse_levels("1e999:1", true).is_err());
}
