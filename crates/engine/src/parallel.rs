//! The two ways work is spread over threads: plain scoped OS threads, no pool, no spinning.

/// Runs `work` on each item, each on its own thread when `threads > 1`; results in item order.
pub fn run_each<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    work: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 {
        return items.into_iter().map(work).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| scope.spawn(|| work(item)))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("worker thread panicked"))
            .collect()
    })
}

/// `map` over `items` in order, split into `threads` contiguous pieces.
pub fn map_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    map: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 1024 {
        return items.iter().map(&map).collect();
    }
    let pieces: Vec<&[T]> = items.chunks(items.len().div_ceil(threads)).collect();
    run_each(pieces, threads, |piece| {
        piece.iter().map(&map).collect::<Vec<R>>()
    })
    .into_iter()
    .flatten()
    .collect()
}
