//! What `/metrics` says about a node's state: the recovered state from the first request on,
//! and the bytes it holds by part.

use std::time::{Duration, Instant};
use walras_client::NodeApi;
use walras_testkit::in_process::process_like_config;
use walras_testkit::DEV_ACCOUNTS;
use walras_testkit::{metric, payment, runtime, sign, InProcessNode, TempDir};
use walras_types::{AccountId, AssetId, Operation, Price, Transaction};

/// Waits until the node has committed `height`.
fn wait_for_height(node: &InProcessNode, height: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.height() < height {
        assert!(Instant::now() < deadline, "block {height} within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `walras_state_memory_bytes` of `part`.
fn memory_bytes(text: &str, part: &str) -> u64 {
    metric(
        text,
        &format!("walras_state_memory_bytes{{part=\"{part}\"}}"),
    )
}

/// Trigger: the state gauges (height, accounts, open offers, store file bytes) were set only
/// after each committed block, so a node restarted on a store of 10M accounts and left idle
/// reported `walras_state_accounts 0` and `walras_height 0` until the first transaction came.
/// Now recovery sets them from the recovered state before the node serves.
#[test]
fn a_restarted_idle_node_reports_the_state_it_recovered_before_any_block() {
    let data = TempDir::new("metrics-after-restart");
    let config = process_like_config(data.path());
    let node = InProcessNode::start_with(&config, None).expect("the node starts");
    runtime()
        .block_on(node.submit_batch(&[payment(1, 1, 2, 0, 5)]))
        .expect("the payment is answered");
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.height() < 1 {
        assert!(Instant::now() < deadline, "the payment's block within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let height = node.height();
    drop(node);

    let node = InProcessNode::start_with(&config, None).expect("the node restarts");
    let text = runtime()
        .block_on(node.metrics())
        .expect("the metrics are served");
    assert_eq!(node.height(), height, "no block since the restart");
    assert_eq!(metric::<u64>(&text, "walras_height"), height);
    assert_eq!(metric::<u64>(&text, "walras_state_accounts"), DEV_ACCOUNTS);
    assert!(metric::<u64>(&text, "walras_store_file_bytes") > 0);
}

/// The state's bytes by part (issue 32: memory accounted for) describe what it holds: the
/// account table at least every account at its size, the index and trie non-empty, an offer
/// resting after its block in its trie and the carried books, the signers' decoded keys, the
/// recent-transaction index and the mapped store; and a restarted node reports the recovered
/// state's parts before any block.
#[test]
fn the_state_s_memory_by_part_follows_what_it_holds_also_after_a_restart() {
    let data = TempDir::new("metrics-memory");
    let config = process_like_config(data.path());
    let node = InProcessNode::start_with(&config, None).expect("the node starts");
    let offer = sign(Transaction {
        source: AccountId(3),
        sequence: 1,
        operation: Operation::CreateOffer {
            sell: AssetId(0),
            buy: AssetId(1),
            amount: 1_000,
            min_price: Price::from_f64(1_000.0),
        },
    });
    runtime()
        .block_on(node.submit_batch(&[payment(1, 1, 2, 0, 5), offer]))
        .expect("the transactions are answered");
    wait_for_height(&node, 1);
    let text = runtime().block_on(node.metrics()).expect("the metrics");
    assert_eq!(
        metric::<u64>(&text, "walras_state_open_offers"),
        1,
        "{text}"
    );
    let account_bytes = std::mem::size_of::<walras_engine::Account>() as u64;
    assert!(memory_bytes(&text, "accounts") >= DEV_ACCOUNTS * account_bytes);
    for part in ["account_index", "account_trie", "offer_tries", "books"] {
        assert!(memory_bytes(&text, part) > 0, "{part}: {text}");
    }
    assert!(
        memory_bytes(&text, "decoded_keys") >= 2 * walras_engine::DECODED_KEY_BYTES,
        "the two signers' keys: {text}"
    );
    assert!(
        metric::<u64>(&text, "walras_recent_index_bytes") >= 2 * 32,
        "two transactions indexed by hash: {text}"
    );
    if cfg!(target_os = "linux") {
        assert!(
            metric::<u64>(&text, "walras_mapped_resident_bytes") > 0,
            "the process's file mappings are resident: {text}"
        );
    }
    let offer_tries = memory_bytes(&text, "offer_tries");
    drop(node);

    let node = InProcessNode::start_with(&config, None).expect("the node restarts");
    let text = runtime().block_on(node.metrics()).expect("the metrics");
    assert!(memory_bytes(&text, "accounts") >= DEV_ACCOUNTS * account_bytes);
    assert!(memory_bytes(&text, "account_trie") > 0);
    assert_eq!(
        memory_bytes(&text, "offer_tries"),
        offer_tries,
        "the same offer trie"
    );
}
