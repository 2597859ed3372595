//! What `/metrics` says about a node's state: the recovered state from the first request on.

use std::time::{Duration, Instant};
use walras_client::NodeApi;
use walras_testkit::in_process::process_like_config;
use walras_testkit::DEV_ACCOUNTS;
use walras_testkit::{metric, payment, runtime, InProcessNode, TempDir};

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
