//! The signature acceptance rule (ZIP-215) in blocks: a transaction whose signature carries an
//! order-2 component in R (see `walras_crypto::testing`) is accepted, and one whose `s` is
//! non-canonical is dropped as badly signed, by the producer path (`propose`, signatures
//! verified, as the solo node runs it) for every thread count, and a follower replaying the
//! block reaches the producer's root.

use walras_crypto::testing::{sign_with_order_2_nonce, with_s_plus_group_order};
use walras_crypto::Keypair;
use walras_engine::{DropReason, EngineConfig, ExchangeState};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, Operation, SignedTransaction, Transaction};

const ACCOUNTS: u64 = 140;

fn keypair(account: u64) -> Keypair {
    let mut seed = [9u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

fn genesis() -> Genesis {
    Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: 2,
        accounts: (0..ACCOUNTS)
            .map(|id| GenesisAccount {
                id: AccountId(id),
                public_key: *keypair(id).public_key().as_bytes(),
                balances: vec![(AssetId(0), 1_000_000), (AssetId(1), 1_000_000)],
            })
            .collect(),
    }
}

fn payment(source: u64, amount: u64) -> Transaction {
    Transaction {
        source: AccountId(source),
        sequence: 1,
        operation: Operation::Payment {
            to: AccountId((source + 1) % ACCOUNTS),
            asset: AssetId(0),
            amount,
        },
    }
}

/// How a payment is signed.
#[derive(Clone, Copy, PartialEq)]
enum Signing {
    Honest,
    /// R carries the point of order 2: accepted by ZIP-215 (refused by the old strict rule).
    Order2Nonce,
    /// `s + ℓ`: refused.
    NonCanonicalS,
}

fn signed(transaction: Transaction, signing: Signing) -> SignedTransaction {
    let pair = keypair(transaction.source.0);
    let message = transaction.encode();
    let signature = match signing {
        Signing::Honest => pair.sign(&message),
        Signing::Order2Nonce => sign_with_order_2_nonce(&pair, &message),
        Signing::NonCanonicalS => with_s_plus_group_order(&pair.sign(&message)),
    };
    SignedTransaction {
        transaction,
        signature: *signature.as_bytes(),
    }
}

fn config(threads: usize) -> EngineConfig {
    EngineConfig {
        threads,
        ..EngineConfig::default()
    }
}

/// Trigger: a block of 130 payments, one of them signed with an order-2 nonce, at eight
/// positions (each position changes the block's transactions and so how a batch rule grouped
/// them). Under the first batch rule (dalek's cofactorless 128-signature batches in hash order)
/// the crafted payment was accepted about half the time. The strict rule then refused it
/// always; ZIP-215 (a deliberate change of this test's expectation) accepts it always. Beside
/// it, a payment with a non-canonical `s` is dropped as badly signed every time (it makes its
/// batch fail, so the rest of that batch is decided one by one), and a replica applying the
/// block must reach the producer's state root.
#[test]
fn a_block_with_an_order_2_signature_among_129_others_always_accepts_it() {
    let genesis = genesis();
    for variant in 0..8u64 {
        let crafted_source = 3 + variant * 17;
        let refused_source = (crafted_source + 61) % 130;
        let transactions: Vec<SignedTransaction> = (0..130)
            .map(|source| {
                let amount = 10 + variant;
                let signing = if source == crafted_source {
                    Signing::Order2Nonce
                } else if source == refused_source {
                    Signing::NonCanonicalS
                } else {
                    Signing::Honest
                };
                signed(payment(source, amount), signing)
            })
            .collect();
        for threads in 1..=4 {
            let mut producer = ExchangeState::from_genesis(&genesis, threads).unwrap();
            let (block, outcome) = producer
                .propose(transactions.clone(), &config(threads))
                .unwrap();
            assert_eq!(
                outcome.dropped,
                vec![(refused_source as u32, DropReason::BadSignature)],
                "variant {variant}, threads {threads}"
            );
            assert_eq!(outcome.accepted, 129);
            let mut replica = ExchangeState::from_genesis(&genesis, 1).unwrap();
            let replayed = replica.apply(&block, &config(5 - threads)).unwrap();
            assert_eq!(replayed.header.state_root, outcome.header.state_root);
        }
    }
}
