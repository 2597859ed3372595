//! Insertion and root-hash benchmark (ignored by default; run in release):
//!
//! `cargo test --release -p walras-trie --test throughput -- --ignored --nocapture --exact NAME`
//!
//! Inserts random 8-byte keys with 32-byte values in batches of 100 000 and computes the root
//! hash after every batch (once per block), on 1 and 2 threads; prints per-batch times, a
//! from-scratch hash of the whole trie, and the process's resident memory. Each configuration is
//! its own test, to be run in its own process (`--exact NAME`) so memory figures are its own:
//! `million_keys_{1_thread,2_threads}` (`Vec<u8>` values), `million_keys_array_values_*`
//! (`[u8; 32]` values), `ten_million_keys_2_threads`. Each prints its root; all must agree.

mod common;

use common::splitmix64;
use std::time::{Duration, Instant};
use walras_crypto::Hash;
use walras_trie::Trie;

const BATCH_KEYS: usize = 100_000;

fn random_batch<V>(state: &mut u64, make_value: impl Fn(u64) -> V) -> Vec<([u8; 8], V)> {
    (0..BATCH_KEYS)
        .map(|_| {
            (
                splitmix64(state).to_be_bytes(),
                make_value(splitmix64(state)),
            )
        })
        .collect()
}

fn value_vec(seed: u64) -> Vec<u8> {
    seed.to_le_bytes().repeat(4)
}

fn value_array(seed: u64) -> [u8; 32] {
    let mut value = [0u8; 32];
    value
        .chunks_mut(8)
        .for_each(|chunk| chunk.copy_from_slice(&seed.to_le_bytes()));
    value
}

/// Resident and peak resident memory of this process, in MiB.
fn memory_mib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

struct Summary {
    root: Hash,
    insert: Vec<Duration>,
    hash: Vec<Duration>,
}

/// Inserts `batches` batches, hashing after each; prints every batch when `verbose`.
fn run<V: AsRef<[u8]> + Send>(
    batches: usize,
    threads: usize,
    make_value: impl Fn(u64) -> V + Copy,
    verbose: bool,
) -> (Trie<8, V>, Summary) {
    let mut state = 42;
    let mut trie = Trie::<8, V>::new();
    let mut summary = Summary {
        root: Hash::default(),
        insert: Vec::new(),
        hash: Vec::new(),
    };
    for batch_index in 0..batches {
        let batch = random_batch(&mut state, make_value);
        let started = Instant::now();
        trie.insert_batch(batch, threads);
        let inserted = Instant::now();
        summary.root = trie.root_hash(threads);
        let (insert, hash) = (inserted - started, inserted.elapsed());
        if verbose {
            println!(
                "  batch {batch_index:>3}: {:>9} keys  insert {:>7.1} ms  root_hash {:>7.1} ms",
                trie.len(),
                ms(insert),
                ms(hash)
            );
        }
        summary.insert.push(insert);
        summary.hash.push(hash);
    }
    (trie, summary)
}

fn print_summary(label: &str, summary: &Summary) {
    let stats = |times: &[Duration]| {
        let mut sorted: Vec<f64> = times.iter().map(|t| ms(*t)).collect();
        sorted.sort_by(f64::total_cmp);
        let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
        format!(
            "mean {mean:.1} ms, median {:.1}, max {:.1}",
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1]
        )
    };
    println!(
        "{label}: insert per 100k batch {}; root_hash per batch {}",
        stats(&summary.insert),
        stats(&summary.hash)
    );
}

/// Time to hash the whole trie from nothing: rebuild it in one batch, then hash.
fn full_hash_ms<V: AsRef<[u8]> + Send + Clone>(trie: &Trie<8, V>, threads: usize) -> (f64, f64) {
    let entries: Vec<([u8; 8], V)> = trie.iter().map(|(k, v)| (*k, v.clone())).collect();
    let mut rebuilt = Trie::<8, V>::new();
    let started = Instant::now();
    rebuilt.insert_batch(entries, threads);
    let built = Instant::now();
    rebuilt.root_hash(threads);
    (ms(built - started), ms(built.elapsed()))
}

fn million_keys<V: AsRef<[u8]> + Send + Clone>(
    label: &str,
    threads: usize,
    make_value: fn(u64) -> V,
) {
    println!("1M keys, {label} values, {threads} thread(s):");
    let (trie, summary) = run(10, threads, make_value, true);
    print_summary(&format!("  {threads} thread(s)"), &summary);
    println!("  root {}", summary.root);
    let (rss, peak) = memory_mib();
    println!("  memory after 1M keys: resident {rss} MiB, peak {peak} MiB (whole process)");
    let (build, hash) = full_hash_ms(&trie, threads);
    println!(
        "  whole trie in one 1M batch: insert {build:.1} ms, root_hash from scratch {hash:.1} ms"
    );
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture --exact"]
fn million_keys_1_thread() {
    million_keys("Vec<u8>", 1, value_vec);
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture --exact"]
fn million_keys_2_threads() {
    million_keys("Vec<u8>", 2, value_vec);
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture --exact"]
fn million_keys_array_values_1_thread() {
    million_keys("[u8; 32]", 1, value_array);
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture --exact"]
fn million_keys_array_values_2_threads() {
    million_keys("[u8; 32]", 2, value_array);
}

#[test]
#[ignore = "benchmark: 10M keys, about 2 GiB; run alone in release"]
fn ten_million_keys_2_threads() {
    let (base_rss, _) = memory_mib();
    let started = Instant::now();
    let (trie, summary) = run(100, 2, value_vec, false);
    print_summary("10M keys, Vec<u8> values, 2 threads", &summary);
    let (rss, peak) = memory_mib();
    println!(
        "  total {:.1} s; {} keys; root {}; memory resident {rss} MiB (+{} MiB), peak {peak} MiB",
        started.elapsed().as_secs_f64(),
        trie.len(),
        summary.root,
        rss - base_rss
    );
}
