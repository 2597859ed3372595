//! A signature whose R carries the point of order 2 (`walras_crypto::testing`) through every
//! way a client submits to a solo node (its router driven in process: the same routes, codecs,
//! admission and producer as over a socket): accepted and committed each time (ZIP-215), a copy
//! with a non-canonical `s` refused with `bad_signature` each time, the valid transactions
//! beside them committed, and the node restarted on its data directory (its store recovered in
//! a fresh node) comes up at the same height and state root.

use std::time::Duration;
use walras_client::{ApiMethod, ApiRequest, NodeApi};
use walras_crypto::testing::{sign_with_order_2_nonce, with_s_plus_group_order};
use walras_crypto::Signature;
use walras_testkit::in_process::process_like_config;
use walras_testkit::{dev_key, payment, runtime, InProcessNode, TempDir};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

/// Valid payments in each batch beside the crafted one: one past the old 128-signature chunk.
const BATCH_VALID: u64 = 128;
const BATCHES: u64 = 6;

fn crafted_payment(source: u64, sequence: u64, to: u64, asset: u16) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation: Operation::Payment {
            to: AccountId(to),
            asset: AssetId(asset),
            amount: 1,
        },
    };
    let signature = sign_with_order_2_nonce(&dev_key(source), &transaction.encode());
    SignedTransaction {
        transaction,
        signature: *signature.as_bytes(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn payment_json(signed: &SignedTransaction) -> serde_json::Value {
    let Operation::Payment { to, asset, amount } = signed.transaction.operation else {
        panic!("a payment");
    };
    serde_json::json!({
        "source": signed.transaction.source.0,
        "sequence": signed.transaction.sequence,
        "operation": {"type": "payment", "to": to.0, "asset": asset.0, "amount": amount},
        "signature": hex(&signed.signature),
    })
}

/// (status, JSON body) of one request to the node.
async fn call(
    node: &InProcessNode,
    path: &str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let request = ApiRequest {
        method: if content_type.is_some() {
            ApiMethod::Post
        } else {
            ApiMethod::Get
        },
        path: path.to_string(),
        content_type,
        body: body.into(),
        what: path.to_string(),
    };
    let answer = node.exchange(request).await.expect("the node answers");
    let json = serde_json::from_slice(&answer.body).unwrap_or(serde_json::Value::Null);
    (answer.status, json)
}

async fn get(node: &InProcessNode, path: &str) -> (u16, serde_json::Value) {
    call(node, path, None, Vec::new()).await
}

async fn post(
    node: &InProcessNode,
    path: &str,
    content_type: &'static str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    call(node, path, Some(content_type), body).await
}

/// The first asset `account` holds.
async fn first_held_asset(node: &InProcessNode, account: u64) -> u16 {
    let (status, body) = get(node, &format!("/v1/accounts/{account}")).await;
    assert_eq!(status, 200, "{body}");
    body["balances"][0]["asset"].as_u64().expect("a held asset") as u16
}

/// The transaction's status once it is no longer pending (10 s at most).
async fn wait_committed(node: &InProcessNode, hash: &str) -> serde_json::Value {
    for _ in 0..200 {
        let (status, body) = get(node, &format!("/v1/transactions/{hash}")).await;
        assert_eq!(status, 200, "{body}");
        if body["status"] != "pending" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("transaction {hash} still pending after 10 s");
}

/// (height, state root) as `/v1/status` reports them.
async fn tip(node: &InProcessNode) -> (u64, String) {
    let (_, status) = get(node, "/v1/status").await;
    (
        status["height"].as_u64().unwrap(),
        status["state_root"].as_str().unwrap().to_string(),
    )
}

/// Trigger: the crafted payment sent alone as JSON and as binary, then inside six batch
/// submissions of 130 (128 valid payments, the crafted one at a different position each time,
/// and after it a copy whose `s` is non-canonical). Under the first batch rule (dalek's
/// cofactorless 128-signature batches at admission, none in the solo producer, hash-ordered
/// batches at recovery) a batch admitted it about half the time, the block committed it,
/// recovery dropped it, and the node refused to restart ("stored block … does not replay").
/// The strict rule then refused it every time; ZIP-215 accepts it every time (a deliberate
/// change of this test's expectation) and refuses every non-canonical `s`. Either way the
/// point stands: every path reaches the same verdict, and the restart reaches the same root.
#[test]
fn an_order_2_signature_gets_one_verdict_on_every_submission_path_and_the_node_restarts_at_the_same_root(
) {
    let dir = TempDir::new("order-2-signature");
    let config = process_like_config(dir.path());
    let node = InProcessNode::start_with(&config, None).expect("the in-process node starts");
    let before_restart = runtime().block_on(async {
        let mut assets = Vec::new();
        for account in 0..=BATCH_VALID {
            assets.push(first_held_asset(&node, account).await);
        }
        let crafted_source = BATCH_VALID;
        let crafted_asset = assets[crafted_source as usize];
        let submit = "/v1/transactions";
        let mut committed_hashes = Vec::new();
        // Sequences 1 and 2 alone: as JSON, then as binary; each refused with `s + ℓ` first.
        for (sequence, content_type) in [(1, "application/json"), (2, "application/octet-stream")] {
            let single = crafted_payment(crafted_source, sequence, 0, crafted_asset);
            let body = |signed: &SignedTransaction| match content_type {
                "application/json" => serde_json::to_vec(&payment_json(signed)).unwrap(),
                _ => signed.encode(),
            };
            let (status, answer) =
                post(&node, submit, content_type, body(&non_canonical_s(&single))).await;
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (400, Some("bad_signature")),
                "{answer}"
            );
            let (status, answer) = post(&node, submit, content_type, body(&single)).await;
            assert_eq!(status, 202, "{answer}");
            committed_hashes.push(answer["hash"].clone());
        }

        for batch_index in 0..BATCHES {
            let sequence = batch_index + 1;
            let mut batch: Vec<SignedTransaction> = (0..BATCH_VALID)
                .map(|source| {
                    let to = (source + 1) % BATCH_VALID;
                    payment(source, sequence, to, assets[source as usize], 1)
                })
                .collect();
            let position = (batch_index * 29 % (BATCH_VALID + 1)) as usize;
            let crafted = crafted_payment(crafted_source, sequence + 2, 0, crafted_asset);
            batch.insert(position, crafted);
            batch.insert(position + 1, non_canonical_s(&crafted));
            let (status, answer) = post(
                &node,
                "/v1/transactions/batch",
                "application/octet-stream",
                SignedTransaction::encode_list(&batch),
            )
            .await;
            assert_eq!(status, 200, "{answer}");
            let results = answer["results"].as_array().unwrap();
            for (index, result) in results.iter().enumerate() {
                let expected = (index == position + 1).then_some("bad_signature");
                assert_eq!(
                    result["error"]["code"].as_str(),
                    expected,
                    "batch {batch_index}, item {index}: {result}"
                );
            }
            committed_hashes.push(results[position]["hash"].clone());
            committed_hashes.push(results[(position + 2) % results.len()]["hash"].clone());
        }
        for hash in committed_hashes {
            let committed = wait_committed(&node, hash.as_str().unwrap()).await;
            assert_eq!(committed["status"], "accepted", "{committed}");
        }
        tip(&node).await
    });
    // Dropping the last handle stops the producer and closes the store.
    drop(node);
    let restarted = InProcessNode::start_with(&config, Some(dir)).expect("the node restarts");
    let after_restart = runtime().block_on(tip(&restarted));
    assert_eq!(after_restart, before_restart);
}

/// `signed` with its signature's `s` replaced by `s + ℓ`: refused by ZIP-215.
fn non_canonical_s(signed: &SignedTransaction) -> SignedTransaction {
    let signature = Signature::from_bytes(&signed.signature).unwrap();
    SignedTransaction {
        signature: *with_s_plus_group_order(&signature).as_bytes(),
        ..*signed
    }
}
