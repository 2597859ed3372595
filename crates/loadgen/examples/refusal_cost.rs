//! What a transaction the node refuses `mempool_full` costs, node and client together, per
//! transaction (issue 31: refuse early and cheaply). Under overload most of what arrives is
//! refused, and on a machine the load generator shares with the node, each refusal is CPU the
//! block producer does not get.
//!
//! Two paths, each timed over 300 requests of 1,000 payments, three rounds:
//! - partial: the mempool has room for one transaction of the batch (a duplicate of a pending
//!   one, refused `duplicate`, so the room stays one): the other 999 are decoded, hashed and
//!   answered one result each (`503 mempool_full`), and the client parses those results;
//! - whole: the mempool is full, so the request is refused before its body is decoded.
//!
//! Run: `cargo run --release -p walras-loadgen --example refusal_cost`

use std::time::{Duration, Instant};
use walras_api::wire::DevGenesisJson;
use walras_client::NodeApi;
use walras_testkit::{InProcessNode, TempDir};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

const DEV: DevGenesisJson = DevGenesisJson {
    seed: 31,
    accounts: 4_000,
    assets: 4,
};
const REQUESTS: usize = 300;
const BATCH: usize = 1_000;
const ROUNDS: usize = 3;

fn payment(source: u64) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence: 1,
        operation: Operation::Payment {
            to: AccountId((source + 1) % DEV.accounts),
            asset: AssetId(0),
            amount: 1,
        },
    };
    let key = walras_devnet::dev_keypair(&DEV, AccountId(source));
    SignedTransaction {
        transaction,
        signature: *key.sign(&transaction.encode()).as_bytes(),
    }
}

/// Microseconds per refused transaction of `REQUESTS` submissions of `batch`, each of which
/// must admit nothing (`whole`: be refused as a request).
async fn per_refused_us(node: &InProcessNode, batch: &[SignedTransaction], whole: bool) -> f64 {
    let started = Instant::now();
    for _ in 0..REQUESTS {
        match node.submit_batch(batch).await {
            Ok(answer) if !whole => assert_eq!(answer.admitted, 0),
            Err(_) if whole => {}
            other => panic!("unexpected answer: {other:?}"),
        }
    }
    started.elapsed().as_secs_f64() * 1e6 / (REQUESTS * batch.len()) as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data = TempDir::new("refusal-cost");
    let mut config = walras_testkit::dev_node_config(data.path(), DEV);
    // No block is ever cut: the mempool stays as the example fills it.
    config.block_interval = Duration::from_secs(3_600);
    config.max_block_txs = 100_000;
    config.mempool_capacity = BATCH;
    let node = InProcessNode::start_with(&config, Some(data)).expect("the node starts");
    let pending: Vec<SignedTransaction> = (0..BATCH as u64 - 1).map(payment).collect();
    let admitted = node
        .submit_batch(&pending)
        .await
        .expect("admitted")
        .admitted;
    assert_eq!(admitted as usize, BATCH - 1);
    // One duplicate (the room of one goes to it, and it is refused), then 999 that do not fit.
    let mut batch = vec![pending[0]];
    batch.extend((BATCH as u64 - 1..2 * BATCH as u64 - 2).map(payment));
    let mut partial = Vec::new();
    for _ in 0..ROUNDS {
        partial.push(per_refused_us(&node, &batch, false).await);
    }
    let last = node.submit_batch(&[payment(2 * BATCH as u64)]).await;
    assert_eq!(
        last.expect("admitted").admitted,
        1,
        "the mempool is now full"
    );
    let mut whole = Vec::new();
    for _ in 0..ROUNDS {
        whole.push(per_refused_us(&node, &batch, true).await);
    }
    println!("cargo run --release -p walras-loadgen --example refusal_cost");
    println!(
        "refused in a batch with room for one: {:.2} us per transaction (median of {ROUNDS}: {partial:.2?})",
        median(partial.clone())
    );
    println!(
        "refused as a whole request (mempool full): {:.3} us per transaction (median of {ROUNDS}: {whole:.3?})",
        median(whole.clone())
    );
}
