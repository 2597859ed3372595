//! Fork-join work for every crate that takes a `threads` count: rayon pools of exactly that
//! many threads, built once per count and kept, so that a block's phases do not spawn OS
//! threads per item. Every function returns results in input order, so what is computed never
//! depends on the thread count or on scheduling (the determinism invariant).
//!
//! The contract on `threads`: 0 and 1 run on the calling thread; `n > 1` runs on a pool of
//! exactly `n` threads (asserted), never more.
//!
//! Beside them, [`prefetch`]: the cache hints the engine's memory-bound loops use to overlap
//! their misses, in one place for every crate (a hint changes no result).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod prefetch;

use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

pub use rayon::ThreadPool;

/// The most threads a pool may have: more than any machine this runs on has cores.
pub const THREADS_MAX: usize = 1024;

/// The pool of exactly `threads` threads (clamped to [`THREADS_MAX`]), built on first use.
///
/// # Panics
/// If the operating system refuses to start the pool's threads (out of resources).
pub fn pool(threads: usize) -> Arc<ThreadPool> {
    static POOLS: Mutex<BTreeMap<usize, Arc<ThreadPool>>> = Mutex::new(BTreeMap::new());
    let threads = threads.clamp(1, THREADS_MAX);
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let pool = pools.entry(threads).or_insert_with(|| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |index| format!("walras-{threads}-{index}"))
            .build()
            .unwrap_or_else(|error| panic!("cannot start {threads} worker threads: {error}"));
        Arc::new(pool)
    });
    assert_eq!(
        pool.current_num_threads(),
        threads,
        "a pool has exactly its threads"
    );
    Arc::clone(pool)
}

/// `items.iter().map(map)` on up to `threads` threads, in item order. Lists shorter than
/// `serial_below` run on the calling thread (threads cost more than they save there).
pub fn map_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    serial_below: usize,
    map: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    let pool = (threads > 1).then(|| pool(threads));
    map_in_order_on(pool.as_deref(), items, serial_below, map)
}

/// `items.into_iter().map(map)` on up to `threads` threads, in item order; the result's pages
/// are first written by the threads that fill them. Lists shorter than `serial_below` run on
/// the calling thread.
pub fn map_owned_in_order<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    serial_below: usize,
    map: impl Fn(T) -> R + Sync + Send,
) -> Vec<R> {
    if threads <= 1 || items.len() < serial_below.max(2) {
        return items.into_iter().map(map).collect();
    }
    pool(threads).install(|| items.into_par_iter().map(map).collect())
}

/// `(0..len).map(make)` on up to `threads` threads, in index order (as
/// [`map_owned_in_order`]).
pub fn tabulate<R: Send>(
    len: usize,
    threads: usize,
    serial_below: usize,
    make: impl Fn(usize) -> R + Sync + Send,
) -> Vec<R> {
    if threads <= 1 || len < serial_below.max(2) {
        return (0..len).map(make).collect();
    }
    pool(threads).install(|| (0..len).into_par_iter().map(make).collect())
}

/// [`map_in_order`] on a pool the caller lends (`None`, or a pool of one thread: the calling
/// thread).
pub fn map_in_order_on<T: Sync, R: Send>(
    pool: Option<&ThreadPool>,
    items: &[T],
    serial_below: usize,
    map: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    let threads = pool.map_or(1, ThreadPool::current_num_threads);
    let pool = match pool {
        Some(pool) if threads > 1 && items.len() >= serial_below.max(2) => pool,
        _ => return items.iter().map(map).collect(),
    };
    let piece_len = items.len().div_ceil(threads * 4).max(1);
    let results: Vec<R> =
        pool.install(|| items.par_iter().with_min_len(piece_len).map(map).collect());
    assert_eq!(results.len(), items.len());
    results
}

/// `work` on each item of `items`, mutably, with its partner in `with` (of the same length), on
/// `pool` (`None`, or a pool of one thread: the calling thread), results in item order. Lists
/// shorter than `serial_below` run on the calling thread.
///
/// # Panics
/// If `items` and `with` differ in length.
pub fn map_mut_in_order_on<T: Send, U: Sync, R: Send>(
    pool: Option<&ThreadPool>,
    items: &mut [T],
    with: &[U],
    serial_below: usize,
    work: impl Fn(&mut T, &U) -> R + Sync + Send,
) -> Vec<R> {
    assert_eq!(items.len(), with.len(), "one partner per item");
    let threads = pool.map_or(1, ThreadPool::current_num_threads);
    let pool = match pool {
        Some(pool) if threads > 1 && items.len() >= serial_below.max(2) => pool,
        _ => {
            return items
                .iter_mut()
                .zip(with)
                .map(|(item, partner)| work(item, partner))
                .collect()
        }
    };
    let count = items.len();
    let piece_len = count.div_ceil(threads * 4).max(1);
    let results: Vec<R> = pool.install(|| {
        items
            .par_iter_mut()
            .zip(with.par_iter())
            .with_min_len(piece_len)
            .map(|(item, partner)| work(item, partner))
            .collect()
    });
    assert_eq!(results.len(), count);
    results
}

/// `work` on each of `items` on `pool` (`None`, or a pool of one thread: the calling thread),
/// results in item order.
pub fn run_each_on<T: Send, R: Send>(
    pool: Option<&ThreadPool>,
    items: Vec<T>,
    work: impl Fn(T) -> R + Sync + Send,
) -> Vec<R> {
    match pool {
        Some(pool) if pool.current_num_threads() > 1 && items.len() > 1 => {
            let count = items.len();
            let results: Vec<R> = pool.install(|| items.into_par_iter().map(work).collect());
            assert_eq!(results.len(), count);
            results
        }
        _ => items.into_iter().map(work).collect(),
    }
}

/// `work` on each item, the items spread over up to `threads` threads, results in item order.
pub fn run_each<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> R + Sync + Send,
) -> Vec<R> {
    let pool = (threads > 1).then(|| pool(threads));
    run_each_on(pool.as_deref(), items, work)
}

/// `work` on each mutable piece, the pieces spread over up to `threads` threads.
pub fn for_each_mut<T: Send>(
    pieces: Vec<&mut [T]>,
    threads: usize,
    work: impl Fn(&mut [T]) + Sync + Send,
) {
    if threads <= 1 || pieces.len() <= 1 {
        pieces.into_iter().for_each(work);
        return;
    }
    pool(threads).install(|| pieces.into_par_iter().for_each(work));
}

/// A vector of `len` values made by `make`, written on up to `threads` threads: a large
/// vector's pages are first touched (and zeroed by the kernel) by the thread that writes them,
/// so building it on one thread before filling it in parallel pays every page fault serially
/// (at 10M accounts that was most of a restart's serial time).
pub fn filled<T: Send>(len: usize, threads: usize, make: impl Fn() -> T + Sync + Send) -> Vec<T> {
    let values = tabulate(len, threads, 2, |_| make());
    assert_eq!(values.len(), len);
    values
}

/// Sorts `items` on up to `threads` threads (rayon's parallel unstable sort; short lists on
/// the calling thread). The result is the sorted list whatever the thread count: elements that
/// compare equal end in some order, so use it where equal elements are indistinguishable.
pub fn sort_unstable<T: Ord + Send>(items: &mut [T], threads: usize, serial_below: usize) {
    if threads <= 1 || items.len() < serial_below.max(2) {
        items.sort_unstable();
        return;
    }
    pool(threads).install(|| items.par_sort_unstable());
}

/// Sorts `items` by `key` on up to `threads` threads, stably (rayon's parallel merge sort;
/// short lists on the calling thread): elements with equal keys keep their order, so the result
/// is the same whatever the thread count.
pub fn sort_stable_by_key<T: Send, K: Ord>(
    items: &mut [T],
    threads: usize,
    serial_below: usize,
    key: impl Fn(&T) -> K + Sync + Send,
) {
    if threads <= 1 || items.len() < serial_below.max(2) {
        items.sort_by_key(key);
        return;
    }
    pool(threads).install(|| items.par_sort_by_key(key));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_maps_and_tables_keep_index_order_for_any_thread_count() {
        let items: Vec<u64> = (0..20_000).collect();
        for threads in [0, 1, 2, 3, 8] {
            let mapped = map_owned_in_order(items.clone(), threads, 16, |x| x * 3);
            assert_eq!(mapped, items.iter().map(|x| x * 3).collect::<Vec<_>>());
            assert_eq!(tabulate(items.len(), threads, 16, |i| i as u64), items);
        }
    }

    #[test]
    fn a_parallel_stable_sort_keeps_equal_keys_in_order_for_any_thread_count() {
        let items: Vec<(u64, usize)> = (0..50_000usize)
            .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000, i))
            .collect();
        let mut serial = items.clone();
        serial.sort_by_key(|item| item.0);
        for threads in [0, 1, 2, 3, 8] {
            let mut sorted = items.clone();
            sort_stable_by_key(&mut sorted, threads, 16, |item| item.0);
            assert_eq!(sorted, serial, "{threads} threads");
        }
    }

    #[test]
    fn a_parallel_sort_gives_the_serial_sort_for_any_thread_count() {
        let items: Vec<u64> = (0..50_000u64)
            .map(|x| x.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000)
            .collect();
        let mut serial = items.clone();
        serial.sort_unstable();
        for threads in [0, 1, 2, 3, 8] {
            let mut sorted = items.clone();
            sort_unstable(&mut sorted, threads, 16);
            assert_eq!(sorted, serial, "{threads} threads");
        }
    }

    #[test]
    fn results_keep_input_order_for_any_thread_count() {
        let items: Vec<u64> = (0..10_000).collect();
        let serial: Vec<u64> = items.iter().map(|x| x * x).collect();
        for threads in [0, 1, 2, 3, 8] {
            assert_eq!(map_in_order(&items, threads, 16, |x| x * x), serial);
            assert_eq!(run_each(items.clone(), threads, |x| x * x), serial);
            let lent = pool(threads.max(1));
            assert_eq!(map_in_order_on(Some(&lent), &items, 16, |x| x * x), serial);
            assert_eq!(run_each_on(Some(&lent), items.clone(), |x| x * x), serial);
            assert_eq!(filled(1_000, threads, || 7u64), vec![7u64; 1_000]);
            let mut mutated = items.clone();
            let partners: Vec<u64> = items.iter().map(|x| x + 1).collect();
            let sums = map_mut_in_order_on(Some(&lent), &mut mutated, &partners, 16, |x, p| {
                *x *= *x;
                *x + p
            });
            assert_eq!(mutated, serial, "{threads} threads");
            let expected: Vec<u64> = serial.iter().zip(&partners).map(|(x, p)| x + p).collect();
            assert_eq!(sums, expected, "{threads} threads");
        }
    }

    #[test]
    fn a_pool_has_exactly_the_threads_asked_for() {
        for threads in [1, 2, 5] {
            let pool = pool(threads);
            assert_eq!(pool.current_num_threads(), threads);
            let seen = pool.install(|| {
                (0..1000)
                    .into_par_iter()
                    .map(|_| rayon::current_thread_index().unwrap_or(usize::MAX))
                    .collect::<std::collections::BTreeSet<usize>>()
            });
            assert!(seen.iter().all(|index| *index < threads), "{seen:?}");
        }
        assert!(Arc::ptr_eq(&pool(3), &pool(3)), "pools are kept");
    }

    #[test]
    fn every_mutable_piece_is_worked_on_once() {
        let mut data = vec![1u32; 1000];
        let pieces: Vec<&mut [u32]> = data.chunks_mut(7).collect();
        for_each_mut(pieces, 4, |piece| piece.iter_mut().for_each(|x| *x += 1));
        assert!(data.iter().all(|x| *x == 2));
    }
}
