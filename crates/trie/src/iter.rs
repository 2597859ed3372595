//! In-order iteration over live leaves, from the start or from a key.

use std::cmp::Ordering;
use std::slice;

use crate::nibble::{compare_prefix, nibble};
use crate::node::Node;
use crate::value::Value;

/// Live `(key, value)` pairs in increasing key order. Tombstoned leaves are skipped, and so are
/// wholly deleted subtrees, without entering them.
pub struct Iter<'a, const KEY_BYTES: usize, V: Value> {
    /// Siblings still to visit, one level per entry; the deepest level is last.
    stack: Vec<slice::Iter<'a, Node<KEY_BYTES, V>>>,
}

impl<'a, const KEY_BYTES: usize, V: Value> Iter<'a, KEY_BYTES, V> {
    pub(crate) fn new(root: Option<&'a Node<KEY_BYTES, V>>) -> Self {
        Iter {
            stack: root
                .map(|root| slice::from_ref(root).iter())
                .into_iter()
                .collect(),
        }
    }

    /// Positioned at the first key `>= start`: walks down `start`'s path once, stacking the
    /// siblings to its right at every level.
    pub(crate) fn from_key(root: Option<&'a Node<KEY_BYTES, V>>, start: &[u8; KEY_BYTES]) -> Self {
        let mut stack = Vec::new();
        let mut current = root;
        while let Some(node) = current.take() {
            match node {
                Node::Leaf(leaf) => {
                    if leaf.key >= *start {
                        stack.push(slice::from_ref(node).iter());
                    }
                }
                Node::Branch(branch) => {
                    let depth = usize::from(branch.depth);
                    match compare_prefix(&branch.prefix, start, depth) {
                        Ordering::Greater => stack.push(slice::from_ref(node).iter()),
                        Ordering::Less => {}
                        Ordering::Equal => {
                            let start_nibble = nibble(start, depth);
                            let below = branch
                                .nibbled_children()
                                .take_while(|(n, _)| *n < start_nibble)
                                .count();
                            let on_path = branch.child(start_nibble);
                            let right_from = below + usize::from(on_path.is_some());
                            stack.push(branch.children[right_from..].iter());
                            current = on_path;
                        }
                    }
                }
            }
        }
        Iter { stack }
    }
}

impl<'a, const KEY_BYTES: usize, V: Value> Iterator for Iter<'a, KEY_BYTES, V> {
    type Item = (&'a [u8; KEY_BYTES], &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let level = self.stack.last_mut()?;
            let Some(node) = level.next() else {
                self.stack.pop();
                continue;
            };
            match node {
                Node::Leaf(leaf) => {
                    if !leaf.deleted.load(std::sync::atomic::Ordering::Relaxed) {
                        return Some((&leaf.key, &leaf.value));
                    }
                }
                Node::Branch(branch) => {
                    if node.live_leaves() > 0 {
                        self.stack.push(branch.children.iter());
                    }
                }
            }
        }
    }
}
