//! Verification throughput benchmark (criterion; was an `#[ignore]`d test):
//!
//! `cargo bench -p walras-crypto --bench verification`
//! (a quick look: `cargo bench -p walras-crypto --bench verification -- --quick`)
//!
//! Signs 10 000 distinct messages with 10 000 distinct keys, then times the acceptance rule
//! (strict verification of each signature, [`verify_each_parallel`]) on 1 and 2 threads, and,
//! for comparison only, dalek's batch verification by batch size (no longer an acceptance rule:
//! see `walras_crypto::accept`). One iteration verifies all 10 000 signatures, so criterion's
//! `time` is the time for 10 000 (µs per signature = time in ms / 10) and its `thrpt` is
//! verifications per second. Every iteration asserts that everything verified.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
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

fn verification_throughput(c: &mut Criterion) {
    let triples = signed_messages();
    let items: Vec<(&[u8], &PublicKey, &Signature)> = triples
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    let mut group = c.benchmark_group(format!("verify {SIGNATURES} signatures, distinct keys"));
    group.sample_size(10);
    group.throughput(Throughput::Elements(SIGNATURES as u64));
    for threads in [1, 2] {
        group.bench_with_input(
            BenchmarkId::new("acceptance rule (strict, each), threads", threads),
            &threads,
            |b, &threads| {
                b.iter(|| {
                    assert!(verify_each_parallel(black_box(&items), threads)
                        .iter()
                        .all(|&accepted| accepted));
                })
            },
        );
    }
    for batch_items in [16, 64, 128, 1024] {
        group.bench_with_input(
            BenchmarkId::new(
                "dalek batch (comparison), 1 thread, batch size",
                batch_items,
            ),
            &batch_items,
            |b, &batch_items| {
                b.iter(|| assert!(black_box(&triples).chunks(batch_items).all(dalek_batch)))
            },
        );
    }
    group.finish();
}

criterion_group!(benches, verification_throughput);
criterion_main!(benches);
