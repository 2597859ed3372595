//! `walras clear` and `walras gen offers` as a user runs them: the JSON contract on good input,
//! and on bad input a non-zero exit with a message naming the problem (and the line), never a
//! panic. Each case runs the real binary.

use std::path::PathBuf;
use std::process::{Command, Output};

fn walras(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_walras"))
        .args(args)
        .output()
        .expect("walras runs")
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("walras-cli-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

const HEADER: &str = "offer_id,account,sell,buy,amount,min_price\n";

fn assert_fails_with(args: &[&str], expected: &str) {
    let output = walras(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} succeeded");
    assert!(
        stderr.contains(expected),
        "{args:?}: stderr {stderr:?} lacks {expected:?}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
}

#[test]
fn bad_offer_files_name_the_line() {
    let cases = [
        (
            "malformed.csv",
            format!("{HEADER}1,7,0,1,100,1.5\n2,7,0\n"),
            "line 3: expected 6",
        ),
        (
            "unknown.csv",
            format!("{HEADER}1,7,0,9,100,1.5\n"),
            "line 2: buy asset 9 is unknown",
        ),
        (
            "negative.csv",
            format!("{HEADER}1,7,0,1,-5,1.5\n"),
            "line 2: amount '-5' must be positive",
        ),
        (
            "zero.csv",
            format!("{HEADER}1,7,0,1,0,1.5\n"),
            "line 2: amount '0' must be positive",
        ),
        (
            "price0.csv",
            format!("{HEADER}1,7,0,1,5,0\n"),
            "line 2: min_price '0' must be positive",
        ),
        (
            "priceneg.csv",
            format!("{HEADER}1,7,0,1,5,-2\n"),
            "line 2: min_price '-2' must be positive",
        ),
        (
            "dup.csv",
            format!("{HEADER}4,7,0,1,5,1\n4,8,1,0,5,1\n"),
            "line 3: offer_id 4 was already used on line 2",
        ),
        (
            "header.csv",
            "id,who\n1,2\n".to_string(),
            "line 1: expected header",
        ),
        (
            "binary.csv",
            format!("{HEADER}\u{0}\u{1}\u{2},,,\n"),
            "line 2",
        ),
    ];
    for (name, contents, expected) in cases {
        let path = temp_file(name, &contents);
        assert_fails_with(
            &[
                "clear",
                "--offers",
                path.to_str().unwrap(),
                "--assets",
                "3",
                "--json",
            ],
            expected,
        );
    }
}

#[test]
fn bad_arguments_are_refused() {
    let path = temp_file("ok.csv", &format!("{HEADER}1,7,0,1,100,1.5\n"));
    let file = path.to_str().unwrap();
    assert_fails_with(
        &["clear", "--offers", file, "--assets", "1", "--json"],
        "out of range",
    );
    assert_fails_with(
        &["clear", "--offers", file, "--assets", "5000", "--json"],
        "out of range",
    );
    assert_fails_with(
        &["clear", "--offers", file, "--assets", "x", "--json"],
        "not a whole number",
    );
    assert_fails_with(
        &[
            "clear",
            "--offers",
            file,
            "--assets",
            "3",
            "--epsilon",
            "1.5",
        ],
        "outside",
    );
    assert_fails_with(
        &[
            "clear",
            "--offers",
            "/nonexistent/offers.csv",
            "--assets",
            "3",
        ],
        "cannot open",
    );
    assert_fails_with(
        &["gen", "offers", "--assets", "1", "--offers", "5"],
        "out of range",
    );
    assert_fails_with(
        &[
            "gen", "offers", "--assets", "3", "--offers", "5", "--model", "nope",
        ],
        "nope",
    );
}

#[test]
fn generated_offers_clear_to_the_json_contract() {
    let generated = walras(&[
        "gen", "offers", "--assets", "6", "--offers", "3000", "--seed", "3",
    ]);
    assert!(generated.status.success());
    let path = temp_file(
        "generated.csv",
        std::str::from_utf8(&generated.stdout).unwrap(),
    );
    let fills = path.with_extension("fills.csv");
    let output = walras(&[
        "clear",
        "--offers",
        path.to_str().unwrap(),
        "--assets",
        "6",
        "--json",
        "--fills",
        fills.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for key in [
        "prices",
        "trades",
        "converged",
        "iterations",
        "epsilon",
        "mu",
        "unrealized_utility_ratio",
        "millis",
        "prepare_millis",
    ] {
        assert!(result.get(key).is_some(), "JSON lacks {key}");
    }
    let prices = result["prices"].as_array().unwrap();
    assert_eq!(prices.len(), 6);
    // Units of asset 0, as the node quotes them: asset 0 is 1 and every asset of this liquid
    // batch trades in one group with it.
    assert_eq!(prices[0], "1", "{prices:?}");
    assert!(
        prices.iter().all(|price| decimal(price) > 0.0),
        "{prices:?}"
    );
    // Conservation from the JSON alone: per asset, sold to the auctioneer covers bought from it.
    let mut balance = [0i128; 6];
    for trade in result["trades"].as_array().unwrap() {
        balance[trade["sell"].as_u64().unwrap() as usize] +=
            trade["sold"].as_u64().unwrap() as i128;
        balance[trade["buy"].as_u64().unwrap() as usize] -=
            trade["bought"].as_u64().unwrap() as i128;
    }
    assert!(balance.iter().all(|net| *net >= 0), "{balance:?}");
    let fills_text = std::fs::read_to_string(&fills).unwrap();
    assert!(fills_text.starts_with("offer_id,sold,bought\n"));
    assert!(fills_text.lines().count() > 100, "a liquid batch trades");
    // Every fill of the generated workload meets its offer's limit on the integer amounts:
    // bought · 2^144 ≥ sold · limit_raw · (2^64 − ε_raw), ε the default commission.
    let offers = walras_types::offers_csv::read_offers(
        std::io::BufReader::new(std::fs::File::open(&path).unwrap()),
        6,
    )
    .unwrap();
    let limits: std::collections::HashMap<u64, (u64, walras_types::Price)> = offers
        .iter()
        .map(|offer| (offer.id.0, (offer.amount, offer.min_price)))
        .collect();
    let terms = walras_clearing::PayoutTerms::new(
        walras_types::Price::MAX_RATE,
        walras_clearing::ClearingParams::default().epsilon,
    );
    for line in fills_text.lines().skip(1) {
        let fields: Vec<u64> = line
            .split(',')
            .map(|field| field.parse().unwrap())
            .collect();
        let (id, sold, bought) = (fields[0], fields[1], fields[2]);
        let (amount, limit) = limits[&id];
        assert!(sold <= amount, "offer {id} sold {sold} of {amount}");
        assert!(
            terms.meets_limit(limit, sold, u128::from(bought)),
            "offer {id} sold {sold} for {bought}, below its limit {limit}"
        );
    }
}

/// The failing example: valuations spread over 10^±6 give limits like 6.8e-12, which
/// were refused when the accepted range started at 1e-10. Both sides of such a pair (6.8e-12 one
/// way, 1e11 the other) now clear and trade.
#[test]
fn limits_down_to_one_e_minus_twelve_clear_in_both_directions() {
    let path = temp_file(
        "tiny.csv",
        &format!("{HEADER}1,7,0,1,1000000000000000,6.79756164e-12\n2,8,1,0,10000,1e11\n"),
    );
    let output = walras(&[
        "clear",
        "--offers",
        path.to_str().unwrap(),
        "--assets",
        "2",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let trades = result["trades"].as_array().unwrap();
    assert_eq!(trades.len(), 2, "both directions trade: {result}");
}

#[test]
fn limits_outside_the_range_are_refused_naming_it() {
    let range = walras_types::Price::LIMIT_RANGE_TEXT;
    for (name, price) in [("below.csv", "9.99e-13"), ("above.csv", "1.000001e12")] {
        let path = temp_file(name, &format!("{HEADER}1,7,0,1,5,{price}\n"));
        assert_fails_with(
            &[
                "clear",
                "--offers",
                path.to_str().unwrap(),
                "--assets",
                "2",
                "--json",
            ],
            &format!("line 2: min_price '{price}' is outside the accepted range {range}"),
        );
    }
}

/// Trigger (issue 28, items 2 and 3): `clear` normalised the largest valuation to 1 while the
/// node quotes units of asset 0, and an asset no offer named got a number that looked like a
/// price (0.1). Prices are now in units of asset 0, and an asset that did not trade with it is
/// `null`.
#[test]
fn clear_quotes_units_of_asset_zero_and_no_price_for_an_asset_nobody_traded() {
    let path = temp_file(
        "three-assets.csv",
        &format!("{HEADER}1,7,0,1,1000000,0.5\n2,8,1,0,1000000,0.5\n"),
    );
    let output = walras(&[
        "clear",
        "--offers",
        path.to_str().unwrap(),
        "--assets",
        "3",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let prices = result["prices"].as_array().unwrap();
    assert_eq!(prices[0], "1", "{result}");
    let price = decimal(&prices[1]);
    assert!((0.5..=2.0).contains(&price), "both limits at 0.5: {result}");
    assert!(prices[2].is_null(), "nobody offered asset 2: {result}");
}

/// A price as `walras clear --json` gives it: a decimal string (issue 28, point 3: no price as
/// a JSON number).
fn decimal(price: &serde_json::Value) -> f64 {
    let text = price
        .as_str()
        .unwrap_or_else(|| panic!("{price} is not a decimal string"));
    text.parse()
        .unwrap_or_else(|_| panic!("{text} is not a decimal"))
}
