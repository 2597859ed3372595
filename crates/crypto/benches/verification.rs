//! Verification throughput benchmark (criterion; was an `#[ignore]`d test):
//!
//! `cargo bench -p walras-crypto --bench verification`
//! (a quick look: `cargo bench -p walras-crypto --bench verification -- --quick`)
//!
//! Signs 10 000 distinct messages with 10 000 distinct keys, then times: the old acceptance
//! rule (dalek's `verify_strict` of each signature, keys decompressed beforehand as the old
//! `PublicKey` kept them), the new rule (ZIP-215) checking each signature alone,
//! the new rule's batches of 64 and 256 ([`verify_chunk`]), the acceptance rule as blocks call
//! it ([`verify_each_parallel`]) on 1 and 2 threads, and, for comparison only, dalek's
//! cofactorless batch of 256 (never an acceptance rule: see `walras_crypto::accept`) and
//! ed25519-zebra's batch of 256 (the same rule, each key decompressed again per batch, as the
//! acceptance rule ran before it kept keys decoded). One
//! iteration verifies all 10 000 signatures, so criterion's `time` is the time for 10 000 (µs
//! per signature = time in ms / 10) and its `thrpt` is verifications per second. Every
//! iteration asserts that everything verified.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use walras_crypto::accept::verify_chunk;
use walras_crypto::{verify_each, verify_each_parallel, Keypair, PublicKey, Signature};

#[path = "../tests/support/zebra.rs"]
mod zebra;
use zebra::zebra_batch_accepts;

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

/// The old acceptance rule: dalek's `verify_strict` of one signature, its key decompressed
/// beforehand (as the old `PublicKey` kept it).
fn dalek_strict(((message, _, signature), key): (&Triple, &ed25519_dalek::VerifyingKey)) -> bool {
    key.verify_strict(
        message,
        &ed25519_dalek::Signature::from_bytes(signature.as_bytes()),
    )
    .is_ok()
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
    let dalek_keys: Vec<ed25519_dalek::VerifyingKey> = triples
        .iter()
        .map(|(_, key, _)| ed25519_dalek::VerifyingKey::from_bytes(key.as_bytes()).expect("a key"))
        .collect();
    group.bench_function("old rule (dalek verify_strict, each), 1 thread", |b| {
        b.iter(|| {
            assert!(black_box(&triples)
                .iter()
                .zip(&dalek_keys)
                .all(dalek_strict))
        })
    });
    group.bench_function("new rule single (ZIP-215, each), 1 thread", |b| {
        b.iter(|| assert!(verify_each(black_box(&items)).iter().all(|&ok| ok)))
    });
    for batch_items in [64, 256] {
        group.bench_with_input(
            BenchmarkId::new(
                "new rule batch (ZIP-215), 1 thread, batch size",
                batch_items,
            ),
            &batch_items,
            |b, &batch_items| {
                b.iter(|| {
                    assert!(black_box(&items)
                        .chunks(batch_items)
                        .all(|chunk| verify_chunk(chunk).iter().all(|&ok| ok)))
                })
            },
        );
    }
    for threads in [1, 2] {
        group.bench_with_input(
            BenchmarkId::new("acceptance rule (verify_each_parallel), threads", threads),
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
    group.bench_with_input(
        BenchmarkId::new(
            "ed25519-zebra batch (comparison: same rule, keys re-decoded), 1 thread, batch size",
            256,
        ),
        &256,
        |b, &batch_items| {
            b.iter(|| {
                assert!(black_box(&triples)
                    .chunks(batch_items)
                    .all(zebra_batch_accepts))
            })
        },
    );
    group.bench_with_input(
        BenchmarkId::new(
            "dalek batch (comparison, inconsistent), 1 thread, batch size",
            256,
        ),
        &256,
        |b, &batch_items| {
            b.iter(|| assert!(black_box(&triples).chunks(batch_items).all(dalek_batch)))
        },
    );
    group.finish();
}

criterion_group!(benches, verification_throughput);
criterion_main!(benches);
