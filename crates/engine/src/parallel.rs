//! How the engine spreads work over threads: `walras-par`'s exactly-sized rayon pools, results
//! in input order.

/// `work` on each item, spread over up to `threads` threads; results in item order.
pub(crate) use walras_par::run_each;

/// Sorts `items` on up to `threads` threads (serial below 4,096 items). Only for lists whose
/// elements compare equal only when identical (whole tuples, distinct keys): the result is
/// then the one sorted list whatever the thread count.
pub(crate) fn sort_unstable<T: Ord + Send>(items: &mut [T], threads: usize) {
    walras_par::sort_unstable(items, threads, 4_096);
}

/// `map` over `items` in order on up to `threads` threads (serial below 1,024 items).
pub(crate) fn map_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    map: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    walras_par::map_in_order(items, threads, 1024, map)
}
