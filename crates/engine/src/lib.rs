//! The exchange: state, transactions' effects, deterministic filtering, parallel block
//! execution, block headers and the follower's exact check of a proposer's clearing. The
//! engine decides state and nothing else: explanations of offers are a read model in
//! `walras-explain`, the serial order-book baseline lives in `walras-bench`.
//!
//! - [`ExchangeState`]: accounts, open offers, burns, and the state root.
//! - The admission rule ([`admit`], [`admit_source`], [`check_funds`]): whether a transaction
//!   alone may take effect.
//! - [`filter`]: which transactions of a block take effect (SPEEDEX §8, appendix I).
//! - Proposing ([`ExchangeState::propose`]) and applying ([`ExchangeState::apply`]) blocks, in
//!   phases sharded over threads.
//! - [`Block`] and [`BlockHeader`]: blocks, headers, their encodings and hashes.
//! - [`PaymentsBridge`]: deposits to and withdrawals from the fast-payments lane. Of
//!   `walras-payments` the engine uses only `walras_payments::bridge`, the certificate-checking
//!   interface (the committee built from the genesis, `check_certificate`, the withdrawal
//!   owner and deposit output ids): never the lane's validator or client state machines.
//!
//! The modules are private; every item callers need is re-exported here, once.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(unreachable_pub)]

mod account;
mod account_view;
mod accounts;
mod admission;
mod block;
mod bridge;
mod carried;
mod checkpoint;
mod checkpoint_draft;
mod draft_memory;
mod drop_reason;
mod execute;
mod filter;
mod market;
mod offer_book;
mod parallel;
mod resting;
mod shared_books;
mod slot_index;
mod state;

pub use account::{decoded_keys_live, Account, DECODED_KEY_BYTES};
pub use account_view::AccountView;
pub use admission::{admit, admit_source, check_funds, debit, Rejection, SourceView};
pub use block::{transaction_hash, Block, BlockDecodeError, BlockHeader, PairTrade, TRADE_BYTES};
pub use bridge::{deposit_output, BridgeError, PaymentsBridge, PaymentsRejection};
pub use checkpoint::{
    seal_checkpoint, CheckpointError, LoadTimings, ACCOUNT_CHUNK, CHECKPOINT_DOMAIN,
};
pub use checkpoint_draft::{CheckpointDraft, DraftError, PieceTable, PIECE_ACCOUNTS};
pub use drop_reason::DropReason;
pub use execute::{
    BlockOutcome, CheckedBlock, ClearingReport, EngineConfig, EngineError, OfferFill, PhaseTimings,
};
pub use filter::filter;
pub use market::{AssetMarket, LastTrade, MarketDecodeError, MarketPrices};
pub use offer_book::{OfferBook, OfferBookIter};
pub use shared_books::{BookSnapshot, SharedBooksError, BOOK_OFFER_BYTES};
pub use slot_index::{hash_map_heap_bytes, SlotMap};
pub use state::{check_genesis, new_slot, ExchangeState, StateError, StateMemory, ACCOUNTS_MAX};
