//! What one block's edits cost the offer tries, shaped like the soak's (issue 32): 90 tries (one
//! per pair of 10 assets) of 32-byte offer keys (limit price first, within about 2% of 1.0), and
//! per trie and block 14 deletions and 18 insertions, then `clean` and `root_hash` on one
//! thread each, as the node's apply phase does per pair. Prints the median time per block, and
//! of each part (each part's own median).
//!
//! `cargo run --release -p walras-trie --example offer_tries -- [KEYS_PER_TRIE] [BLOCKS]`
//! (defaults 10000 60)
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::time::Instant;
use walras_trie::Trie;

fn key(rng: &mut SplitMix64) -> [u8; 32] {
    // price near 1.0 (2^64 fixed point), spread ~2%
    let spread = (rng.next_u64() % 40_000) as i64 - 20_000; // ±2% in 1e-6 steps
    let price: u128 =
        ((1u128 << 64) as i128 + ((1i128 << 64) / 1_000_000) * spread as i128) as u128;
    let mut k = [0u8; 32];
    k[..16].copy_from_slice(&price.to_be_bytes());
    k[16..24].copy_from_slice(&(1 + rng.next_u64() % 10_000).to_be_bytes());
    k[24..].copy_from_slice(&rng.next_u64().to_be_bytes());
    k
}

/// Blocks run before timing starts.
const WARM_UP_BLOCKS: usize = 5;
const TRIES: usize = 90;

/// `count` new keys for one trie, remembered in `keys` (so later blocks can delete them).
fn new_entries(
    rng: &mut SplitMix64,
    keys: &mut Vec<[u8; 32]>,
    count: usize,
    value: u8,
) -> Vec<([u8; 32], [u8; 8])> {
    (0..count)
        .map(|_| {
            let k = key(rng);
            keys.push(k);
            (k, [value; 8])
        })
        .collect()
}

fn argument(at: usize, default: usize) -> usize {
    std::env::args()
        .nth(at)
        .map(|text| {
            text.parse()
                .unwrap_or_else(|_| panic!("argument {at}: {text:?} is not a count"))
        })
        .unwrap_or(default)
}

fn main() {
    let per = argument(1, 10_000);
    let blocks = argument(2, 60).max(WARM_UP_BLOCKS + 1);
    let mut rng = SplitMix64::seed_from_u64(5);
    let mut tries: Vec<Trie<32, [u8; 8]>> = (0..TRIES).map(|_| Trie::new()).collect();
    let mut keys: Vec<Vec<[u8; 32]>> = vec![Vec::new(); TRIES];
    for (trie, ks) in tries.iter_mut().zip(&mut keys) {
        trie.insert_batch(new_entries(&mut rng, ks, per, 1), 1);
        trie.root_hash(1);
    }
    // Per block: the whole, then deletions, insertions, clean, root hash (ms).
    let mut times: [Vec<f64>; 5] = Default::default();
    for block in 0..blocks {
        let mut phases = [0.0f64; 5];
        for (trie, ks) in tries.iter_mut().zip(&mut keys) {
            let started = Instant::now();
            for _ in 0..14 {
                let at = (rng.next_u64() as usize) % ks.len();
                let k = ks.swap_remove(at);
                trie.mark_deleted(&k);
            }
            phases[1] += elapsed_ms(started);
            let entries = new_entries(&mut rng, ks, 18, 2);
            let started = Instant::now();
            trie.insert_batch(entries, 1);
            phases[2] += elapsed_ms(started);
            let started = Instant::now();
            if trie.deleted_len() > 0 {
                trie.clean();
            }
            phases[3] += elapsed_ms(started);
            let started = Instant::now();
            trie.root_hash(1);
            phases[4] += elapsed_ms(started);
        }
        phases[0] = phases[1..].iter().sum();
        if block >= WARM_UP_BLOCKS {
            for (list, phase) in times.iter_mut().zip(phases) {
                list.push(phase);
            }
        }
    }
    let median = |list: &mut Vec<f64>| {
        list.sort_by(f64::total_cmp);
        list[list.len() / 2]
    };
    let [all, delete, insert, clean, hash] = times.each_mut().map(median);
    println!(
        "per trie {per}: median {all:.3} ms per block ({TRIES} tries, 32 edits each): \
         delete {delete:.3}, insert {insert:.3}, clean {clean:.3}, root hash {hash:.3}"
    );
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}
