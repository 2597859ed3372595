//! `docs/formats.md` is a contract for clients in other languages: its test vectors (the
//! encoding, signature and hash of fixed transactions under a fixed key), its price examples,
//! its drop-reason table and the offers CSV header are checked here against the code, so the
//! document cannot drift from what the node does.

use std::collections::BTreeMap;
use walras_crypto::Keypair;
use walras_engine::transaction_hash;
use walras_engine::DropReason;
use walras_types::offers_csv::OFFERS_HEADER;
use walras_types::{AccountId, AssetId, OfferId, Operation, Price, SignedTransaction, Transaction};

fn document() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/formats.md");
    std::fs::read_to_string(path).expect("docs/formats.md exists")
}

/// The contents of every fenced block whose info string is `kind`.
fn fenced(document: &str, kind: &str) -> Vec<String> {
    let opening = format!("```{kind}\n");
    document
        .split(&opening)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or_default().to_string())
        .collect()
}

/// `key: value` lines of one vector block.
fn fields(block: &str) -> BTreeMap<String, String> {
    block
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_string(), value.trim().to_string()))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The key of the vectors: seed bytes 0, 1, ..., 31.
fn vector_key() -> Keypair {
    Keypair::from_seed(std::array::from_fn(|index| index as u8))
}

/// The transactions of the vectors, by name, as the document describes them in words.
fn vector_transactions() -> Vec<(&'static str, Transaction)> {
    let offer = |sequence, amount, min_price: &str| Transaction {
        source: AccountId(7),
        sequence,
        operation: Operation::CreateOffer {
            sell: AssetId(0),
            buy: AssetId(1),
            amount,
            min_price: Price::parse_limit(min_price).unwrap(),
        },
    };
    vec![
        (
            "payment",
            Transaction {
                source: AccountId(7),
                sequence: 1,
                operation: Operation::Payment {
                    to: AccountId(9),
                    asset: AssetId(2),
                    amount: 1_000,
                },
            },
        ),
        ("create_offer", offer(2, 500, "0.5")),
        (
            "cancel_offer",
            Transaction {
                source: AccountId(7),
                sequence: 3,
                operation: Operation::CancelOffer {
                    sell: AssetId(0),
                    buy: AssetId(1),
                    min_price: Price::parse_limit("0.5").unwrap(),
                    offer_id: OfferId(2),
                },
            },
        ),
        ("create_offer_rounded", offer(4, 1, "1.1")),
    ]
}

#[test]
fn the_documented_vectors_are_what_the_node_encodes_signs_and_hashes() {
    let document = document();
    let blocks = fenced(&document, "vector");
    let key = vector_key();
    let expected_public = hex(key.public_key().as_bytes());
    let mut computed_text = String::new();
    let mut mismatches = Vec::new();
    let transactions = vector_transactions();
    assert_eq!(blocks.len(), transactions.len(), "one vector block each");
    for ((name, transaction), block) in transactions.into_iter().zip(&blocks) {
        let signature = *key.sign(&transaction.encode()).as_bytes();
        let signed = SignedTransaction {
            transaction,
            signature,
        };
        let computed = [
            ("name", name.to_string()),
            ("public_key", expected_public.clone()),
            ("transaction", hex(&transaction.encode())),
            ("signature", hex(&signature)),
            ("signed", hex(&signed.encode())),
            ("hash", transaction_hash(&signed).to_string()),
        ];
        for (field, value) in &computed {
            computed_text.push_str(&format!("{field}: {value}\n"));
        }
        computed_text.push('\n');
        let documented = fields(block);
        for (field, value) in &computed {
            if documented.get(*field) != Some(value) {
                mismatches.push(format!("vector {name}, field {field}"));
            }
        }
        // And the bytes decode back to the transaction.
        assert_eq!(SignedTransaction::decode(&signed.encode()).unwrap(), signed);
    }
    assert!(
        mismatches.is_empty(),
        "{mismatches:?} differ from the document; the code computes:\n{computed_text}"
    );
}

#[test]
fn the_documented_limit_prices_are_the_parser_s() {
    for block in fenced(&document(), "prices") {
        for (text, raw) in fields(&block) {
            let raw: u128 = raw.parse().unwrap();
            assert_eq!(
                Price::parse_limit(&text).unwrap().0,
                raw,
                "limit price {text}"
            );
        }
    }
}

#[test]
fn every_drop_reason_is_documented_once() {
    let document = document();
    let documented: Vec<&str> = document
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` |"))
        .map(|(name, _)| name)
        .filter(|name| DropReason::ALL.iter().any(|reason| reason.name() == *name))
        .collect();
    let names: Vec<&str> = DropReason::ALL.iter().map(|reason| reason.name()).collect();
    for name in &names {
        assert_eq!(
            documented.iter().filter(|listed| *listed == name).count(),
            1,
            "drop reason {name} in docs/formats.md's table"
        );
    }
}

#[test]
fn the_documented_offers_header_is_the_reader_s() {
    assert!(document().contains(&format!("```csv\n{OFFERS_HEADER}\n")));
}
