//! Structural invariants, checked by tests after every operation.

use std::cmp::Ordering;

use crate::hashing::{live_hash_now, LiveChildren};
use crate::nibble::{bitmap_nibbles, compare_prefix, nibble, truncated};
use crate::node::{Branch, Node};
use crate::value::Value;

/// Everything that must hold of a subtree, or a description of what does not.
pub(crate) fn check<const KEY_BYTES: usize, V: Value>(
    node: &Node<KEY_BYTES, V>,
) -> Result<(), String> {
    match node {
        Node::Leaf(_) => Ok(()),
        Node::Branch(branch) => check_branch(branch),
    }
}

fn check_branch<const KEY_BYTES: usize, V: Value>(
    branch: &Branch<KEY_BYTES, V>,
) -> Result<(), String> {
    let depth = usize::from(branch.depth);
    let at = format!("branch at depth {depth} prefix {:02x?}", branch.prefix);
    if branch.children.len() < 2 || branch.children.len() != branch.bitmap.count_ones() as usize {
        return Err(format!(
            "{at}: {} children, bitmap {:#06x}",
            branch.children.len(),
            branch.bitmap
        ));
    }
    if depth >= 2 * KEY_BYTES || truncated(&branch.prefix, depth) != branch.prefix {
        return Err(format!("{at}: depth out of range or prefix not canonical"));
    }
    for (child_nibble, child) in bitmap_nibbles(branch.bitmap).zip(&branch.children) {
        let placed = child.depth() > depth
            && compare_prefix(child.path(), &branch.prefix, depth) == Ordering::Equal
            && nibble(child.path(), depth) == child_nibble;
        if !placed {
            return Err(format!(
                "{at}: child for nibble {child_nibble} is misplaced"
            ));
        }
        if !branch.dirty.load(std::sync::atomic::Ordering::Relaxed) && child.needs_hashing() {
            return Err(format!("{at}: clean branch over a stale child"));
        }
        check(child)?;
    }
    check_counts(branch, &at)?;
    check_cached_hash(branch, &at)
}

fn check_counts<const KEY_BYTES: usize, V: Value>(
    branch: &Branch<KEY_BYTES, V>,
    at: &str,
) -> Result<(), String> {
    let leaves: u64 = branch.children.iter().map(Node::leaves).sum();
    let branches: u64 = 1 + branch.children.iter().map(Node::branches).sum::<u64>();
    let deleted: u64 = branch.children.iter().map(Node::deleted).sum();
    let own_deleted = branch.deleted.load(std::sync::atomic::Ordering::Relaxed);
    if leaves != branch.leaves || deleted != own_deleted || branches != branch.branches {
        return Err(format!(
            "{at}: counts {}/{own_deleted}/{} branches but children hold {leaves}/{deleted}/{branches}",
            branch.leaves, branch.branches
        ));
    }
    Ok(())
}

fn check_cached_hash<const KEY_BYTES: usize, V: Value>(
    branch: &Branch<KEY_BYTES, V>,
    at: &str,
) -> Result<(), String> {
    if branch.dirty.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    let live = LiveChildren::collect(branch.bitmap, branch.children.iter().map(live_hash_now));
    if live.combined(branch.depth, &branch.prefix) != branch.live_hash {
        return Err(format!(
            "{at}: cached hash is stale but the branch is not marked dirty"
        ));
    }
    Ok(())
}
