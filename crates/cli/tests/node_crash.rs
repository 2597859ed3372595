//! Crash test: a node under load is killed with SIGKILL at random instants and restarted on
//! the same data directory. Every (height, state root) the node ever reported through
//! `/v1/status` must be served again with the same state root after every restart; at the
//! end, no transaction was applied twice (accepted (source, sequence) pairs are unique across
//! the whole chain) and every block re-executes (the restart's recovery checks each root).
//! The load is open loop: batches of payments every 20 ms, whatever the node does.

use std::collections::BTreeMap;
use std::time::Duration;
use walras_sim::Rng;
use walras_testkit::*;

const LOAD_ACCOUNTS: u64 = 40;

/// Records every (height, state root) the node reports, checking it never changes its mind.
async fn watch(client: &reqwest::Client, url: &str, reported: &mut BTreeMap<u64, String>) {
    loop {
        if let Ok(response) = client.get(format!("{url}/v1/status")).send().await {
            if let Ok(status) = response.json::<serde_json::Value>().await {
                let height = status["height"].as_u64().unwrap();
                let root = status["state_root"].as_str().unwrap().to_string();
                let known = reported.entry(height).or_insert_with(|| root.clone());
                assert_eq!(
                    *known, root,
                    "height {height} reported with two state roots"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every reported block is served with its reported state root.
async fn check_reported(client: &reqwest::Client, url: &str, reported: &BTreeMap<u64, String>) {
    for (height, root) in reported.iter().filter(|(height, _)| **height > 0) {
        let (status, block) = get(client, &format!("{url}/v1/blocks/{height}")).await;
        assert_eq!(status, 200, "reported block {height} lost after a crash");
        assert_eq!(
            block["state_root"].as_str(),
            Some(root.as_str()),
            "block {height}"
        );
    }
}

fn crash_rounds(kills: u32, seed: u64) {
    let dir = TempDir::new("crash");
    let mut rng = Rng::new(seed);
    let mut reported: BTreeMap<u64, String> = BTreeMap::new();
    for round in 0..kills {
        let node = NodeProcess::start(dir.path(), &["--rate-limit-rps", "0"]);
        let url = node.url.clone();
        let run_ms = 200 + rng.below(1_000);
        let mut load_rng = Rng::with_stream(seed, u64::from(round) + 1);
        runtime().block_on(async {
            let client = reqwest::Client::new();
            check_reported(&client, &url, &reported).await;
            tokio::select! {
                _ = load_payments(&client, &url, &mut load_rng, PaymentLoad { accounts: LOAD_ACCOUNTS, per_batch: 8, every_ms: 20 }) => {},
                _ = watch(&client, &url, &mut reported) => {},
                _ = tokio::time::sleep(Duration::from_millis(run_ms)) => {},
            }
        });
        node.sigkill();
    }
    let node = NodeProcess::start(dir.path(), &[]);
    let accepted = runtime().block_on(async {
        let client = reqwest::Client::new();
        check_reported(&client, &node.url, &reported).await;
        check_no_double_apply(&client, &node.url).await
    });
    let last = *reported.keys().last().unwrap();
    assert!(
        last >= u64::from(kills),
        "the node made progress: height {last} after {kills} kills"
    );
    assert!(accepted > 0);
    eprintln!(
        "{kills} kills: {} heights reported, last {last}, {accepted} transactions accepted",
        reported.len()
    );
}

#[test]
fn reported_blocks_survive_sigkill_under_load_3_times() {
    crash_rounds(3, 7);
}

#[test]
#[ignore = "slow: 20 kills; run with --ignored"]
fn reported_blocks_survive_sigkill_under_load_20_times() {
    crash_rounds(20, 11);
}
