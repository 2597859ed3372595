//! Marked deletion and bulk cleanup.
//!
//! Deleting only sets a leaf's tombstone and bumps the deleted counter (and dirty flag) of each
//! branch above it: no node moves, so many threads may delete at once through `&Trie`. Hashes
//! ignore tombstoned leaves already (see [`crate::hashing`]); `clean` later removes them in one
//! pass that enters only subtrees whose counter is non-zero and drops wholly deleted subtrees
//! without looking inside — the common case for an offer book, where the offers that trade in a
//! block are the cheapest ones, a dense run of keys.

use std::sync::atomic::Ordering;

use crate::nibble::nibble;
use crate::node::{Branch, Node};
use crate::value::Value;

/// Tombstones the live leaf with `key` under `node`; false when there is none.
pub(crate) fn mark_deleted<const KEY_BYTES: usize, V: Value>(
    node: &Node<KEY_BYTES, V>,
    key: &[u8; KEY_BYTES],
) -> bool {
    match node {
        // `swap` makes exactly one of several racing deleters see `false` and count it.
        Node::Leaf(leaf) => leaf.key == *key && !leaf.deleted.swap(true, Ordering::Relaxed),
        Node::Branch(branch) => {
            let child = branch.child(nibble(key, usize::from(branch.depth)));
            let marked = child.is_some_and(|child| mark_deleted(child, key));
            if marked {
                branch.deleted.fetch_add(1, Ordering::Relaxed);
                branch.dirty.store(true, Ordering::Relaxed);
            }
            marked
        }
    }
}

/// `node` without its tombstoned leaves; `None` when nothing is left.
///
/// Hash caches stay valid: a branch's cached hash already described its live leaves only, and
/// a branch left with one child is replaced by that child, whose hash equals the branch's
/// (hashes commit to absolute paths, so they do not depend on where the parent branches).
pub(crate) fn clean<const KEY_BYTES: usize, V: Value>(
    node: Node<KEY_BYTES, V>,
) -> Option<Node<KEY_BYTES, V>> {
    match node {
        Node::Leaf(leaf) => (!leaf.deleted.load(Ordering::Relaxed)).then_some(Node::Leaf(leaf)),
        Node::Branch(branch) => clean_branch(branch),
    }
}

fn clean_branch<const KEY_BYTES: usize, V: Value>(
    mut branch: Box<Branch<KEY_BYTES, V>>,
) -> Option<Node<KEY_BYTES, V>> {
    let deleted = *branch.deleted.get_mut();
    if deleted == 0 {
        return Some(Node::Branch(branch));
    }
    if deleted == branch.leaves {
        return None;
    }
    // Every child is read: ask for them all before the first.
    for child in &branch.children {
        child.prefetch();
    }
    let survivors: Vec<Node<KEY_BYTES, V>> = std::mem::take(&mut branch.children)
        .into_iter()
        .filter_map(clean)
        .collect();
    if survivors.len() == 1 {
        return survivors.into_iter().next();
    }
    branch.children = survivors;
    branch.recount();
    Some(Node::Branch(branch))
}
