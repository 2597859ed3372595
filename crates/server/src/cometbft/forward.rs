//! Hands the transactions this node admitted to its CometBFT, which gossips them and orders
//! them into blocks.
//!
//! The HTTP API admits a transaction into this node's mempool exactly as in solo mode (same
//! checks, same answers). This task takes what waits there and sends it, as bundles of up to
//! [`BUNDLE_TXS`] transactions (one CometBFT transaction each, `walras_api::proposal`), in
//! JSON-RPC batches of `broadcast_tx_async`, to CometBFT's RPC; CometBFT runs CheckTx on each
//! bundle. (One CometBFT transaction per Walras transaction held a 4-validator network on
//! one 16-core machine near 7,000 tx/s: CometBFT's mempool, gossip and CheckTx round trips
//! cost per CometBFT transaction.) (Not
//! `broadcast_tx_sync`: CometBFT answers a batch's requests one after another, each waiting
//! for its CheckTx round trip to the app, which measured about 12 ms each — 878 transactions
//! took over 10 s. CheckTx repeats the admission checks this node just made against the same
//! committed state, so little is lost by not waiting for its verdict.) A transaction
//! stays pending here until its block commits; one that CometBFT refuses, or that has not
//! committed within the commit bound (plus [`IN_FLIGHT_GRACE`]: CometBFT's recheck drops it
//! from its own mempool once it cannot make the bound, see `app`), is forgotten (counted in
//! `walras_forward_refused_total`), so its source may use the sequence number again.

use crate::node::Shared;
use base64::Engine as _;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use walras_api::proposal;
use walras_crypto::Hash;
use walras_types::SignedTransaction;

/// Beyond the commit bound, how long a forwarded transaction may stay uncommitted before it is
/// forgotten (a block being decided when the bound passed may still commit it). It was 30 s
/// flat: under overload, forwarded transactions CometBFT never committed held the mempool's
/// room for 30 s each.
pub(super) const IN_FLIGHT_GRACE: Duration = Duration::from_secs(1);
/// How often an idle forwarder looks at the mempool.
const IDLE_POLL: Duration = Duration::from_millis(5);
/// Bundles in one JSON-RPC request at most: 16 x 256 = 4,096 transactions a round trip.
const BUNDLES_PER_REQUEST_MAX: usize = 16;
/// Pause after CometBFT's RPC failed, before trying again.
const RPC_RETRY: Duration = Duration::from_millis(200);
/// Transactions in one bundle: large enough that CometBFT's per-transaction costs vanish
/// (a bundle of offers is about 40 KB), small enough that a peer's CheckTx of one bundle
/// (a signature each, on its threads) stays well under a millisecond per thread.
pub(super) const BUNDLE_TXS: usize = 256;

/// Where and how to forward.
#[derive(Clone, Debug)]
pub(super) struct ForwardConfig {
    /// `http://host:port` of CometBFT's RPC.
    pub rpc_url: String,
    /// Requests (bundles) in one JSON-RPC batch (CometBFT's `rpc.max_request_batch_size`).
    pub batch_max: usize,
}

/// Forwards until the node shuts down.
pub(super) async fn run(shared: Arc<Shared>, config: ForwardConfig) {
    let client = reqwest::Client::new();
    let mut in_flight: VecDeque<(Instant, Hash, SignedTransaction)> = VecDeque::new();
    while !shared.is_shutting_down() {
        expire(&shared, &mut in_flight);
        let take_max = config.batch_max.clamp(1, BUNDLES_PER_REQUEST_MAX) * BUNDLE_TXS;
        let batch = shared.mempool().take(take_max);
        if batch.is_empty() {
            tokio::time::sleep(IDLE_POLL).await;
            continue;
        }
        let bundles: Vec<&[(Hash, SignedTransaction)]> = batch.chunks(BUNDLE_TXS).collect();
        match broadcast(&client, &config.rpc_url, &bundles).await {
            Ok(verdicts) => {
                let now = Instant::now();
                for (bundle, accepted) in bundles.iter().zip(verdicts) {
                    for (hash, signed) in bundle.iter() {
                        if accepted {
                            in_flight.push_back((now, *hash, *signed));
                        } else {
                            refuse(&shared, hash, signed);
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(
                    "CometBFT's RPC at {} failed ({error}); {} transactions refused",
                    config.rpc_url,
                    batch.len()
                );
                for (hash, signed) in &batch {
                    refuse(&shared, hash, signed);
                }
                tokio::time::sleep(RPC_RETRY).await;
            }
        }
    }
}

fn refuse(shared: &Shared, hash: &Hash, signed: &SignedTransaction) {
    shared.mempool().forget(hash, signed);
    shared.metrics.forward_refused_total.inc();
}

/// Drops committed transactions from the front of `in_flight` and forgets those too old.
fn expire(shared: &Shared, in_flight: &mut VecDeque<(Instant, Hash, SignedTransaction)>) {
    let now = Instant::now();
    let in_flight_max = shared.overload().commit_bound + IN_FLIGHT_GRACE;
    while let Some((sent, hash, signed)) = in_flight.front() {
        let pending = shared.mempool().contains(hash);
        if pending && now.duration_since(*sent) < in_flight_max {
            break;
        }
        if pending {
            refuse(shared, hash, signed);
        }
        in_flight.pop_front();
    }
}

/// The CometBFT transaction carrying `bundle`: the transaction itself when it is alone (what
/// a client would send), else a bundle entry.
fn entry(bundle: &[(Hash, SignedTransaction)]) -> Vec<u8> {
    match bundle {
        [(_, signed)] => signed.encode(),
        _ => {
            let transactions: Vec<SignedTransaction> =
                bundle.iter().map(|(_, signed)| *signed).collect();
            proposal::encode_bundle(&transactions).to_vec()
        }
    }
}

/// Sends one JSON-RPC batch of `broadcast_tx_async`, one request per bundle; per bundle,
/// whether CometBFT took it.
async fn broadcast(
    client: &reqwest::Client,
    rpc_url: &str,
    bundles: &[&[(Hash, SignedTransaction)]],
) -> Result<Vec<bool>, String> {
    let requests: Vec<serde_json::Value> = bundles
        .iter()
        .enumerate()
        .map(|(id, bundle)| {
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": "broadcast_tx_async",
                "params": { "tx": base64::engine::general_purpose::STANDARD.encode(entry(bundle)) },
            })
        })
        .collect();
    let response = client
        .post(rpc_url)
        .json(&requests)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|error| error.to_string())?;
    let status = response.status();
    let body: serde_json::Value = response
        .json()
        .await
        .map_err(|error| format!("HTTP {status}, unreadable answer: {error}"))?;
    verdicts(&body, bundles.len())
}

/// Reads a batch answer: a bundle was taken when its answer has `result.code` 0. CometBFT
/// answers a batch of one request with a bare object, not an array of one.
fn verdicts(body: &serde_json::Value, count: usize) -> Result<Vec<bool>, String> {
    let one = std::slice::from_ref(body);
    let answers = match body {
        serde_json::Value::Array(answers) => answers.as_slice(),
        serde_json::Value::Object(_) if count == 1 => one,
        _ => return Err(format!("expected a JSON-RPC batch answer, got {body}")),
    };
    let mut taken = vec![false; count];
    for answer in answers {
        let Some(id) = answer["id"].as_u64().map(|id| id as usize) else {
            continue;
        };
        if id < count {
            taken[id] = answer["result"]["code"].as_u64() == Some(0);
        }
    }
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_with_code_zero_count_as_taken() {
        let body = serde_json::json!([
            {"jsonrpc": "2.0", "id": 0, "result": {"code": 0, "hash": "AA"}},
            {"jsonrpc": "2.0", "id": 2, "result": {"code": 4, "log": "replayed"}},
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "mempool is full"}},
            {"jsonrpc": "2.0", "id": 99, "result": {"code": 0}},
        ]);
        assert_eq!(verdicts(&body, 3), Ok(vec![true, false, false]));
        assert!(verdicts(&serde_json::json!({"error": "x"}), 2).is_err());
        assert!(verdicts(&serde_json::json!("x"), 1).is_err());
    }

    /// Trigger: CometBFT answers a JSON-RPC batch of one request with a bare object; the
    /// forwarder took that for a failed RPC, forgot the transactions CometBFT had taken (their
    /// senders saw them expire although they committed) and paused 200 ms. With bundles most
    /// batches below saturation hold one request.
    #[test]
    fn a_batch_of_one_answered_with_a_bare_object_is_read_as_its_answer() {
        let taken =
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {"code": 0, "hash": "AA"}});
        assert_eq!(verdicts(&taken, 1), Ok(vec![true]));
        let refused = serde_json::json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": "mempool is full"}});
        assert_eq!(verdicts(&refused, 1), Ok(vec![false]));
    }
}
