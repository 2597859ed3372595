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
//! The changed pieces are not encoded on the block path either: the draft shares the state's
//! accounts (`crate::accounts::Accounts`: a reference count per chunk of 32 accounts; the
//! block path copies a chunk it then writes, as it does for the published account view) and
//! copies only the ids of the changed pieces' accounts; the writer encodes them when it
//! assembles the draft. A whole draft (the first after a start) cost the block path 1.5 s at
//! 10M accounts when it encoded them there.
//!
//! The open offers are not copied on the block path either when the state carries its
//! clearing books for its height (every executed block leaves them): the draft shares their
//! chunks (a reference count raised per chunk) and the fills still to apply to them, and
//! [`CheckpointDraft::assemble`] encodes the books section from them, in the same bytes as
//! [`ExchangeState::encode_books`] (at 900k open offers the books were 37 MB and ~80 ms of the
//! block path at each checkpoint, at 10M about ten times that).
//!
//! A draft is incremental only against the checkpoint it names ([`CheckpointDraft::base`]),
//! which must be the last one drafted from this state: the caller passes the height of the
//! checkpoint it holds, and any other answer (none written yet, a failed write, a restarted
//! node) gives a whole draft.

use crate::accounts::Accounts;
use crate::checkpoint::{
    accounts_encoded_len, count_u32, encode_accounts_into, Format, ACCOUNT_CHUNK, BOOK_OFFERS_MAX,
    PAIRS_MAX,
};
use crate::draft_memory::Memory;
use crate::shared_books::{
    put_offer, BookSnapshot, FillsMismatch, OpenBook, SharedBooks, BOOK_OFFER_BYTES,
};
use crate::state::{ExchangeState, ACCOUNTS_MAX};
use std::sync::PoisonError;
use walras_types::codec::Writer;
use walras_types::{AccountId, PairId};

pub use crate::draft_memory::PIECE_ACCOUNTS;
const _: () = assert!(ACCOUNT_CHUNK.is_multiple_of(PIECE_ACCOUNTS));
const PIECES_PER_CHUNK: usize = ACCOUNT_CHUNK / PIECE_ACCOUNTS;

/// A checkpoint's bytes, in parts: what the block path copied, the accounts it shares, and
/// which account pieces are to come from the checkpoint it was drafted against.
#[derive(Debug)]
pub struct CheckpointDraft {
    height: u64,
    base: Option<u64>,
    /// Magic, zero checksum, head, account count and chunk count; the chunk table (each
    /// chunk's bytes) follows when the draft is assembled, once every piece's length is known.
    head: Vec<u8>,
    /// Per piece: whether it is encoded from `accounts` (else it is the base's piece of the
    /// same index).
    fresh: Vec<bool>,
    /// The state's accounts at the draft's height, shared.
    accounts: Accounts,
    /// The ids of the fresh pieces' accounts, piece after piece.
    fresh_ids: Vec<AccountId>,
    books: DraftBooks,
    /// Market record, bridge.
    tail: Vec<u8>,
}

/// A draft's books section: encoded on the block path, or shared with the carried books and
/// encoded when the draft is assembled.
#[derive(Debug)]
enum DraftBooks {
    Encoded(Vec<u8>),
    Shared(SharedBooks),
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
    /// The carried books and their fills disagree (a fill of an offer the books do not
    /// hold): a defect, reported rather than written.
    #[error("the books shared at height {height} do not take their fills (pair {pair})")]
    SharedBooks { height: u64, pair: usize },
}

impl ExchangeState {
    /// This state's checkpoint as a draft: incremental against the checkpoint at height
    /// `base` when that is the last draft made from this state, else whole. Shares the
    /// accounts and copies the changed pieces' account ids; the writer encodes them
    /// ([`CheckpointDraft::assemble`]). Forgets what changed: the next draft is against this
    /// one.
    pub fn draft_checkpoint(&self, base: Option<u64>) -> CheckpointDraft {
        let mut memory = self
            .draft_memory
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let incremental = base.is_some() && base == memory.drafted_at;
        let pieces_count = self.accounts.len().div_ceil(PIECE_ACCOUNTS);
        let fresh: Vec<bool> = (0..pieces_count)
            .map(|piece| !incremental || memory.changed.get(piece).is_none_or(|changed| *changed))
            .collect();
        // One copy into one buffer: fresh memory costs this VM a page fault per 4 KiB, and
        // a whole draft's ids are 80 MB at 10M accounts.
        let fresh_slots = || {
            (0..pieces_count)
                .filter(|piece| fresh[*piece])
                .map(|piece| self.piece_slots(piece))
        };
        let mut fresh_ids: Vec<AccountId> =
            Vec::with_capacity(fresh_slots().map(|slots| slots.len()).sum());
        for slots in fresh_slots() {
            fresh_ids.extend_from_slice(&self.account_ids[slots]);
        }
        let mut head = Vec::new();
        self.encode_head(Format::V3, &mut head);
        let chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        head.put_u32(count_u32(chunks, ACCOUNTS_MAX, "account chunks"));
        let books = match self.carried.share(self.height) {
            Some(shared) => DraftBooks::Shared(shared),
            None => {
                let mut bytes = Vec::new();
                self.encode_books(&mut bytes);
                DraftBooks::Encoded(bytes)
            }
        };
        let mut tail = Vec::new();
        self.encode_after_books(&mut tail);
        *memory = Memory {
            drafted_at: Some(self.height),
            changed: vec![false; pieces_count],
        };
        CheckpointDraft {
            height: self.height,
            base: incremental.then_some(base).flatten(),
            head,
            fresh,
            accounts: self.accounts.clone(),
            fresh_ids,
            books,
            tail,
        }
    }

    /// Every open offer of this state, shared with its carried books (a reference count per
    /// chunk, no offer copied) for a book snapshot written off the block path; `None` when it
    /// carries no books for its height (before its first block after a start).
    pub fn share_books(&self) -> Option<BookSnapshot> {
        Some(BookSnapshot {
            height: self.height,
            assets: self.assets,
            shared: self.carried.share(self.height)?,
        })
    }

    /// The open offers of `pair` alone, shared as [`Self::share_books`] shares them all (a
    /// reference count per chunk of that pair): for a reader that scans one book without
    /// holding the state.
    pub fn share_book(&self, pair: PairId) -> Option<BookSnapshot> {
        let index = self.pair_index(pair.sell, pair.buy);
        Some(BookSnapshot {
            height: self.height,
            assets: self.assets,
            shared: self.carried.share_pair(self.height, index)?,
        })
    }

    /// Remembers this state's whole checkpoint as its last draft, as if it had just been
    /// drafted whole: for a state just loaded from that checkpoint, before any block is
    /// applied, so that the next draft is against it. Returns where its pieces lie in that
    /// checkpoint's bytes (lengths computed on `threads` threads).
    pub fn remember_as_drafted(&self, threads: usize) -> PieceTable {
        let pieces_count = self.accounts.len().div_ceil(PIECE_ACCOUNTS);
        let pieces: Vec<usize> = (0..pieces_count).collect();
        let lengths = walras_par::map_in_order(&pieces, threads, 64, |piece| {
            accounts_encoded_len(&self.accounts, self.piece_slots(*piece))
        });
        let mut head = Vec::new();
        self.encode_head(Format::V3, &mut head);
        let chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        let mut offset = (head.len() + 4 + 8 * chunks) as u64;
        let mut table = PieceTable::default();
        for length in lengths {
            table.offsets.push(offset);
            table.lengths.push(length);
            offset += length;
        }
        *self
            .draft_memory
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Memory {
            drafted_at: Some(self.height),
            changed: vec![false; pieces_count],
        };
        table
    }

    /// The slots of piece `piece`.
    fn piece_slots(&self, piece: usize) -> std::ops::Range<usize> {
        piece_slots(piece, self.accounts.len())
    }
}

/// The slots of piece `piece` of a state of `accounts` accounts.
fn piece_slots(piece: usize, accounts: usize) -> std::ops::Range<usize> {
    let first = piece * PIECE_ACCOUNTS;
    first..(first + PIECE_ACCOUNTS).min(accounts)
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

    /// Bytes copied on the block path: the head, the tail, the fresh pieces' account ids, and
    /// the books when they were not shared (the accounts are encoded, the unchanged pieces
    /// copied from the base, and shared books encoded, when the draft is assembled).
    pub fn copied_bytes(&self) -> usize {
        let books = match &self.books {
            DraftBooks::Encoded(bytes) => bytes.len(),
            DraftBooks::Shared(_) => 0,
        };
        self.head.len() + 8 * self.fresh_ids.len() + books + self.tail.len()
    }

    /// Whether the open offers were shared with the carried books rather than copied on the
    /// block path.
    pub fn books_shared(&self) -> bool {
        matches!(self.books, DraftBooks::Shared(_))
    }

    /// The unsealed checkpoint bytes, the unchanged pieces copied from `base` (the bytes of
    /// the checkpoint at [`Self::base`] and its table); and where the pieces lie in them.
    pub fn assemble(
        &self,
        base: Option<(&[u8], &PieceTable)>,
    ) -> Result<(Vec<u8>, PieceTable), DraftError> {
        let mut bytes = Vec::new();
        let table = self.assemble_into(base, &mut bytes)?;
        Ok((bytes, table))
    }

    /// [`Self::assemble`] into `bytes`, whose contents are replaced and whose allocation is
    /// reused: a writer that keeps one buffer does not fault in a fresh checkpoint's worth of
    /// pages each time (at 10M accounts 1.3 GB, which the kernel zeroed in 3-4 s of CPU on
    /// the 2-core VM, every checkpoint). On an error `bytes` holds no checkpoint.
    pub fn assemble_into(
        &self,
        base: Option<(&[u8], &PieceTable)>,
        bytes: &mut Vec<u8>,
    ) -> Result<PieceTable, DraftError> {
        bytes.clear();
        let mismatch = |FillsMismatch(pair)| DraftError::SharedBooks {
            height: self.height,
            pair,
        };
        let books = match &self.books {
            DraftBooks::Encoded(bytes) => BooksSection::Encoded(bytes),
            DraftBooks::Shared(shared) => {
                BooksSection::Open(shared.open_books().map_err(mismatch)?)
            }
        };
        let pieces = self.pieces(base)?;
        let chunk_table: Vec<u64> = pieces
            .chunks(PIECES_PER_CHUNK)
            .map(|chunk| chunk.iter().map(|piece| piece.len()).sum())
            .collect();
        let total = self.head.len()
            + 8 * chunk_table.len()
            + pieces
                .iter()
                .map(|piece| piece.len() as usize)
                .sum::<usize>()
            + books.len()
            + self.tail.len();
        bytes.reserve(total);
        bytes.extend_from_slice(&self.head);
        for chunk_bytes in chunk_table {
            bytes.put_u64(chunk_bytes);
        }
        let mut table = PieceTable::default();
        for piece in &pieces {
            table.offsets.push(bytes.len() as u64);
            table.lengths.push(piece.len());
            match piece {
                Piece::Base(base) => bytes.extend_from_slice(base),
                // Encoded straight into the checkpoint's bytes: no second copy of every
                // account (860 MB at 10M) in the writer's memory.
                Piece::Fresh { slots, ids, length } => {
                    let start = bytes.len();
                    encode_accounts_into(&self.accounts, slots.clone(), ids, bytes);
                    assert_eq!(
                        (bytes.len() - start) as u64,
                        *length,
                        "a piece encodes to the length it was measured at"
                    );
                }
            }
        }
        match books {
            BooksSection::Encoded(books) => bytes.extend_from_slice(books),
            BooksSection::Open(open) => encode_open_books(&open, bytes).map_err(mismatch)?,
        }
        bytes.extend_from_slice(&self.tail);
        assert_eq!(bytes.len(), total, "a draft assembles to its own length");
        Ok(table)
    }

    /// Every account piece: the fresh ones measured (their accounts are encoded when the
    /// checkpoint's bytes are written), the others found in the base.
    fn pieces<'s>(
        &'s self,
        base: Option<(&'s [u8], &PieceTable)>,
    ) -> Result<Vec<Piece<'s>>, DraftError> {
        let mut ids = self.fresh_ids.as_slice();
        let mut pieces = Vec::with_capacity(self.fresh.len());
        for (piece, fresh) in self.fresh.iter().enumerate() {
            if !fresh {
                pieces.push(Piece::Base(self.base_piece(base, piece)?));
                continue;
            }
            let slots = piece_slots(piece, self.accounts.len());
            let (piece_ids, rest) = ids.split_at(slots.len());
            ids = rest;
            let length = accounts_encoded_len(&self.accounts, slots.clone());
            pieces.push(Piece::Fresh {
                slots,
                ids: piece_ids,
                length,
            });
        }
        debug_assert!(ids.is_empty(), "one id per fresh account");
        Ok(pieces)
    }

    /// Piece `piece` of the base, where its table says it lies.
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
        let start = usize::try_from(*offset).map_err(|_| mismatch.clone())?;
        let end = start
            .checked_add(*length as usize)
            .ok_or(mismatch.clone())?;
        bytes.get(start..end).ok_or(mismatch)
    }
}

/// One account piece as a draft's assembly writes it.
enum Piece<'d> {
    /// The base checkpoint's bytes of the piece.
    Base(&'d [u8]),
    /// The accounts in `slots` of the shared table, with their `ids`: `length` bytes.
    Fresh {
        slots: std::ops::Range<usize>,
        ids: &'d [AccountId],
        length: u64,
    },
}

impl Piece<'_> {
    fn len(&self) -> u64 {
        match self {
            Piece::Base(bytes) => bytes.len() as u64,
            Piece::Fresh { length, .. } => *length,
        }
    }
}

/// A draft's books section as its assembly writes it: bytes encoded on the block path, or
/// the open books of the shared ones.
enum BooksSection<'d> {
    Encoded(&'d [u8]),
    Open(Vec<OpenBook<'d>>),
}

impl BooksSection<'_> {
    /// Bytes the section takes in the checkpoint.
    fn len(&self) -> usize {
        match self {
            BooksSection::Encoded(bytes) => bytes.len(),
            BooksSection::Open(open) => {
                4 + open
                    .iter()
                    .map(|book| 8 + BOOK_OFFER_BYTES * book.offers())
                    .sum::<usize>()
            }
        }
    }
}

/// The books section of [`ExchangeState::encode_books`], from shared books: each open pair's
/// offers in key order, a filled offer at its remaining amount, a closed one left out.
fn encode_open_books(open: &[OpenBook<'_>], bytes: &mut Vec<u8>) -> Result<(), FillsMismatch> {
    bytes.put_u32(count_u32(open.len(), PAIRS_MAX, "open books"));
    for book in open {
        bytes.put_u32(count_u32(book.index(), PAIRS_MAX - 1, "pair index"));
        bytes.put_u32(count_u32(
            book.offers(),
            BOOK_OFFERS_MAX,
            "offers in a book",
        ));
        book.for_each(|key, amount| put_offer(bytes, key, amount))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared_books::SharedPair;
    use std::sync::Arc;
    use walras_clearing::OrderBooks;
    use walras_types::{AccountId, AssetId, Offer, OfferId, OfferKey, Price};

    fn offer(id: u64, sell: u16, limit: f64, amount: u64) -> Offer {
        Offer {
            id: OfferId(id),
            account: AccountId(id),
            sell: AssetId(sell),
            buy: AssetId(1 - sell),
            amount,
            min_price: Price::from_f64(limit),
        }
    }

    /// A draft over books of two pairs (three offers selling 0, one selling 1) and `fills`.
    fn draft_with_fills(fills: Vec<(usize, OfferKey, u64)>) -> CheckpointDraft {
        let offers = vec![
            offer(1, 0, 1.0, 10),
            offer(2, 0, 2.0, 20),
            offer(3, 0, 3.0, 30),
            offer(4, 1, 1.0, 40),
        ];
        let books = OrderBooks::build(offers, 2, 1).expect("valid offers");
        let pairs = books
            .pairs()
            .iter()
            .map(|pair| SharedPair {
                index: usize::from(pair.sell) * 2 + usize::from(pair.buy),
                offers: pair.len(),
                chunks: books.chunks(pair).iter().map(Arc::clone).collect(),
            })
            .collect();
        CheckpointDraft {
            height: 7,
            base: None,
            head: Vec::new(),
            fresh: Vec::new(),
            accounts: Accounts::default(),
            fresh_ids: Vec::new(),
            books: DraftBooks::Shared(SharedBooks { pairs, fills }),
            tail: Vec::new(),
        }
    }

    /// The books section: (pair, [(id, amount)]) per open book.
    fn books_section(bytes: &[u8]) -> Vec<(u32, Vec<(u64, u64)>)> {
        let mut reader = walras_types::codec::Reader::new(bytes);
        let books = reader.u32().expect("book count");
        (0..books)
            .map(|_| {
                let pair = reader.u32().expect("pair");
                let count = reader.u32().expect("count");
                let offers = (0..count)
                    .map(|_| {
                        reader.u128().expect("limit");
                        reader.u64().expect("account");
                        let id = reader.u64().expect("id");
                        (id, reader.u64().expect("amount"))
                    })
                    .collect();
                (pair, offers)
            })
            .collect()
    }

    fn key(id: u64, limit: f64) -> OfferKey {
        offer(id, 0, limit, 1).key()
    }

    /// Shared books are encoded with their fills applied: a partly filled offer at its
    /// remaining amount, a closed one left out, a book closed whole left out.
    #[test]
    fn shared_books_are_encoded_after_their_fills() {
        let draft = draft_with_fills(vec![
            (1, key(1, 1.0), 4),
            (1, key(2, 2.0), 0),
            (2, offer(4, 1, 1.0, 1).key(), 0),
        ]);
        let (bytes, _) = draft.assemble(None).expect("the fills apply");
        assert_eq!(books_section(&bytes), vec![(1, vec![(1, 4), (3, 30)])]);
    }

    /// A fill naming an offer the shared books do not hold (a defect in what was carried)
    /// is refused, not written as a checkpoint with a wrong count.
    #[test]
    fn a_fill_of_an_offer_the_shared_books_do_not_hold_is_refused() {
        for fills in [
            vec![(1, key(9, 1.5), 0)],
            vec![(1, key(9, 1.5), 3)],
            vec![(0, key(1, 1.0), 0)],
            vec![(3, key(1, 1.0), 2)],
        ] {
            let draft = draft_with_fills(fills.clone());
            assert!(
                matches!(
                    draft.assemble(None),
                    Err(DraftError::SharedBooks { height: 7, .. })
                ),
                "fills {fills:?}"
            );
        }
    }
}
