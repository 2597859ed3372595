//! A checkpoint: the whole [`ExchangeState`] as bytes, so a node restarts from it instead of
//! replaying every block since genesis.
//!
//! The tries are not stored: decoding rebuilds them from the accounts and offers (O(state)), and
//! whoever loads a checkpoint must compare the rebuilt state root with the root its block header
//! committed to ([`ExchangeState::state_root`]). A checksum over the body catches torn or
//! flipped bytes before anything is decoded. Public keys are not decoded at load: each account
//! decodes its own on its first signature check ([`Account::verifying_key`]).
//!
//! Format `/3` (written), big-endian:
//! `magic "walras-checkpoint/3" ‖ checksum[32] ‖ body`, where the checksum is
//! `H_ckpt(body_len:u64 ‖ H_ckpt_piece(piece)*)` over the body cut into pieces of
//! [`CHECKSUM_PIECE_BYTES`] (the last one shorter), so that it is checked on every thread, and
//! the body is `height:u64 last_header_hash[32] assets:u16 (issued:u64 burned:u64)*assets
//! account_count:u32 chunk_count:u32 (chunk_bytes:u64)*chunk_count` then the chunks, chunk `i`
//! holding slots `i·ACCOUNT_CHUNK ..` (at most [`ACCOUNT_CHUNK`] of them) as `(id:u64 account)*`
//! (each account as [`Account::encode`]), so that accounts decode in parallel; then
//! `pair_count:u32 (pair_index:u32 offer_count:u32 (min_price:u128 account:u64 id:u64
//! amount:u64)*)*` (pairs with open offers, in pair order; offers in canonical order, strictly
//! ascending: an offer takes 40 bytes, so each pair's place is known from the counts and pairs
//! decode in parallel), then the market record of last traded prices
//! ([`MarketPrices::encode`]), followed, only on an exchange bridged to a payments lane, by
//! `0x01 chain_id:u64 epoch:u64 shards:u32 validator_count:u16 (key[32] bls_key[48]
//! bls_proof[96])* (escrow:u64)*assets withdrawn_count:u64 (output_id[32] height:u64)*`
//! (withdrawn ids ascending). The committee's proofs of possession are checked again when the
//! section is decoded.
//!
//! Older formats are still read: `/2` is `/3` with the checksum `H_ckpt(body)` and the accounts
//! as `account_count:u32 (id:u64 account)*` (no chunk table); `/1` is `/2` without the market
//! record, which then starts empty at the checkpoint's height.

use crate::account::{Account, Balances};
use crate::accounts::{Accounts, CHUNK_ACCOUNTS};
use crate::bridge::PaymentsBridge;
use crate::market::MarketPrices;
use crate::offer_book::{offer_trie_key, OfferBook, OfferTrie};
use crate::slot_index::SlotIndex;
use crate::state::{new_slot, ExchangeState, ACCOUNTS_MAX};
use std::time::Instant;
use walras_crypto::{hash_in, hash_in_each, Domain, Hash, Hasher};
use walras_trie::Trie;
use walras_types::codec::{self, Reader, Writer};
use walras_types::{
    AccountId, AssetId, OfferId, OfferKey, PaymentsGenesis, PaymentsValidator, Price, MAX_ASSETS,
    PAYMENTS_VALIDATORS_MAX,
};

/// Hash domain of the checkpoint checksum.
pub const CHECKPOINT_DOMAIN: Domain = Domain::new("walras/ckpt");
/// Hash domain of one piece of a `/3` checkpoint's body, under its checksum.
pub(crate) const CHECKPOINT_PIECE_DOMAIN: Domain = Domain::new("walras/ckpt-part");
/// Bytes of a checksum piece: large enough that the piece hashes cost nothing beside the
/// body's, small enough to spread a 1 GB body over any thread count.
pub(crate) const CHECKSUM_PIECE_BYTES: usize = 1 << 23;
/// Accounts in a chunk of a `/3` checkpoint (the unit of parallel decoding).
pub const ACCOUNT_CHUNK: usize = 1 << 16;
// A checkpoint chunk decodes into whole chunks of the state's account table.
const _: () = assert!(ACCOUNT_CHUNK.is_multiple_of(CHUNK_ACCOUNTS));
pub(crate) const MAGIC: &[u8] = b"walras-checkpoint/3";
/// The format before chunked accounts and the piecewise checksum: still read.
const MAGIC_V2: &[u8] = b"walras-checkpoint/2";
/// The format before the market record: still read, with an empty record from its height.
const MAGIC_V1: &[u8] = b"walras-checkpoint/1";
/// Bytes of an offer in a checkpoint: price, account, id, amount.
const OFFER_BYTES: usize = 16 + 8 + 8 + 8;

/// The checkpoint formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    V1,
    V2,
    V3,
}

/// Why checkpoint bytes were refused. Never a panic: the bytes come from disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// Not a checkpoint of this format.
    #[error("not a {magic} checkpoint", magic = show(MAGIC))]
    Magic,
    /// The body does not match its checksum: torn or flipped bytes.
    #[error("its checksum does not match its contents")]
    Checksum,
    /// The body holds an impossible value.
    #[error("malformed: {0}")]
    Malformed(String),
    /// The body ends early or has bytes left over.
    #[error("malformed: body {0}")]
    Codec(#[from] codec::DecodeError),
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl ExchangeState {
    /// The hash of the last applied block's header (zero before the first block).
    pub fn last_header_hash(&self) -> Hash {
        self.last_header_hash
    }

    /// The state as checkpoint bytes (see the module documentation).
    pub fn encode_checkpoint(&self) -> Vec<u8> {
        let mut bytes = self.encode_checkpoint_unsealed();
        seal_checkpoint(&mut bytes);
        bytes
    }

    /// The checkpoint bytes with a zero checksum: what a node must copy while it holds the
    /// state. [`seal_checkpoint`] (hashing the whole body) can then run on another thread,
    /// off the block path.
    pub fn encode_checkpoint_unsealed(&self) -> Vec<u8> {
        self.encode_body(Format::V3)
    }

    /// The state in format `/2`, sealed: what nodes wrote before `/3`. Kept so that tests can
    /// show such checkpoints still load; nothing else writes it.
    #[doc(hidden)]
    pub fn encode_checkpoint_v2(&self) -> Vec<u8> {
        let mut bytes = self.encode_body(Format::V2);
        let (head, body) = bytes.split_at_mut(MAGIC_V2.len() + 32);
        head[MAGIC_V2.len()..].copy_from_slice(hash_in(CHECKPOINT_DOMAIN, body).as_bytes());
        bytes
    }

    /// Magic, zero checksum and body in `format` (`/2` or `/3`).
    fn encode_body(&self, format: Format) -> Vec<u8> {
        // Sized up front: grown by doubling, a body of millions of offers was copied several
        // times, into fresh pages each time.
        let mut body = Vec::with_capacity(self.checkpoint_bytes_max());
        self.encode_head(format, &mut body);
        if format == Format::V3 {
            self.encode_account_chunks(&mut body);
        } else {
            self.encode_accounts(0..self.accounts.len(), &mut body);
        }
        self.encode_tail(&mut body);
        body
    }

    /// Magic, zero checksum, and the body up to the accounts (their count included).
    pub(crate) fn encode_head(&self, format: Format, body: &mut Vec<u8>) {
        body.put_bytes(if format == Format::V3 {
            MAGIC
        } else {
            MAGIC_V2
        });
        body.put_bytes(&[0; 32]);
        body.put_u64(self.height);
        body.put_bytes(self.last_header_hash.as_bytes());
        body.put_u16(self.assets as u16);
        for asset in 0..self.assets {
            body.put_u64(self.issued[asset]);
            body.put_u64(self.burned[asset]);
        }
        body.put_u32(count_u32(self.accounts.len(), ACCOUNTS_MAX, "accounts"));
    }

    /// The body after the accounts: books, market record, bridge.
    pub(crate) fn encode_tail(&self, body: &mut Vec<u8>) {
        self.encode_books(body);
        self.encode_after_books(body);
    }

    /// The books section: `open_books:u32 (pair:u32 offers:u32 (limit:u128 account:u64
    /// id:u64 amount:u64)*)*`, non-empty books in pair order, offers in key order.
    pub(crate) fn encode_books(&self, body: &mut Vec<u8>) {
        let open: Vec<(usize, OfferBook<'_>)> = (0..self.offer_tries.len())
            .map(|index| (index, self.book_at(index)))
            .filter(|(_, book)| !book.is_empty())
            .collect();
        body.put_u32(count_u32(open.len(), PAIRS_MAX, "open books"));
        for (index, book) in open {
            body.put_u32(count_u32(index, PAIRS_MAX - 1, "pair index"));
            body.put_u32(count_u32(book.len(), BOOK_OFFERS_MAX, "offers in a book"));
            for (key, amount) in book {
                crate::shared_books::put_offer(body, key, amount);
            }
        }
    }

    /// The body after the books: market record, bridge.
    pub(crate) fn encode_after_books(&self, body: &mut Vec<u8>) {
        self.market.encode(body);
        if let Some(payments) = &self.payments {
            encode_bridge(payments, body);
        }
    }

    /// At least the length of this state's checkpoint, in either format: what its buffer is
    /// allocated with. Accounts and offers are counted exactly (an account holding ten
    /// assets is 150 bytes: an estimate of 60 a piece made a checkpoint of 10M such accounts
    /// grow its buffer twice, copying ~1.8 GB into fresh pages on the block path); the
    /// smaller sections get a bound.
    pub(crate) fn checkpoint_bytes_max(&self) -> usize {
        let accounts = accounts_encoded_len(&self.accounts, 0..self.accounts.len()) as usize;
        let account_chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        let offers = self.open_offer_count();
        let head = MAGIC.len().max(MAGIC_V2.len()) + 32 + 8 + 32 + 2 + 16 * self.assets;
        let market = 8 + 32 * self.assets + 4 + 28 * self.assets * self.assets;
        let bridge = self.payments.as_ref().map_or(0, |payments| {
            BRIDGE_FIXED_BYTES_MAX + 8 * self.assets + 40 * payments.withdrawn.len()
        });
        head + 4
            + 4
            + 8 * account_chunks
            + accounts
            + 4
            + 8 * self.offer_tries.len()
            + 40 * offers
            + market
            + bridge
    }

    /// `chunk_count:u32 (chunk_bytes:u64)* chunk*` (see the module documentation).
    fn encode_account_chunks(&self, body: &mut Vec<u8>) {
        let chunks = self.accounts.len().div_ceil(ACCOUNT_CHUNK);
        body.put_u32(count_u32(chunks, ACCOUNTS_MAX, "account chunks"));
        let table = body.len();
        body.resize(table + 8 * chunks, 0);
        for chunk in 0..chunks {
            let first = chunk * ACCOUNT_CHUNK;
            let slots = first..(first + ACCOUNT_CHUNK).min(self.accounts.len());
            let start = body.len();
            self.encode_accounts(slots, body);
            let length = (body.len() - start) as u64;
            body[table + 8 * chunk..table + 8 * chunk + 8].copy_from_slice(&length.to_be_bytes());
        }
    }

    /// `(id:u64 account)*` for the accounts in `slots`.
    fn encode_accounts(&self, slots: std::ops::Range<usize>, body: &mut Vec<u8>) {
        let ids = &self.account_ids[slots.clone()];
        encode_accounts_into(&self.accounts, slots, ids, body);
    }

    /// Rebuilds a state from [`Self::encode_checkpoint`]'s bytes, tries included (on
    /// `threads` threads). The caller must still compare [`Self::state_root`] and
    /// [`Self::last_header_hash`] with the stored header of [`Self::height`].
    pub fn decode_checkpoint(
        bytes: &[u8],
        threads: usize,
    ) -> Result<ExchangeState, CheckpointError> {
        Self::decode_checkpoint_timed(bytes, threads).map(|(state, _)| state)
    }

    /// As [`Self::decode_checkpoint`], with the time each part of the load took (what a
    /// restart pays: `walras replay --time-checkpoint` prints it).
    pub fn decode_checkpoint_timed(
        bytes: &[u8],
        threads: usize,
    ) -> Result<(ExchangeState, LoadTimings), CheckpointError> {
        let mut timings = LoadTimings::default();
        let mut clock = Instant::now();
        let (format, rest) = if let Some(rest) = bytes.strip_prefix(MAGIC) {
            (Format::V3, rest)
        } else if let Some(rest) = bytes.strip_prefix(MAGIC_V2) {
            (Format::V2, rest)
        } else if let Some(rest) = bytes.strip_prefix(MAGIC_V1) {
            (Format::V1, rest)
        } else {
            return Err(CheckpointError::Magic);
        };
        let (checksum, body) = rest
            .split_first_chunk::<32>()
            .ok_or_else(|| malformed("shorter than its checksum"))?;
        let computed = match format {
            Format::V3 => piecewise_checksum(body, threads),
            Format::V1 | Format::V2 => hash_in(CHECKPOINT_DOMAIN, body),
        };
        if computed.as_bytes() != checksum {
            return Err(CheckpointError::Checksum);
        }
        timings.checksum_ms = lap(&mut clock);
        let mut reader = Reader::new(body);
        let mut state = read_state(&mut reader, format, threads, &mut timings, &mut clock)?;
        if format != Format::V1 {
            state.market = MarketPrices::decode(&mut reader, state.assets, state.height)
                .map_err(|error| malformed(&error.to_string()))?;
        }
        if !reader.is_empty() {
            state.payments = Some(read_bridge(&mut reader, state.assets)?);
        }
        reader.finish()?;
        if !state.conserves_on(threads) {
            return Err(malformed(
                "balances, offers and burns do not add up to issuance",
            ));
        }
        timings.decode_offers_ms += lap(&mut clock);
        state.build_account_trie(threads);
        timings.account_trie_ms = lap(&mut clock);
        Ok((state, timings))
    }
}

/// Milliseconds spent in each part of [`ExchangeState::decode_checkpoint_timed`]. The state
/// root (hashing every trie node not yet hashed) is the caller's next step and not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadTimings {
    /// Checking the checksum over the whole body.
    pub checksum_ms: f64,
    /// Decoding accounts, their slot map included.
    pub decode_accounts_ms: f64,
    /// Decoding the books and building the offer tries (structure only: hashing waits for
    /// the state root), the market record, bridge and conservation check.
    pub decode_offers_ms: f64,
    /// Building the account trie (encoding each account; structure only).
    pub account_trie_ms: f64,
}

/// Milliseconds since `clock`, which restarts.
fn lap(clock: &mut Instant) -> f64 {
    let now = Instant::now();
    let elapsed = now.duration_since(*clock).as_secs_f64() * 1e3;
    *clock = now;
    elapsed
}

/// Writes the checksum of [`ExchangeState::encode_checkpoint_unsealed`]'s bytes into them.
///
/// # Panics
/// On bytes that do not start with this format's magic and checksum space.
pub fn seal_checkpoint(bytes: &mut [u8]) {
    assert!(
        bytes.starts_with(MAGIC) && bytes.len() >= MAGIC.len() + 32,
        "not unsealed checkpoint bytes"
    );
    let (head, body) = bytes.split_at_mut(MAGIC.len() + 32);
    head[MAGIC.len()..].copy_from_slice(piecewise_checksum(body, 1).as_bytes());
}

/// The `/3` checksum: `H_ckpt(body_len ‖ H_ckpt_piece(piece)*)`, the pieces hashed on
/// `threads` threads. The same for any thread count.
fn piecewise_checksum(body: &[u8], threads: usize) -> Hash {
    let pieces: Vec<&[u8]> = body.chunks(CHECKSUM_PIECE_BYTES).collect();
    // Four pieces per task: they are hashed together on SIMD lanes (`hash_in_each`).
    let groups: Vec<&[&[u8]]> = pieces.chunks(CHECKSUM_PIECES_TOGETHER).collect();
    let group_hashes = walras_par::map_in_order(&groups, threads, 2, |group| {
        let mut hashes = [Hash::default(); CHECKSUM_PIECES_TOGETHER];
        hash_in_each(CHECKPOINT_PIECE_DOMAIN, group, &mut hashes[..group.len()]);
        hashes
    });
    let piece_hashes = group_hashes.iter().flatten().take(pieces.len());
    let mut hasher = Hasher::new(CHECKPOINT_DOMAIN);
    hasher.update(&(body.len() as u64).to_be_bytes());
    for piece_hash in piece_hashes {
        hasher.update(piece_hash.as_bytes());
    }
    hasher.finalize()
}

/// Checksum pieces hashed together: the SIMD lanes of BLAKE2b's compression on AVX2.
const CHECKSUM_PIECES_TOGETHER: usize = 4;

/// Pair books a state has: one per ordered pair of assets (`sell * assets + buy`).
pub(crate) const PAIRS_MAX: usize = MAX_ASSETS * MAX_ASSETS;
/// Resting offers one book may hold in a checkpoint: its count is a `u32`. (Memory runs out
/// long before: a resting offer takes more than 100 bytes across the book and its trie.)
pub(crate) const BOOK_OFFERS_MAX: usize = u32::MAX as usize;
const _: () = assert!(PAIRS_MAX <= u32::MAX as usize);
const _: () = assert!(ACCOUNTS_MAX <= u32::MAX as usize);

/// `count` as the checkpoint's 4-byte field, asserting it is within `max` (a named limit that
/// fits a `u32`): a count that wrapped would make a checkpoint recovery refuses.
pub(crate) fn count_u32(count: usize, max: usize, what: &str) -> u32 {
    assert!(
        count <= max,
        "{count} {what}: over the checkpoint's limit {max}"
    );
    let Ok(count) = u32::try_from(count) else {
        panic!("{count} {what}: over u32");
    };
    count
}

fn malformed(reason: &str) -> CheckpointError {
    CheckpointError::Malformed(reason.to_string())
}

fn read_state(
    reader: &mut Reader<'_>,
    format: Format,
    threads: usize,
    timings: &mut LoadTimings,
    clock: &mut Instant,
) -> Result<ExchangeState, CheckpointError> {
    let height = reader.u64()?;
    let last_header_hash = Hash(reader.array::<32>()?);
    let assets = reader.u16()? as usize;
    if !(1..=MAX_ASSETS).contains(&assets) {
        return Err(malformed(&format!("{assets} assets")));
    }
    let mut issued = Vec::with_capacity(assets);
    let mut burned = Vec::with_capacity(assets);
    for _ in 0..assets {
        issued.push(reader.u64()?);
        burned.push(reader.u64()?);
    }
    let (accounts, account_ids) = match format {
        Format::V3 => read_account_chunks(reader, assets, threads)?,
        Format::V1 | Format::V2 => read_accounts(reader, assets)?,
    };
    let slots = slot_index(&account_ids, threads)?;
    timings.decode_accounts_ms = lap(clock);
    let offer_tries = read_books(reader, assets, &slots, threads)?;
    timings.decode_offers_ms = lap(clock);
    Ok(ExchangeState {
        assets,
        accounts,
        account_ids,
        slots,
        issued,
        burned,
        height,
        last_header_hash,
        account_trie: Trie::new(),
        offer_tries,
        payments: None,
        market: MarketPrices::new(assets, height),
        carried: Default::default(),
        draft_memory: Default::default(),
        last_writes: Default::default(),
    })
}

/// The bridge section (see the module documentation).
fn encode_bridge(payments: &PaymentsBridge, body: &mut Vec<u8>) {
    let genesis = payments.genesis();
    body.put_u8(BRIDGE_TAG);
    body.put_u64(genesis.chain_id);
    body.put_u64(genesis.epoch);
    body.put_u32(genesis.shards);
    assert!(genesis.validators.len() <= PAYMENTS_VALIDATORS_MAX);
    body.put_u16(genesis.validators.len() as u16);
    for validator in &genesis.validators {
        body.put_bytes(&validator.key);
        body.put_bytes(&validator.bls_key);
        body.put_bytes(&validator.bls_proof);
    }
    for escrow in &payments.escrow {
        body.put_u64(*escrow);
    }
    body.put_u64(payments.withdrawn.len() as u64);
    for (id, height) in payments.withdrawn.iter() {
        body.put_bytes(id);
        body.put_bytes(height);
    }
}

/// The tag before the bridge section.
const BRIDGE_TAG: u8 = 1;

/// The bridge section's bytes besides its escrow and withdrawals, at most: tag, genesis
/// (chain, epoch, shards, validator count) and each validator's keys and proof, generously.
const BRIDGE_FIXED_BYTES_MAX: usize = 1 + 8 + 8 + 4 + 2 + 8 + PAYMENTS_VALIDATORS_MAX * 512;

fn read_bridge(reader: &mut Reader<'_>, assets: usize) -> Result<PaymentsBridge, CheckpointError> {
    if reader.u8()? != BRIDGE_TAG {
        return Err(malformed("unknown section after the books"));
    }
    let chain_id = reader.u64()?;
    let epoch = reader.u64()?;
    let shards = reader.u32()?;
    let count = reader.u16()? as usize;
    if count == 0 || count > PAYMENTS_VALIDATORS_MAX || shards == 0 {
        return Err(malformed(&format!(
            "payments committee of {count} validators, {shards} shards"
        )));
    }
    let mut validators = Vec::with_capacity(count);
    for _ in 0..count {
        validators.push(PaymentsValidator {
            key: reader.array()?,
            bls_key: reader.array()?,
            bls_proof: reader.array()?,
        });
    }
    let genesis = PaymentsGenesis {
        chain_id,
        epoch,
        shards,
        validators,
    };
    let mut bridge = PaymentsBridge::new(&genesis, assets)
        .map_err(|error| malformed(&format!("payments committee: {error}")))?;
    for asset in 0..assets {
        bridge.escrow[asset] = reader.u64()?;
    }
    let withdrawn = reader.u64()?;
    let mut previous: Option<[u8; 32]> = None;
    let mut batch = Vec::with_capacity(reader.capacity(withdrawn, 40));
    for _ in 0..withdrawn {
        let id = reader.array::<32>()?;
        let height = reader.array::<8>()?;
        if previous.is_some_and(|previous| previous >= id) {
            return Err(malformed("withdrawn output ids out of order"));
        }
        previous = Some(id);
        batch.push((id, height));
    }
    bridge.withdrawn.insert_batch(batch, 1);
    Ok(bridge)
}

type DecodedAccounts = (Accounts, Vec<AccountId>);

/// The fewest bytes an account takes: id, key, sequence number, balance count.
const ACCOUNT_BYTES_MIN: usize = 8 + 32 + 8 + 2;

/// `/1` and `/2`: `account_count:u32 (id:u64 account)*`.
fn read_accounts(
    reader: &mut Reader<'_>,
    assets: usize,
) -> Result<DecodedAccounts, CheckpointError> {
    let count = reader.u32()? as usize;
    read_account_run(reader, count, assets)
}

/// `count` accounts of `(id:u64 account)*`.
fn read_account_run(
    reader: &mut Reader<'_>,
    count: usize,
    assets: usize,
) -> Result<DecodedAccounts, CheckpointError> {
    // Never reserve more than the input can hold.
    let capacity = reader.capacity(count as u64, ACCOUNT_BYTES_MIN);
    let mut accounts = Vec::with_capacity(capacity);
    let mut account_ids = Vec::with_capacity(capacity);
    for _ in 0..count {
        let id = AccountId(reader.u64()?);
        accounts.push(read_account(reader, id, assets)?);
        account_ids.push(id);
    }
    Ok((Accounts::from_vec(accounts), account_ids))
}

/// `/3`: `account_count:u32 chunk_count:u32 (chunk_bytes:u64)* chunk*`, the chunks decoded
/// on `threads` threads.
fn read_account_chunks(
    reader: &mut Reader<'_>,
    assets: usize,
    threads: usize,
) -> Result<DecodedAccounts, CheckpointError> {
    let count = reader.u32()? as usize;
    let chunk_count = reader.u32()? as usize;
    if chunk_count != count.div_ceil(ACCOUNT_CHUNK) {
        return Err(malformed(&format!(
            "{chunk_count} account chunks for {count} accounts"
        )));
    }
    reader.ensure_items(chunk_count, 8)?;
    let mut lengths = Vec::with_capacity(chunk_count);
    for _ in 0..chunk_count {
        lengths.push(reader.u64()?);
    }
    let mut chunks: Vec<&[u8]> = Vec::with_capacity(chunk_count);
    for (chunk, length) in lengths.into_iter().enumerate() {
        let length = usize::try_from(length).map_err(|_| malformed("account chunk length"))?;
        let accounts = (count - chunk * ACCOUNT_CHUNK).min(ACCOUNT_CHUNK);
        // Checked before anything is allocated for the accounts: a count the bytes cannot
        // hold is refused, not reserved.
        if length < accounts * ACCOUNT_BYTES_MIN {
            return Err(malformed(&format!(
                "account chunk {chunk} of {length} bytes for {accounts} accounts"
            )));
        }
        chunks.push(reader.take(length)?);
    }
    // Decoded on the threads that first touch them: each chunk's ids in place, its accounts
    // into the table's shared chunks (a whole number of them per checkpoint chunk).
    let mut account_ids = walras_par::filled(count, threads, || AccountId(0));
    let work: Vec<_> = account_ids.chunks_mut(ACCOUNT_CHUNK).zip(chunks).collect();
    assert_eq!(work.len(), chunk_count, "one slice of slots per chunk");
    let decoded = walras_par::run_each(work, threads, |(ids, bytes)| {
        let mut chunk_reader = Reader::new(bytes);
        let mut table_chunks: Vec<Vec<Account>> =
            Vec::with_capacity(ids.len().div_ceil(CHUNK_ACCOUNTS));
        for ids in ids.chunks_mut(CHUNK_ACCOUNTS) {
            let mut table_chunk = Vec::with_capacity(CHUNK_ACCOUNTS);
            for id in ids {
                *id = AccountId(chunk_reader.u64()?);
                table_chunk.push(read_account(&mut chunk_reader, *id, assets)?);
            }
            table_chunks.push(table_chunk);
        }
        chunk_reader.finish()?;
        Ok::<_, CheckpointError>(table_chunks)
    });
    let mut table_chunks = Vec::with_capacity(count.div_ceil(CHUNK_ACCOUNTS));
    for chunk in decoded {
        table_chunks.extend(chunk?);
    }
    Ok((Accounts::from_chunks(table_chunks), account_ids))
}

/// One account after its id: `public_key[32] last_sequence:u64 count:u16 (asset:u16
/// amount:u64)*`, balances ascending by asset and non-zero.
fn read_account(
    reader: &mut Reader<'_>,
    id: AccountId,
    assets: usize,
) -> Result<Account, CheckpointError> {
    let public_key = reader.array::<32>()?;
    let last_sequence = reader.u64()?;
    let balance_count = reader.u16()? as usize;
    let mut balances = Balances::with_capacity(balance_count.min(assets));
    for _ in 0..balance_count {
        let asset = reader.u16()?;
        let amount = reader.u64()?;
        let ascending = balances
            .last()
            .is_none_or(|(last, _): &(AssetId, u64)| last.0 < asset);
        if asset as usize >= assets || amount == 0 || !ascending {
            return Err(malformed(&format!("account {} balances", id.0)));
        }
        balances.push((AssetId(asset), amount));
    }
    Ok(Account::from_checked(public_key, last_sequence, balances))
}

/// Each account's slot by id (its position), refusing an id given twice or a slot past the cap.
fn slot_index(account_ids: &[AccountId], threads: usize) -> Result<SlotIndex, CheckpointError> {
    if new_slot(account_ids.len().saturating_sub(1), ACCOUNTS_MAX).is_none() {
        return Err(malformed(&format!("more than {ACCOUNTS_MAX} accounts")));
    }
    SlotIndex::from_ids(account_ids, threads)
        .map_err(|id| malformed(&format!("account {} twice", id.0)))
}

/// The books section: pair headers read in turn (an offer is [`OFFER_BYTES`], so each pair's
/// bytes are found from its count), then the pairs decoded on `threads` threads.
fn read_books(
    reader: &mut Reader<'_>,
    assets: usize,
    slots: &SlotIndex,
    threads: usize,
) -> Result<Vec<OfferTrie>, CheckpointError> {
    let pairs = assets * assets;
    let pair_count = reader.u32()?;
    let mut previous: Option<usize> = None;
    let mut open: Vec<(usize, &[u8])> = Vec::with_capacity(reader.capacity(pair_count.into(), 8));
    for _ in 0..pair_count {
        let index = reader.u32()? as usize;
        let (sell, buy) = (index / assets, index % assets);
        if index >= pairs || sell == buy || previous.is_some_and(|previous| previous >= index) {
            return Err(malformed(&format!("pair index {index}")));
        }
        previous = Some(index);
        let offer_count = reader.u32()? as usize;
        reader.ensure_items(offer_count, OFFER_BYTES)?;
        open.push((index, reader.take(offer_count * OFFER_BYTES)?));
    }
    // Pairs differ in size by orders of magnitude: each is a task of its own (rayon splits
    // the list as threads go idle), so that the largest do not end up queued behind each other
    // on one thread while the others wait (at 10M offers, the last second of the decode ran on
    // one of two threads when the list went in eight fixed pieces).
    let decoded = walras_par::map_owned_in_order(open, threads, 2, |(index, bytes)| {
        (index, read_book(index, bytes))
    });
    let mut tries: Vec<OfferTrie> = (0..pairs).map(|_| Trie::new()).collect();
    let mut accounts = Vec::with_capacity(decoded.len());
    for (index, book) in decoded {
        let (trie, book_accounts) = book?;
        tries[index] = trie;
        accounts.push(book_accounts);
    }
    // Every offer's account exists: looked up shard by shard rather than offer by offer (at
    // 10M accounts a lookup in offer order missed the cache two or three times: 1 s of a
    // restart at 10M open offers).
    if let Some(unknown) = slots.first_missing(accounts, threads) {
        return Err(malformed(&format!(
            "an offer of account {}, which the checkpoint does not hold",
            unknown.0
        )));
    }
    Ok(tries)
}

/// One pair's offers, strictly ascending in canonical order (as written), each of a non-zero
/// amount: its offer trie, and the offers' accounts (for the caller to check they exist).
fn read_book(index: usize, bytes: &[u8]) -> Result<(OfferTrie, Vec<AccountId>), CheckpointError> {
    let mut reader = Reader::new(bytes);
    let mut batch = Vec::with_capacity(bytes.len() / OFFER_BYTES);
    let mut accounts = Vec::with_capacity(bytes.len() / OFFER_BYTES);
    let mut last: Option<OfferKey> = None;
    while !reader.is_empty() {
        let key = OfferKey {
            min_price: Price(reader.u128()?),
            account: AccountId(reader.u64()?),
            id: OfferId(reader.u64()?),
        };
        let amount = reader.u64()?;
        if amount == 0 {
            return Err(malformed(&format!(
                "offer {} of pair {index} with nothing left",
                key.id.0
            )));
        }
        if last.is_some_and(|last| last >= key) {
            return Err(malformed(&format!(
                "offer {} of pair {index} out of order or twice",
                key.id.0
            )));
        }
        last = Some(key);
        accounts.push(key.account);
        batch.push((offer_trie_key(&key), amount.to_be_bytes()));
    }
    let mut trie = Trie::new();
    trie.insert_batch(batch, 1);
    Ok((trie, accounts))
}

/// `(id:u64 account)*` for the accounts of `accounts` in `slots`, whose ids are `ids` (one
/// per slot): a checkpoint's account bytes, written by the whole encoding and by a draft's
/// assembly alike.
pub(crate) fn encode_accounts_into(
    accounts: &Accounts,
    slots: std::ops::Range<usize>,
    ids: &[AccountId],
    body: &mut Vec<u8>,
) {
    debug_assert_eq!(slots.len(), ids.len(), "one id per account");
    for (slot, id) in slots.zip(ids) {
        body.put_u64(id.0);
        accounts[slot].encode_into(body);
    }
}

/// The bytes [`encode_accounts_into`] writes for the accounts in `slots`.
pub(crate) fn accounts_encoded_len(accounts: &Accounts, slots: std::ops::Range<usize>) -> u64 {
    slots
        .map(|slot| 8 + accounts[slot].encoded_len() as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `/3` checksum as the format defines it, one piece after another.
    fn checksum_by_definition(body: &[u8]) -> Hash {
        let mut hasher = Hasher::new(CHECKPOINT_DOMAIN);
        hasher.update(&(body.len() as u64).to_be_bytes());
        for piece in body.chunks(CHECKSUM_PIECE_BYTES) {
            hasher.update(hash_in(CHECKPOINT_PIECE_DOMAIN, piece).as_bytes());
        }
        hasher.finalize()
    }

    /// Trigger: a profile of a solo node of 10M accounts holding ten assets each
    /// (2026-11-28) showed its block path growing the checkpoint's buffer (a `realloc`'s copy
    /// into fresh pages, 12% of the producer's samples, beside the encoding's own 18%). The
    /// buffer was sized at 60 bytes an account, an account of ten assets encodes in 150 with
    /// its id, so the body outgrew it twice. The buffer now holds the whole checkpoint from
    /// the start. (The encoding under the state's lock remains, and with it a stall of
    /// about a second at each checkpoint at that size.)
    #[test]
    fn a_checkpoint_of_accounts_holding_many_assets_fits_the_buffer_it_starts_in() {
        use walras_types::{AccountId, AssetId, Genesis, GenesisAccount, Offer, OfferId, Price};
        let assets = 10u16;
        let genesis = Genesis {
            asset_info: Vec::new(),
            payments: None,
            assets,
            accounts: (0..3_000u64)
                .map(|id| GenesisAccount {
                    id: AccountId(id),
                    public_key: [(id % 251) as u8; 32],
                    balances: (0..assets)
                        .map(|asset| (AssetId(asset), 1_000_000))
                        .collect(),
                })
                .collect(),
        };
        let offers = (0..2_000u64)
            .map(|id| Offer {
                id: OfferId(id),
                account: AccountId(id % 3_000),
                sell: AssetId((id % 10) as u16),
                buy: AssetId(((id + 1 + id / 10 % 9) % 10) as u16),
                amount: 1 + id,
                min_price: Price::from_f64(0.5 + (id % 97) as f64 / 97.0),
            })
            .collect();
        let state = ExchangeState::from_genesis_with_resting_offers(&genesis, offers, 1)
            .expect("a valid genesis");
        for format in [Format::V3, Format::V2] {
            let body = state.encode_body(format);
            assert!(
                body.len() <= state.checkpoint_bytes_max(),
                "{format:?}: {} bytes, buffer {}",
                body.len(),
                state.checkpoint_bytes_max()
            );
        }
    }

    /// Pieces hashed four at a time, on any thread count, give the checksum the format
    /// defines: checkpoints written before stay readable. Sizes cover no piece, one short
    /// piece, exact multiples, and a last group of one, two and three pieces.
    #[test]
    fn the_checksum_hashed_in_groups_is_the_one_the_format_defines() {
        let body: Vec<u8> = (0..7 * CHECKSUM_PIECE_BYTES + 5)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for len in [
            0,
            1,
            CHECKSUM_PIECE_BYTES,
            CHECKSUM_PIECE_BYTES + 1,
            3 * CHECKSUM_PIECE_BYTES - 1,
            4 * CHECKSUM_PIECE_BYTES,
            5 * CHECKSUM_PIECE_BYTES + 3,
            body.len(),
        ] {
            let expected = checksum_by_definition(&body[..len]);
            for threads in [1, 2, 3] {
                assert_eq!(
                    piecewise_checksum(&body[..len], threads),
                    expected,
                    "{len} bytes, {threads} threads"
                );
            }
        }
    }
}
