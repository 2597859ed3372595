//! Insertion and root-hash benchmark (criterion; was a set of `#[ignore]`d tests):
//!
//! `cargo bench -p walras-trie --bench throughput`
//! (a quick look: `cargo bench -p walras-trie --bench throughput -- --quick`; one configuration
//! alone, so the memory figure is its own as when each was its own test process:
//! `cargo bench -p walras-trie --bench throughput -- 'array values/grow_to_1m, threads/2'`;
//! the 10M-key run, about 2 GiB:
//! `WALRAS_BENCH_TEN_MILLION=1 cargo bench -p walras-trie --bench throughput -- ten_million`)
//!
//! Inserts random 8-byte keys with 32-byte values in batches of 100 000 and computes the root
//! hash after every batch (once per block), on 1 and 2 threads, with `Vec<u8>` and `[u8; 32]`
//! values. Per configuration, criterion times:
//! - `grow_to_1m`: one iteration grows a trie from empty to 1M keys in 10 batches, hashing after
//!   each (the insert and hash time only, not making the batches); after it the per-batch figures
//!   of the last iteration are printed (insert and root_hash per 100k batch: mean, median, max),
//!   with the root and the process's resident and peak memory (whole process: the peak includes
//!   every configuration run before);
//! - `insert_1m_one_batch`: the whole trie in one 1M batch;
//! - `root_hash_from_scratch_1m`: hashing that trie from nothing.
//!
//! Every configuration must reach the same root (same keys and value bytes); the bench asserts it.

use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use walras_crypto::Hash;
use walras_trie::Trie;

const BATCH_KEYS: usize = 100_000;
const BATCHES_1M: usize = 10;

/// The roots every configuration reached, to check that they agree.
static ROOTS: Mutex<Vec<(String, Hash)>> = Mutex::new(Vec::new());

/// A batch of keys from `rand_xoshiro`'s SplitMix64: a fixed, fast key stream.
fn random_batch<V>(state: &mut SplitMix64, make_value: impl Fn(u64) -> V) -> Vec<([u8; 8], V)> {
    (0..BATCH_KEYS)
        .map(|_| (state.next_u64().to_be_bytes(), make_value(state.next_u64())))
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

impl Summary {
    fn total(&self) -> Duration {
        self.insert.iter().chain(&self.hash).sum()
    }
}

/// Inserts `batches` batches, hashing after each.
fn run<V: AsRef<[u8]> + Send>(
    batches: usize,
    threads: usize,
    make_value: impl Fn(u64) -> V + Copy,
) -> (Trie<8, V>, Summary) {
    let mut state = SplitMix64::seed_from_u64(42);
    let mut trie = Trie::<8, V>::new();
    let mut summary = Summary {
        root: Hash::default(),
        insert: Vec::new(),
        hash: Vec::new(),
    };
    for _ in 0..batches {
        let batch = random_batch(&mut state, make_value);
        let started = Instant::now();
        trie.insert_batch(batch, threads);
        let inserted = Instant::now();
        summary.root = trie.root_hash(threads);
        summary.insert.push(inserted - started);
        summary.hash.push(inserted.elapsed());
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

fn million_keys<V: AsRef<[u8]> + Send + Clone>(
    c: &mut Criterion,
    label: &str,
    threads: usize,
    make_value: fn(u64) -> V,
) {
    let mut group = c.benchmark_group(format!("1M keys, {label} values"));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Elements((BATCH_KEYS * BATCHES_1M) as u64));
    let mut last = None;
    group.bench_function(BenchmarkId::new("grow_to_1m, threads", threads), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (trie, summary) = run(BATCHES_1M, threads, make_value);
                total += summary.total();
                last = Some((trie, summary));
            }
            total
        })
    });
    let Some((trie, summary)) = last else {
        return; // Filtered out.
    };
    print_summary(&format!("  {label}, {threads} thread(s)"), &summary);
    println!("  root {}", summary.root);
    let (rss, peak) = memory_mib();
    println!("  memory after 1M keys: resident {rss} MiB, peak {peak} MiB (whole process)");
    ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((format!("{label}, {threads} thread(s)"), summary.root));

    let entries: Vec<([u8; 8], V)> = trie.iter().map(|(k, v)| (*k, v.clone())).collect();
    drop(trie);
    group.bench_function(
        BenchmarkId::new("insert_1m_one_batch, threads", threads),
        |b| {
            b.iter_batched(
                || entries.clone(),
                |entries| {
                    let mut rebuilt = Trie::<8, V>::new();
                    rebuilt.insert_batch(entries, threads);
                    rebuilt
                },
                BatchSize::PerIteration,
            )
        },
    );
    group.bench_function(
        BenchmarkId::new("root_hash_from_scratch_1m, threads", threads),
        |b| {
            b.iter_batched(
                || {
                    let mut rebuilt = Trie::<8, V>::new();
                    rebuilt.insert_batch(entries.clone(), threads);
                    rebuilt
                },
                |mut rebuilt| {
                    assert_eq!(rebuilt.root_hash(threads), summary.root);
                    rebuilt
                },
                BatchSize::PerIteration,
            )
        },
    );
    group.finish();
}

fn million_keys_vec(c: &mut Criterion) {
    for threads in [1, 2] {
        million_keys(c, "Vec<u8>", threads, value_vec);
    }
}

fn million_keys_array(c: &mut Criterion) {
    for threads in [1, 2] {
        million_keys(c, "array", threads, value_array);
    }
}

/// 10M keys on 2 threads, about 2 GiB: only with `WALRAS_BENCH_TEN_MILLION=1`.
fn ten_million_keys_2_threads(c: &mut Criterion) {
    if std::env::var_os("WALRAS_BENCH_TEN_MILLION").is_none() {
        return;
    }
    let mut group = c.benchmark_group("ten_million keys, Vec<u8> values");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.throughput(Throughput::Elements((BATCH_KEYS * 100) as u64));
    let mut last = None;
    group.bench_function(BenchmarkId::new("grow_to_10m, threads", 2), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (base_rss, _) = memory_mib();
                let (trie, summary) = run(100, 2, value_vec);
                total += summary.total();
                let (rss, peak) = memory_mib();
                last = Some((trie.len(), summary, rss, rss.saturating_sub(base_rss), peak));
            }
            total
        })
    });
    group.finish();
    if let Some((keys, summary, rss, grown, peak)) = last {
        print_summary("10M keys, Vec<u8> values, 2 threads", &summary);
        println!(
            "  {keys} keys; root {}; memory resident {rss} MiB (+{grown} MiB), peak {peak} MiB",
            summary.root
        );
    }
}

/// Every configuration that ran reached the same root.
fn roots_agree(_: &mut Criterion) {
    let roots = ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((first_label, first_root)) = roots.first() {
        for (label, root) in roots.iter() {
            assert_eq!(root, first_root, "{label} and {first_label} disagree");
        }
        println!(
            "all {} configurations reached root {first_root}",
            roots.len()
        );
    }
}

criterion_group!(
    benches,
    million_keys_vec,
    million_keys_array,
    ten_million_keys_2_threads,
    roots_agree
);
criterion_main!(benches);
