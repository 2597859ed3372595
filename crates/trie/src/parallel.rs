//! Splitting subtree work across threads (`walras-par` pools).
//!
//! Work is always a list of tasks over disjoint subtrees (children of one branch, in key order),
//! each with a weight (batch entries or leaves below). Tasks are cut into contiguous groups of
//! similar weight, one thread per group, and a group that holds most of the work gets most of
//! the thread budget so it can split again one level down. Results keep task order, so the
//! outcome never depends on how work was split.

/// Below this total weight, threads cost more than they save.
pub(crate) const PARALLEL_WEIGHT_MIN: u64 = 256;

/// Runs every task, on up to `threads` threads; `run` gets a task and the thread budget it may
/// use for nested splitting. Results are in task order.
pub(crate) fn run_weighted<T, R, W, F>(tasks: Vec<T>, threads: usize, weight: W, run: F) -> Vec<R>
where
    T: Send,
    R: Send,
    W: Fn(&T) -> u64,
    F: Fn(T, usize) -> R + Sync,
{
    if threads <= 1 {
        return tasks.into_iter().map(|task| run(task, 1)).collect();
    }
    let weights: Vec<u64> = tasks.iter().map(&weight).collect();
    let total: u64 = weights.iter().sum();
    let busy_tasks = weights.iter().filter(|&&w| w > 0).count();
    if total < PARALLEL_WEIGHT_MIN || busy_tasks <= 1 {
        // Zero or one task has real work: let it have every thread for its own split.
        return tasks
            .into_iter()
            .zip(&weights)
            .map(|(task, &w)| run(task, budget(w, total, threads)))
            .collect();
    }
    let groups = group_contiguously(tasks, &weights, threads.min(busy_tasks));
    let run = &run;
    let per_group: Vec<Vec<R>> = walras_par::run_each(groups, threads, |(group, group_weight)| {
        run_group(group, budget(group_weight, total, threads), run)
    });
    per_group.into_iter().flatten().collect()
}

/// Threads for work of weight `part` out of `total`: a proportional share, at least one.
fn budget(part: u64, total: u64, threads: usize) -> usize {
    if total == 0 {
        return 1;
    }
    let share = (threads as u128 * u128::from(part) / u128::from(total)) as usize;
    share.max(1)
}

fn run_group<T, R>(group: Vec<T>, threads: usize, run: &impl Fn(T, usize) -> R) -> Vec<R> {
    group.into_iter().map(|task| run(task, threads)).collect()
}

/// Cuts `tasks` into at most `group_count` contiguous, non-empty groups of similar weight: a task
/// goes to the group its weight's midpoint falls in. Returns (group, group weight).
fn group_contiguously<T>(tasks: Vec<T>, weights: &[u64], group_count: usize) -> Vec<(Vec<T>, u64)> {
    let total: u64 = weights.iter().sum();
    let mut groups: Vec<(Vec<T>, u64)> = Vec::with_capacity(group_count);
    let mut weight_before = 0u64;
    let mut current_group = usize::MAX;
    for (task, &w) in tasks.into_iter().zip(weights) {
        let midpoint = u128::from(weight_before) * 2 + u128::from(w);
        let group = (midpoint * group_count as u128 / (2 * u128::from(total).max(1))) as usize;
        let group = group.min(group_count - 1);
        if group != current_group || groups.is_empty() {
            groups.push((Vec::new(), 0));
            current_group = group;
        }
        if let Some((members, group_weight)) = groups.last_mut() {
            members.push(task);
            *group_weight += w;
        }
        weight_before += w;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_task_order_for_any_thread_count() {
        let tasks: Vec<u64> = (0..40).map(|i| (i * 37) % 101).collect();
        let expected: Vec<u64> = tasks.iter().map(|t| t * 2).collect();
        for threads in [1, 2, 3, 8] {
            let doubled = run_weighted(tasks.clone(), threads, |t| *t * 100, |t, _| t * 2);
            assert_eq!(doubled, expected);
        }
    }

    #[test]
    fn groups_are_contiguous_and_balanced() {
        let weights = [10, 10, 10, 10, 0, 0, 40];
        let groups = group_contiguously((0..7).collect(), &weights, 2);
        let members: Vec<Vec<i32>> = groups.iter().map(|(g, _)| g.clone()).collect();
        assert_eq!(members, vec![vec![0, 1, 2, 3], vec![4, 5, 6]]);
        assert_eq!(budget(90, 100, 2), 1);
        assert_eq!(budget(90, 100, 4), 3);
    }
}
