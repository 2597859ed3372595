//! The oracle's command-line contract: `walras oracle value` gives the paper's worked example
//! (bid 1@10, 4@9 | ask 3@11, 3@12: mid 10.5, weighted mid 10.25, depth VWAP at depth 5, step 1
//! = 10.29333…); `walras gen feed` then `walras oracle replay --json` gives the same digest
//! and prices with 1 and 2 threads, with 1% injected faults; bad input is a clear error.

use std::process::{Command, Output};
use walras_testkit::{walras_bin, TempDir};

fn walras(args: &[&str]) -> Output {
    Command::new(walras_bin())
        .args(args)
        .output()
        .expect("walras runs")
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn oracle_value_reproduces_the_papers_worked_example() {
    let book = ["--bids", "10:1,9:4", "--asks", "11:3,12:3"];
    let depth = json(&walras(
        &[
            &["oracle", "value"],
            &book[..],
            &["--method", "depth-vwap", "--depth", "5", "--step", "1"],
        ]
        .concat(),
    ));
    let price = depth["price"].as_f64().expect("a price");
    assert!((price - 10.293_333_333_333_333).abs() < 1e-9, "{depth}");
    assert_eq!(depth["mid"], 10.5);
    assert_eq!(depth["weighted_mid"], 10.25);
}

#[test]
fn a_replayed_faulty_feed_gives_the_same_digest_for_one_and_two_threads() {
    let dir = TempDir::new("oracle-feed");
    let feed = dir.path().join("feed.jsonl");
    let feed = feed.to_str().expect("a UTF-8 path");
    let generated = walras(&[
        "gen",
        "feed",
        "--venues",
        "5",
        "--assets",
        "3",
        "--seconds",
        "3",
        "--seed",
        "4",
        "--faults",
        "0.01",
        "--out",
        feed,
    ]);
    assert!(
        generated.status.success(),
        "{}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let one = json(&walras(&[
        "oracle",
        "replay",
        feed,
        "--threads",
        "1",
        "--json",
    ]));
    let two = json(&walras(&[
        "oracle",
        "replay",
        feed,
        "--threads",
        "2",
        "--json",
    ]));
    assert_eq!(one["digest"], two["digest"]);
    assert_eq!(one["prices"], two["prices"]);
    assert_eq!(one["books"]["unhealthy_books_used"], 0, "{}", one["books"]);
    assert!(one["prices"]
        .as_array()
        .is_some_and(|prices| prices.len() >= 3));
}

#[test]
fn bad_books_and_methods_are_refused_with_a_message() {
    for args in [
        &["oracle", "value", "--bids", "10:1", "--asks", "11:x"][..],
        &[
            "oracle", "value", "--bids", "10:1", "--asks", "11:1", "--method", "median",
        ][..],
        &[
            "oracle",
            "value",
            "--bids",
            "10:1",
            "--asks",
            "11:1",
            "--method",
            "depth-vwap",
        ][..],
    ] {
        let output = walras(args);
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Trigger (issue 28 item 8): generated feeds carried random prices for real tickers (BTC at
/// 62.59) while a development chain's prices come from its offers, so every oracle band check
/// fired. `walras gen feed --prices` sets the feed's prices (a chain's, from `walras query
/// prices`), and the oracle values each asset there; the assets left out start at their
/// seeded prices, as without `--prices`.
#[test]
fn a_feed_generated_with_given_prices_is_valued_at_them() {
    let dir = TempDir::new("oracle-feed-prices");
    let replayed = |name: &str, prices: Option<&str>| {
        let feed = dir.path().join(name);
        let feed = feed.to_str().expect("a UTF-8 path");
        let mut args = vec!["gen", "feed", "--venues", "3", "--assets", "3"];
        args.extend(["--seconds", "3", "--seed", "5", "--out", feed]);
        if let Some(prices) = prices {
            args.extend(["--prices", prices]);
        }
        let generated = walras(&args);
        assert!(
            generated.status.success(),
            "{}",
            String::from_utf8_lossy(&generated.stderr)
        );
        let report = json(&walras(&["oracle", "replay", feed, "--json"]));
        let price = |asset: &str| -> f64 {
            let prices = report["prices"].as_array().expect("prices");
            let found = prices.iter().find(|price| price["asset"] == asset);
            found
                .and_then(|price| price["price"].as_f64())
                .expect(asset)
        };
        [price("BTC"), price("ETH"), price("LINK")]
    };
    let given = replayed("given.jsonl", Some("62000,3000"));
    let seeded = replayed("seeded.jsonl", None);
    for (valued, wanted) in [(given[0], 62_000.0), (given[1], 3_000.0)] {
        assert!(
            (valued / wanted - 1.0).abs() < 0.01,
            "valued at {valued}, given {wanted}"
        );
    }
    // The same starting price; the books drawn around the given ones differ, so its walk does.
    assert!(
        (given[2] / seeded[2] - 1.0).abs() < 0.01,
        "an asset not given keeps its seeded price: {} vs {}",
        given[2],
        seeded[2]
    );
    let refused = walras(&["gen", "feed", "--prices", "1,-2", "--out", "/dev/null"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a positive price"));
}
