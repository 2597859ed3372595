//! Verification throughput benchmark (ignored by default; run in release):
//!
//! `cargo test --release -p walras-crypto --test throughput -- --ignored --nocapture`
//!
//! Signs 10 000 distinct messages with 10 000 distinct keys, then times the acceptance rule
//! (strict verification of each signature, [`verify_each_parallel`]) on 1 and 2 threads, and,
//! for comparison only, dalek's batch verification by batch size (no longer an acceptance rule:
//! see `walras_crypto::accept`). Prints µs per signature and verifications per second per
//! configuration; asserts only that everything verified.

use std::time::Instant;
use walras_crypto::{verify_each_parallel, Keypair, PublicKey, Signature};

const SIGNATURES: usize = 10_000;

type Triple = (Vec<u8>, PublicKey, Signature);

fn signed_messages() -> Vec<Triple> {
    (0..SIGNATURES)
        .map(|index| {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(index as u64).to_le_bytes());
            let pair = Keypair::from_seed(seed);
            let message = format!("account {index} pays 100 units, sequence 1").into_bytes();
            let signature = pair.sign(&message);
            (message, pair.public_key(), signature)
        })
        .collect()
}

fn report(label: &str, verifications: usize, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{label:<48} {:>8.1} ms  {:>7.2} µs/signature  {:>9.0} verifications/s",
        seconds * 1e3,
        seconds * 1e6 / verifications as f64,
        verifications as f64 / seconds
    );
}

/// dalek's batch check of `triples`, for comparison.
fn dalek_batch(triples: &[Triple]) -> bool {
    let messages: Vec<&[u8]> = triples.iter().map(|(m, _, _)| m.as_slice()).collect();
    let signatures: Vec<ed25519_dalek::Signature> = triples
        .iter()
        .map(|(_, _, s)| ed25519_dalek::Signature::from_bytes(s.as_bytes()))
        .collect();
    let keys: Vec<ed25519_dalek::VerifyingKey> = triples
        .iter()
        .map(|(_, k, _)| ed25519_dalek::VerifyingKey::from_bytes(k.as_bytes()).expect("a key"))
        .collect();
    ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok()
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn verification_throughput() {
    let triples = signed_messages();
    let items: Vec<(&[u8], &PublicKey, &Signature)> = triples
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    println!("{SIGNATURES} signatures, distinct keys");
    for threads in [1, 2] {
        let started = Instant::now();
        assert!(verify_each_parallel(&items, threads)
            .iter()
            .all(|&accepted| accepted));
        report(
            &format!("acceptance rule (strict, each), {threads} thread(s)"),
            SIGNATURES,
            started,
        );
    }
    for batch_items in [16, 64, 128, 1024] {
        let started = Instant::now();
        assert!(triples.chunks(batch_items).all(dalek_batch));
        report(
            &format!("dalek batch of {batch_items} (comparison), 1 thread"),
            SIGNATURES,
            started,
        );
    }
}
