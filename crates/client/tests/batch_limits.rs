//! What the client does with a batch the node cannot take: an answer, never a panic.

use walras_client::{ClientError, NodeApi};
use walras_testkit::{payment, runtime, InProcessNode};

/// Trigger: `NodeApi::submit_batch` asserted `batch.len() <= 65_535` (the item length prefix
/// is a u16, but the count is not encoded at all), so a caller with 70,000 transactions
/// panicked in the client instead of hearing from the node that the batch is too large.
#[test]
fn a_batch_larger_than_the_node_takes_is_refused_by_the_node_not_by_a_panic() {
    let node = InProcessNode::start();
    let batch: Vec<_> = (0..70_000u64)
        .map(|index| payment(index % 200, 1 + index / 200, 0, 0, 1))
        .collect();
    let answer = runtime().block_on(node.submit_batch(&batch));
    match answer {
        Err(ClientError::Api { status, code, .. }) => {
            assert_eq!(status, 413, "{code}");
            assert_eq!(code, "too_large");
        }
        other => panic!("expected the node's refusal, got {other:?}"),
    }
    // A batch the node takes still goes through.
    let small: Vec<_> = (0..10u64).map(|index| payment(index, 1, 0, 0, 1)).collect();
    let answer = runtime()
        .block_on(node.submit_batch(&small))
        .expect("a small batch is answered");
    assert_eq!(answer.results.len(), 10);
}
