//! A checkpoint drafted against the previous one, so that the block path copies only what
//! changed since it.
//!
//! Why: a node copies the state for its checkpoint while it holds the state (the block path
//! waits), and at 10M accounts that copy was ~860 MB and 1.4–1.5 s on the 2-core VM, every
//! ~25 s under load: the p99 of every transaction around it. Most accounts do not change
//! between two checkpoints, and an account's bytes in a checkpoint depend on the account only.
//! So the accounts are cut into pieces of [`PIECE_ACCOUNTS`] slots, the state remembers
//! which pieces a block touched since the last draft (`crate::draft_memory`, fed by the same slot
//! list that updates the account trie, so nothing that changes an account escapes it), and a
//! draft encodes only those; the others are copied, off the block path, from the previous
//! checkpoint's bytes ([`CheckpointDraft::assemble`], by the store's writer thread from the
//! file it wrote last). The assembled bytes are exactly [`ExchangeState::encode_checkpoint_unsealed`]'s:
//! the format does not change (tests compare the two byte for byte).
//!
//! A draft is incremental only against the checkpoint it names ([`CheckpointDraft::base`]),
//! which must be the last one drafted from this state: the caller passes the height of the
//! checkpoint it holds, and any other answer (none written yet, a failed write, a restarted
//! node) gives a whole draft.

use crate::checkpoint::{count_u32, Format, ACCOUNT_CHUNK};
use crate::draft_memory::Memory;
use crate::state::{ExchangeState, ACCOUNTS_MAX};
use std::sync::PoisonError;
use walras_types::codec::Writer;

pub use crate::draft_memory::PIECE_ACCOUNTS;
const _: () = assert!(ACCOUNT_CHUNK.is_multiple_of(PIECE_ACCOUNTS));
const PIECES_PER_CHUNK: usize = ACCOUNT_CHUNK / PIECE_ACCOUNTS;

/// A checkpoint's bytes, in parts: what the block path copied, and which account pieces are
/// to come from the checkpoint it was drafted against.
#[derive(Debug)]
pub struct CheckpointDraft {
    height: u64,
    base: Option<u64>,
    /// Magic, zero checksum, head, account count, chunk count and chunk table.
    head: Vec<u8>,
    /// Per piece: its bytes, or `None` when they are the base's piece of the same index.
    pieces: Vec<Option<Vec<u8>>>,
    lengths: Vec<u64>,
    /// Books, market record, bridge.
    tail: Vec<u8>,
}

/// Where each account piece lies in a checkpoint's bytes: what a draft against it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PieceTable {
    offsets: Vec<u64>,
    lengths: Vec<u64>,
}

/// Why a draft could not be assembled: the bytes given as its base are not the checkpoint it
/// was drafted against. Nothing is written then; the next draft should be whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DraftError {
    #[error("the draft at height {height} copies pieces from the checkpoint at height {base}, which was not given")]
    NoBase { height: u64, base: u64 },
    #[error("piece {piece} of the base checkpoint is not where its table says, or not of the length the draft expects")]
    PieceMismatch { piece: usize },
}

impl ExchangeState {
    /// This state's checkpoint as a draft: incremental against the checkpoint at height
    /// `base` when that is the last draft made from this state, else whole. Encodes the
    /// changed pieces on `threads` threads. Forgets what changed: the next draft is against
    /// this one.
    pub fn draft_checkpoint(&self, base: Option<u64>, threads: usize) -> CheckpointDraft {
        let mut memory = self
            .draft_memory
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let incremental = base.is_some() && base == memory.drafted_at;
        let pieces_count = self.accounts.len().div_ceil(PIECE_ACCOUNTS);
        let fresh: Vec<usize> = (0..pieces_count)
            .filter(|piece| {
                !incremental || memory.changed.get(*piece).is_none_or(|changed| *changed)
            })
            .collect();
        let encoded =
            walras_par::map_in_order(&fresh, threads, 4, |piece| self.encode_piece(*piece));
        let mut pieces: Vec<Option<Vec<u8>>> = vec![None; pieces_count];
        let mut lengths = memory.lengths.clone();
        lengths.resize(pieces_count, 0);
        for (piece, bytes) in fresh.into_iter().zip(encoded) {
            lengths[piece] = bytes.len() as u64;
            pieces[piece] = Some(bytes);
        }
        let mut head = Vec::new();
        self.encode_head(Format::V3, &mut head);
        let chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        head.put_u32(count_u32(chunks, ACCOUNTS_MAX, "account chunks"));
        for chunk in lengths.chunks(PIECES_PER_CHUNK) {
            head.put_u64(chunk.iter().sum());
        }
        let mut tail = Vec::new();
        self.encode_tail(&mut tail);
        *memory = Memory {
            drafted_at: Some(self.height),
            changed: vec![false; pieces_count],
            lengths: lengths.clone(),
        };
        CheckpointDraft {
            height: self.height,
            base: incremental.then_some(base).flatten(),
            head,
            pieces,
            lengths,
            tail,
        }
    }

    /// Remembers this state's whole checkpoint as its last draft, as if it had just been
    /// drafted whole: for a state just loaded from that checkpoint, before any block is
    /// applied, so that the next draft is against it. Returns where its pieces lie in that
    /// checkpoint's bytes (lengths computed on `threads` threads).
    pub fn remember_as_drafted(&self, threads: usize) -> PieceTable {
        let pieces_count = self.accounts.len().div_ceil(PIECE_ACCOUNTS);
        let pieces: Vec<usize> = (0..pieces_count).collect();
        let lengths = walras_par::map_in_order(&pieces, threads, 64, |piece| {
            self.piece_slots(*piece)
                .map(|slot| 8 + self.accounts[slot].encoded_len() as u64)
                .sum::<u64>()
        });
        let mut head = Vec::new();
        self.encode_head(Format::V3, &mut head);
        let chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        let mut offset = (head.len() + 4 + 8 * chunks) as u64;
        let mut table = PieceTable::default();
        for length in &lengths {
            table.offsets.push(offset);
            table.lengths.push(*length);
            offset += length;
        }
        *self
            .draft_memory
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Memory {
            drafted_at: Some(self.height),
            changed: vec![false; pieces_count],
            lengths,
        };
        table
    }

    /// The slots of piece `piece`.
    fn piece_slots(&self, piece: usize) -> std::ops::Range<usize> {
        let first = piece * PIECE_ACCOUNTS;
        first..(first + PIECE_ACCOUNTS).min(self.accounts.len())
    }

    /// The accounts of piece `piece` as a checkpoint holds them.
    fn encode_piece(&self, piece: usize) -> Vec<u8> {
        let slots = self.piece_slots(piece);
        let length = slots
            .clone()
            .map(|slot| 8 + self.accounts[slot].encoded_len())
            .sum();
        let mut bytes = Vec::with_capacity(length);
        self.encode_accounts(slots, &mut bytes);
        debug_assert_eq!(bytes.len(), length);
        bytes
    }
}

impl CheckpointDraft {
    /// The height of the state drafted.
    pub fn height(&self) -> u64 {
        self.height
    }

    /// The checkpoint whose pieces this draft copies (`None`: a whole draft).
    pub fn base(&self) -> Option<u64> {
        self.base
    }

    /// Bytes encoded on the block path (the rest is copied from the base).
    pub fn copied_bytes(&self) -> usize {
        let pieces: usize = self.pieces.iter().flatten().map(Vec::len).sum();
        self.head.len() + pieces + self.tail.len()
    }

    /// The unsealed checkpoint bytes, the unchanged pieces copied from `base` (the bytes of
    /// the checkpoint at [`Self::base`] and its table); and where the pieces lie in them.
    pub fn assemble(
        &self,
        base: Option<(&[u8], &PieceTable)>,
    ) -> Result<(Vec<u8>, PieceTable), DraftError> {
        let total = self.head.len() + self.lengths.iter().sum::<u64>() as usize + self.tail.len();
        let mut bytes = Vec::with_capacity(total);
        bytes.extend_from_slice(&self.head);
        let mut table = PieceTable::default();
        for (piece, fresh) in self.pieces.iter().enumerate() {
            table.offsets.push(bytes.len() as u64);
            table.lengths.push(self.lengths[piece]);
            match fresh {
                Some(fresh) => bytes.extend_from_slice(fresh),
                None => bytes.extend_from_slice(self.base_piece(base, piece)?),
            }
        }
        bytes.extend_from_slice(&self.tail);
        assert_eq!(bytes.len(), total, "a draft assembles to its own length");
        Ok((bytes, table))
    }

    /// Piece `piece` of the base, checked against the length this draft expects.
    fn base_piece<'b>(
        &self,
        base: Option<(&'b [u8], &PieceTable)>,
        piece: usize,
    ) -> Result<&'b [u8], DraftError> {
        let Some((bytes, table)) = base.filter(|_| self.base.is_some()) else {
            return Err(DraftError::NoBase {
                height: self.height,
                base: self.base.unwrap_or(0),
            });
        };
        let mismatch = DraftError::PieceMismatch { piece };
        let (Some(offset), Some(length)) = (table.offsets.get(piece), table.lengths.get(piece))
        else {
            return Err(mismatch);
        };
        if *length != self.lengths[piece] {
            return Err(mismatch);
        }
        let start = usize::try_from(*offset).map_err(|_| mismatch.clone())?;
        let end = start
            .checked_add(*length as usize)
            .ok_or(mismatch.clone())?;
        bytes.get(start..end).ok_or(mismatch)
    }
}
