//! The `walras sim dbo` contract: one JSON object with `fairness` and `latency_us`
//! {`mean`,`p50`,`p99`,`p999`,`max`}; DBO is exactly fair where direct delivery is not, on the
//! same seed; a bad scheme is a clear error with a non-zero exit.

use std::process::Command;
use walras_testkit::walras_bin;

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(walras_bin())
        .args(["sim", "dbo"])
        .args(args)
        .output()
        .expect("walras runs")
}

fn report(scheme: &str) -> serde_json::Value {
    let output = sim(&[
        "--scheme",
        scheme,
        "--participants",
        "10",
        "--seconds",
        "0.05",
        "--seed",
        "3",
        "--json",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn dbo_is_exactly_fair_where_direct_delivery_is_not_and_the_json_has_the_contract_fields() {
    let dbo = report("dbo");
    let direct = report("direct");
    assert_eq!(dbo["fairness"], 1.0, "{dbo}");
    assert!(
        direct["fairness"].as_f64().is_some_and(|f| f < 1.0),
        "{direct}"
    );
    for key in ["mean", "p50", "p99", "p999", "max"] {
        assert!(dbo["latency_us"][key].as_f64().is_some(), "{key} in {dbo}");
    }
    assert!(
        dbo["latency_us"]["mean"].as_f64() > direct["latency_us"]["mean"].as_f64(),
        "fairness costs latency"
    );
}

#[test]
fn an_unknown_scheme_is_refused_with_a_message() {
    let output = sim(&["--scheme", "fastest", "--json"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--scheme fastest"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
