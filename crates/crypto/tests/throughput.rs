//! Verification throughput benchmark (ignored by default; run in release):
//!
//! `cargo test --release -p walras-crypto --test throughput -- --ignored --nocapture`
//!
//! Signs 10 000 distinct messages with 10 000 distinct keys, then times single verification and
//! the batch acceptance rule on 1 and 2 threads, and batch verification by batch size, printing
//! verifications per second. It asserts only that everything verified.

use std::time::Instant;
use walras_crypto::{
    verify, verify_batch, verify_batches_parallel, Keypair, PublicKey, Signature, BATCH_CHUNK_ITEMS,
};

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
    let per_second = verifications as f64 / seconds;
    println!(
        "{label:<44} {:>8.1} ms  {:>10.0} verifications/s",
        seconds * 1e3,
        per_second
    );
}

fn single_verify_all(triples: &[Triple]) -> bool {
    triples
        .iter()
        .all(|(message, key, signature)| verify(key, message, signature).is_ok())
}

fn single_verify_on_threads(triples: &[Triple], threads: usize) -> bool {
    let chunk = triples.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = triples
            .chunks(chunk)
            .map(|part| scope.spawn(|| single_verify_all(part)))
            .collect();
        workers
            .into_iter()
            .all(|worker| worker.join().unwrap_or(false))
    })
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn verification_throughput() {
    let triples = signed_messages();
    let items: Vec<(&[u8], &PublicKey, &Signature)> = triples
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    println!("{SIGNATURES} signatures, distinct keys, acceptance-rule chunk = {BATCH_CHUNK_ITEMS}");

    for threads in [1, 2] {
        let started = Instant::now();
        assert!(single_verify_on_threads(&triples, threads));
        report(
            &format!("single verify, {threads} thread(s)"),
            SIGNATURES,
            started,
        );
    }
    for threads in [1, 2] {
        let started = Instant::now();
        assert!(verify_batches_parallel(&items, threads)
            .iter()
            .all(|&accepted| accepted));
        report(
            &format!("batch (acceptance rule), {threads} thread(s)"),
            SIGNATURES,
            started,
        );
    }
    for batch_items in [16, 32, 64, 128, 256, 512, 1024, SIGNATURES] {
        let started = Instant::now();
        assert!(items
            .chunks(batch_items)
            .all(|chunk| verify_batch(chunk).is_ok()));
        report(
            &format!("verify_batch, batches of {batch_items}, 1 thread"),
            SIGNATURES,
            started,
        );
    }
}
