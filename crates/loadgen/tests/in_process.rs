//! The load generator against a node in the test process (`walras_testkit::InProcessNode`,
//! through `NodeApi`): the checks `walras loadgen` had as a process test, without the node and
//! loadgen processes. The command's own contract (arguments, `--json`, exit status) is still
//! checked through the binary in `crates/cli/tests/client_cli.rs`.

use std::time::Duration;
use walras_client::NodeApi;
use walras_loadgen::{run_with, LoadgenConfig};
use walras_testkit::InProcessNode;

/// Checks: at a low rate for 3 s the generator offers exactly rate × seconds, every offered
/// transaction is sent, committed transactions are exactly the accepted plus the dropped
/// ones, none is left uncommitted (the node is far from saturated), latency is positive and
/// its maximum bounds its 99th percentile, and the blocks seen are the node's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn loadgen_commits_and_reports_latency() {
    let node = InProcessNode::start();
    let mut config = LoadgenConfig::new(node.base_url(), 100.0, Duration::from_secs(3));
    config.accounts = 50;
    let report = run_with(&node, &config).await.expect("the run completes");
    let counts = &report.counts;
    assert_eq!(counts.offered, 300);
    assert_eq!(
        counts.sent
            + counts.not_sent
            + counts.skipped_window
            + counts.skipped_busy
            + counts.skipped_no_funds
            + counts.skipped_unsigned,
        counts.offered,
        "every offered transaction is sent or counted as not sent: {counts:?}"
    );
    assert!(counts.committed > 0, "{counts:?}");
    assert_eq!(counts.accepted + counts.dropped, counts.committed);
    assert_eq!(report.never_committed, 0, "{:?}", report.notes);
    assert!(counts.blocks > 0);
    assert!(counts.last_height <= node.height());
    assert!(report.latency.p50_ms > 0.0);
    assert!(report.latency.max_ms >= report.latency.p99_ms);
    assert_eq!(report.node, "in-process:");
}
