//! `walras bench warm-start`: one JSON line per (seed, drift, start), the three starts each
//! clear the same batch to convergence; a drift outside 0..=100% is refused.

use std::process::Command;
use walras_testkit::walras_bin;

#[test]
fn warm_start_clears_one_batch_from_three_starts() {
    let output = Command::new(walras_bin())
        .args([
            "bench",
            "warm-start",
            "--assets",
            "6",
            "--offers",
            "3000",
            "--seeds",
            "1",
        ])
        .args(["--drift", "1%", "--json"])
        .output()
        .expect("walras runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let runs: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let starts: Vec<&str> = runs
        .iter()
        .filter_map(|run| run["start"].as_str())
        .collect();
    assert_eq!(starts, ["cold", "previous", "oracle"]);
    assert!(runs.iter().all(|run| run["converged"] == true), "{runs:?}");
    let refused = Command::new(walras_bin())
        .args(["bench", "warm-start", "--drift", "150%"])
        .output()
        .expect("walras runs");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("150%"));
}
