//! The acceptance rule's batch check over decoded keys against ed25519-zebra's batch (the same
//! equation, each key decompressed again per batch), in alternating rounds so that both see
//! the same machine: on a shared machine a criterion group runs one after the other and the
//! load between them decides the comparison.
//!
//! `cargo bench -p walras-crypto --bench batch_ab`
//!
//! 5,120 signatures by as many keys, in batches of 256, 15 rounds of each; prints µs per
//! signature (median and fastest round of each) and the median of the per-round ratios.
//! Every round asserts that everything verified.

use std::time::Instant;
use walras_crypto::accept::verify_chunk;
use walras_crypto::{sign, Keypair, PublicKey, Signature};

#[path = "../tests/support/zebra.rs"]
mod zebra;
use zebra::zebra_batch_accepts;

const SIGNATURES: usize = 256 * 20;
const BATCH_ITEMS: usize = 256;
const ROUNDS: usize = 15;

fn signed() -> Vec<(Vec<u8>, PublicKey, Signature)> {
    (0..SIGNATURES)
        .map(|index| {
            let mut seed = [9u8; 32];
            seed[..4].copy_from_slice(&(index as u32).to_le_bytes());
            let pair = Keypair::from_seed(seed);
            let message = format!("transfer {index}").into_bytes();
            let signature = sign(&pair, &message);
            (message, pair.public_key(), signature)
        })
        .collect()
}

/// µs per signature of one round of `run`.
fn timed(run: impl FnOnce() -> bool) -> f64 {
    let started = Instant::now();
    assert!(run(), "every signature verifies");
    started.elapsed().as_secs_f64() * 1e6 / SIGNATURES as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let triples = signed();
    let items: Vec<(&[u8], &PublicKey, &Signature)> = triples
        .iter()
        .map(|(message, key, signature)| (message.as_slice(), key, signature))
        .collect();
    let mut own = Vec::new();
    let mut zebra = Vec::new();
    let mut ratios = Vec::new();
    for _ in 0..ROUNDS {
        let own_us = timed(|| {
            items
                .chunks(BATCH_ITEMS)
                .all(|chunk| verify_chunk(chunk).iter().all(|&ok| ok))
        });
        let zebra_us = timed(|| triples.chunks(BATCH_ITEMS).all(zebra_batch_accepts));
        own.push(own_us);
        zebra.push(zebra_us);
        ratios.push(own_us / zebra_us);
    }
    let fastest = |values: &[f64]| values.iter().copied().fold(f64::INFINITY, f64::min);
    println!("cargo bench -p walras-crypto --bench batch_ab");
    println!(
        "µs per signature, batches of {BATCH_ITEMS}, {SIGNATURES} signatures, {ROUNDS} alternating rounds"
    );
    println!(
        "  acceptance rule (keys decoded):     median {:.2}, fastest {:.2}",
        median(&mut own.clone()),
        fastest(&own)
    );
    println!(
        "  ed25519-zebra batch (keys as bytes): median {:.2}, fastest {:.2}",
        median(&mut zebra.clone()),
        fastest(&zebra)
    );
    println!("  median ratio (rule / zebra): {:.3}", median(&mut ratios));
}
