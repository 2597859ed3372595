//! What a state remembers of its last checkpoint draft (see `crate::checkpoint_draft`): not
//! state, and its own module so that the state can hold it without depending on the
//! checkpoint code that reads it.

use std::sync::{Mutex, PoisonError};

/// Accounts in a piece: the unit a checkpoint draft re-encodes. A chunk of the checkpoint
/// format holds 64 pieces.
pub const PIECE_ACCOUNTS: usize = 1 << 10;

/// What the state remembers of its last draft (not state: a restart starts with none).
#[derive(Debug, Default)]
pub(crate) struct DraftMemory {
    pub(crate) inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// Height of the state when it was last drafted; `None`: never.
    pub(crate) drafted_at: Option<u64>,
    /// Whether each piece of that draft changed since (pieces beyond these are all new).
    pub(crate) changed: Vec<bool>,
}

impl DraftMemory {
    /// Notes that the accounts in `slots` changed (or were created).
    pub(crate) fn touch(&mut self, slots: &[u32]) {
        let memory = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        for slot in slots {
            let piece = *slot as usize / PIECE_ACCOUNTS;
            if let Some(changed) = memory.changed.get_mut(piece) {
                *changed = true;
            }
        }
    }
}
