//! Batch insertion.
//!
//! A batch is sorted by key (last entry wins for a repeated key, as with one-by-one inserts),
//! then merged into the trie top-down. At each node the sorted batch splits, by the key nibble
//! where the node branches, into runs that belong to disjoint subtrees; each run is merged into
//! the existing child or built into a fresh local subtree. Those per-child tasks are independent,
//! so they run on separate threads (see [`crate::parallel`]); results are reassembled in nibble
//! order. The trie's shape is a function of its key set alone, so any split gives the same trie.

use crate::nibble::{bitmap_nibbles, child_position, common_prefix_nibbles, nibble, truncated};
use crate::node::{Branch, Node};
use crate::parallel::run_weighted;
use crate::value::Value;

/// A batch entry waiting to become a leaf. The value is moved out when the leaf is made.
pub(crate) struct Pending<const KEY_BYTES: usize, V: Value> {
    pub key: [u8; KEY_BYTES],
    pub value: Option<V>,
}

/// Sorts `batch` by key, keeping for each key only the entry that came last.
///
/// In place and stably (on up to `threads` threads), then one pass into the pending list: a
/// batch of every account of a 10M-account state is 400 MB, and each extra copy of it (the
/// buckets this once went through, and their regrowth) was fresh memory a restart paid for in
/// page faults.
pub(crate) fn sort_batch<const KEY_BYTES: usize, V: Value + Send>(
    mut batch: Vec<([u8; KEY_BYTES], V)>,
    threads: usize,
) -> Vec<Pending<KEY_BYTES, V>> {
    walras_par::sort_stable_by_key(&mut batch, threads, SORT_SERIAL_BELOW, |entry| entry.0);
    let pending = |(key, value)| Pending {
        key,
        value: Some(value),
    };
    if batch.windows(2).all(|pair| pair[0].0 != pair[1].0) {
        // No key repeats (every account of a state): each entry is its own leaf, converted on
        // all threads.
        return walras_par::map_owned_in_order(batch, threads, SORT_SERIAL_BELOW, pending);
    }
    let mut unique: Vec<Pending<KEY_BYTES, V>> = Vec::with_capacity(batch.len());
    for (key, value) in batch {
        match unique.last_mut() {
            // The stable sort kept input order among equal keys: a later entry overrides.
            Some(last) if last.key == key => last.value = Some(value),
            _ => unique.push(pending((key, value))),
        }
    }
    unique
}

/// The leaves of [`crate::Trie::from_sorted_pieces`], in key order: each piece made and its
/// leaves allocated on the thread that writes them into their places, then checked for
/// strictly ascending keys (within pieces there, across their seams here). A slot is 16 bytes
/// (`Option<Node>`), against 41 and more for a pending entry: at 10M accounts the list of
/// pending entries was 0.4 GB of memory touched once.
pub(crate) fn leaves_from_sorted_pieces<const KEY_BYTES: usize, V: Value + Send>(
    len: usize,
    piece_len: usize,
    threads: usize,
    make_piece: impl Fn(std::ops::Range<usize>) -> Vec<([u8; KEY_BYTES], V)> + Sync + Send,
) -> Vec<Option<Node<KEY_BYTES, V>>> {
    assert!(piece_len > 0, "pieces of at least one entry");
    let mut leaves = walras_par::filled(len, threads, || None);
    let places: Vec<(usize, &mut [Option<Node<KEY_BYTES, V>>])> =
        leaves.chunks_mut(piece_len).enumerate().collect();
    walras_par::run_each(places, threads, |(index, place)| {
        let start = index * piece_len;
        let entries = make_piece(start..start + place.len());
        assert_eq!(
            entries.len(),
            place.len(),
            "piece {index} made {} entries for {} indexes",
            entries.len(),
            place.len()
        );
        assert!(
            entries.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "piece {index}: keys not strictly ascending"
        );
        for (slot, (key, value)) in place.iter_mut().zip(entries) {
            *slot = Some(Node::new_leaf(key, value));
        }
    });
    let seams_ascend = leaves
        .chunks(piece_len)
        .zip(leaves.chunks(piece_len).skip(1))
        .all(|(before, after)| placed_key(&before[before.len() - 1]) < placed_key(&after[0]));
    assert!(seams_ascend, "keys not strictly ascending across pieces");
    leaves
}

/// The key of a placed leaf.
fn placed_key<const KEY_BYTES: usize, V: Value>(
    slot: &Option<Node<KEY_BYTES, V>>,
) -> &[u8; KEY_BYTES] {
    slot.as_ref().expect("every slot holds its leaf").path()
}

/// A fresh subtree over `leaves` (leaf nodes in strictly ascending key order, non-empty), each
/// moved in: the branches [`build`] makes over the same keys.
pub(crate) fn build_over_leaves<const KEY_BYTES: usize, V: Value + Send>(
    leaves: &mut [Option<Node<KEY_BYTES, V>>],
    threads: usize,
) -> Node<KEY_BYTES, V> {
    if let [single] = leaves {
        return single
            .take()
            .expect("each leaf is moved into the trie once");
    }
    let (first, last) = (
        placed_key(&leaves[0]),
        placed_key(&leaves[leaves.len() - 1]),
    );
    let depth = common_prefix_nibbles(first, last);
    let prefix = truncated(first, depth);
    let mut runs = Vec::with_capacity(16);
    let mut rest = leaves;
    while let Some((_, run_len)) = first_run_by(rest, depth, placed_key) {
        let (run, tail) = std::mem::take(&mut rest).split_at_mut(run_len);
        runs.push(run);
        rest = tail;
    }
    let weight = |run: &&mut [Option<Node<KEY_BYTES, V>>]| run.len() as u64;
    let children = run_weighted(runs, threads, weight, |run, budget| {
        build_over_leaves(run, budget)
    });
    Node::new_branch(prefix, depth, children)
}

/// Batches shorter than this sort on the calling thread (a block's few hundred keys).
const SORT_SERIAL_BELOW: usize = 8_192;

/// Merges `batch` (sorted, unique keys) into the subtree `existing`; `None` stands for an
/// empty subtree. Returns `None` only when both are empty.
pub(crate) fn merge<const KEY_BYTES: usize, V: Value + Send>(
    existing: Option<Node<KEY_BYTES, V>>,
    batch: &mut [Pending<KEY_BYTES, V>],
    threads: usize,
) -> Option<Node<KEY_BYTES, V>> {
    if batch.is_empty() {
        return existing;
    }
    Some(match existing {
        None => build(batch, threads),
        Some(node) => merge_into(node, batch, threads),
    })
}

/// A fresh subtree holding exactly `batch` (non-empty).
fn build<const KEY_BYTES: usize, V: Value + Send>(
    batch: &mut [Pending<KEY_BYTES, V>],
    threads: usize,
) -> Node<KEY_BYTES, V> {
    if let [single] = batch {
        return leaf_from(single);
    }
    let depth = common_prefix_nibbles(&batch[0].key, &batch[batch.len() - 1].key);
    let prefix = truncated(&batch[0].key, depth);
    let tasks = join_tasks(std::iter::empty(), split_by_nibble(batch, depth));
    Node::new_branch(prefix, depth, run_tasks(tasks, threads))
}

fn merge_into<const KEY_BYTES: usize, V: Value + Send>(
    node: Node<KEY_BYTES, V>,
    batch: &mut [Pending<KEY_BYTES, V>],
    threads: usize,
) -> Node<KEY_BYTES, V> {
    let (first, last) = (&batch[0].key, &batch[batch.len() - 1].key);
    let node_depth = node.depth();
    let depth = node_depth
        .min(common_prefix_nibbles(node.path(), first))
        .min(common_prefix_nibbles(first, last));
    if depth == node_depth {
        return match node {
            // The batch is this one key (keys are unique): the new value replaces the old,
            // reviving the key if it was marked deleted.
            Node::Leaf(_) => leaf_from(&mut batch[0]),
            Node::Branch(branch) => merge_children(branch, batch, threads),
        };
    }
    // The node's path and the batch part ways at `depth`: a new branch there holds both.
    let prefix = truncated(first, depth);
    let node_nibble = nibble(node.path(), depth);
    let tasks = join_tasks(
        std::iter::once((node_nibble, node)),
        split_by_nibble(batch, depth),
    );
    Node::new_branch(prefix, depth, run_tasks(tasks, threads))
}

/// Merges `batch` (all keys under `branch`'s prefix) into the branch's children.
fn merge_children<const KEY_BYTES: usize, V: Value + Send>(
    mut branch: Box<Branch<KEY_BYTES, V>>,
    batch: &mut [Pending<KEY_BYTES, V>],
    threads: usize,
) -> Node<KEY_BYTES, V> {
    let depth = usize::from(branch.depth);
    if threads <= 1 {
        merge_children_in_place(&mut branch, batch, depth);
        return Node::Branch(branch);
    }
    // Reuse the children's allocation for the merged children: this runs for every branch a
    // batch touches.
    let mut children = std::mem::take(&mut branch.children);
    let existing = bitmap_nibbles(branch.bitmap).zip(children.drain(..));
    let tasks = join_tasks(existing, split_by_nibble(batch, depth));
    children.extend(run_tasks(tasks, threads));
    branch.children = children;
    branch.recount();
    *branch.dirty.get_mut() = true;
    Node::Branch(branch)
}

/// [`merge_children`] on one thread: each run of the batch is merged into its child where the
/// child sits, or its new subtree inserted in nibble order. No task list and no new vector of
/// children: a block's batches are small (tens of offers per pair), so for most branches they
/// touch this is all the work, and the general path's three vectors per branch were most of it.
/// The trie is the same (its shape is a function of its keys).
///
/// The branch's counters change by what the merged children's changed: a recount would read
/// every child, and at a million open offers most of a branch's children are out of cache
/// while a block's batch touches one or two of them.
fn merge_children_in_place<const KEY_BYTES: usize, V: Value + Send>(
    branch: &mut Branch<KEY_BYTES, V>,
    batch: &mut [Pending<KEY_BYTES, V>],
    depth: usize,
) {
    // Ask for every child a run goes to before merging the first: their misses overlap.
    let mut rest: &[Pending<KEY_BYTES, V>] = batch;
    while let Some((run_nibble, run_len)) = first_run(rest, depth) {
        if branch.bitmap & (1 << run_nibble) != 0 {
            branch.children[child_position(branch.bitmap, run_nibble)].prefetch();
        }
        rest = &rest[run_len..];
    }
    for (run_nibble, run) in runs_by_nibble(batch, depth) {
        let at = child_position(branch.bitmap, run_nibble);
        let existing = (branch.bitmap & (1 << run_nibble) != 0).then(|| branch.children.remove(at));
        let (leaves_before, branches_before, deleted_before) =
            existing.as_ref().map_or((0, 0, 0), |child| {
                (child.leaves(), child.branches(), child.deleted())
            });
        let merged = merge(existing, run, 1).expect("a non-empty run makes a subtree");
        branch.leaves = branch.leaves - leaves_before + merged.leaves();
        branch.branches = branch.branches - branches_before + merged.branches();
        let deleted = branch.deleted.get_mut();
        *deleted = *deleted - deleted_before + merged.deleted();
        branch.children.insert(at, merged);
        branch.bitmap |= 1 << run_nibble;
    }
    *branch.dirty.get_mut() = true;
    debug_assert!(
        counts_match_children(branch),
        "a branch's counters differ from its children's after a merge"
    );
}

/// Whether `branch`'s bitmap and counters are what [`Branch::recount`] makes of its children
/// (the postcondition of every change that keeps them incrementally).
fn counts_match_children<const KEY_BYTES: usize, V: Value>(branch: &Branch<KEY_BYTES, V>) -> bool {
    let depth = usize::from(branch.depth);
    let bitmap = branch
        .children
        .iter()
        .fold(0u16, |bits, child| bits | 1 << nibble(child.path(), depth));
    let leaves: u64 = branch.children.iter().map(Node::leaves).sum();
    let branches: u64 = 1 + branch.children.iter().map(Node::branches).sum::<u64>();
    let deleted: u64 = branch.children.iter().map(Node::deleted).sum();
    bitmap == branch.bitmap
        && leaves == branch.leaves
        && branches == branch.branches
        && deleted == branch.deleted.load(std::sync::atomic::Ordering::Relaxed)
}

fn leaf_from<const KEY_BYTES: usize, V: Value>(
    entry: &mut Pending<KEY_BYTES, V>,
) -> Node<KEY_BYTES, V> {
    // Each entry reaches exactly one leaf position, so its value is still there.
    let value = entry
        .value
        .take()
        .expect("each batch entry becomes exactly one leaf");
    Node::new_leaf(entry.key, value)
}

/// Merging work for one child slot: an existing child, new entries, or both.
struct Task<'a, const KEY_BYTES: usize, V: Value> {
    existing: Option<Node<KEY_BYTES, V>>,
    batch: &'a mut [Pending<KEY_BYTES, V>],
}

/// Pairs existing children and batch runs by nibble, in nibble order.
fn join_tasks<'a, const KEY_BYTES: usize, V: Value>(
    existing: impl Iterator<Item = (u8, Node<KEY_BYTES, V>)>,
    runs: Vec<(u8, &'a mut [Pending<KEY_BYTES, V>])>,
) -> Vec<Task<'a, KEY_BYTES, V>> {
    let mut tasks = Vec::with_capacity(16);
    let mut existing = existing.peekable();
    for (run_nibble, run) in runs {
        while let Some((_, child)) =
            existing.next_if(|(child_nibble, _)| *child_nibble < run_nibble)
        {
            tasks.push(Task {
                existing: Some(child),
                batch: &mut [],
            });
        }
        let child = existing.next_if(|(child_nibble, _)| *child_nibble == run_nibble);
        tasks.push(Task {
            existing: child.map(|(_, child)| child),
            batch: run,
        });
    }
    tasks.extend(existing.map(|(_, child)| Task {
        existing: Some(child),
        batch: &mut [],
    }));
    tasks
}

fn run_tasks<const KEY_BYTES: usize, V: Value + Send>(
    tasks: Vec<Task<'_, KEY_BYTES, V>>,
    threads: usize,
) -> Vec<Node<KEY_BYTES, V>> {
    let weight = |task: &Task<'_, KEY_BYTES, V>| task.batch.len() as u64;
    let merged = run_weighted(tasks, threads, weight, |task, budget| {
        merge(task.existing, task.batch, budget)
    });
    // Every task makes a subtree (a task has a child or entries), so the children fit exactly
    // (a collected `Flatten` would grow the vector by doubling, up to twice their size).
    let mut children = Vec::with_capacity(merged.len());
    children.extend(merged.into_iter().flatten());
    children
}

/// Splits a sorted batch whose keys share `depth` nibbles into runs by the next nibble.
fn split_by_nibble<const KEY_BYTES: usize, V: Value>(
    batch: &mut [Pending<KEY_BYTES, V>],
    depth: usize,
) -> Vec<(u8, &mut [Pending<KEY_BYTES, V>])> {
    runs_by_nibble(batch, depth).collect()
}

/// The runs of [`split_by_nibble`], one at a time (nothing allocated).
fn runs_by_nibble<const KEY_BYTES: usize, V: Value>(
    batch: &mut [Pending<KEY_BYTES, V>],
    depth: usize,
) -> impl Iterator<Item = (u8, &mut [Pending<KEY_BYTES, V>])> {
    let mut rest = batch;
    std::iter::from_fn(move || {
        let (run_nibble, run_len) = first_run(rest, depth)?;
        let (run, tail) = std::mem::take(&mut rest).split_at_mut(run_len);
        rest = tail;
        Some((run_nibble, run))
    })
}

/// The nibble at `depth` of the sorted `batch`'s first run and the run's length; `None` for an
/// empty batch.
fn first_run<const KEY_BYTES: usize, V: Value>(
    batch: &[Pending<KEY_BYTES, V>],
    depth: usize,
) -> Option<(u8, usize)> {
    first_run_by(batch, depth, |entry| &entry.key)
}

/// [`first_run`] of any sorted items, by their keys.
fn first_run_by<const KEY_BYTES: usize, T>(
    items: &[T],
    depth: usize,
    key: impl Fn(&T) -> &[u8; KEY_BYTES],
) -> Option<(u8, usize)> {
    let run_nibble = nibble(key(items.first()?), depth);
    let run_len = items.partition_point(|item| nibble(key(item), depth) <= run_nibble);
    Some((run_nibble, run_len))
}
