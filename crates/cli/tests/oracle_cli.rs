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
