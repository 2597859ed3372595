//! A checkpoint: the whole [`ExchangeState`] as bytes, so a node restarts from it instead of
//! replaying every block since genesis.
//!
//! The tries are not stored: decoding rebuilds them from the accounts and offers (O(state)), and
//! whoever loads a checkpoint must compare the rebuilt state root with the root its block header
//! committed to ([`ExchangeState::state_root`]). A checksum over the body catches torn or
//! flipped bytes before anything is decoded.
//!
//! Format, big-endian:
//! `magic "walras-checkpoint/2" ‖ checksum[32] ‖ body`, where the checksum is
//! `H_ckpt(body)` (domain `walras/ckpt`) and the body is
//! `height:u64 last_header_hash[32] assets:u16 (issued:u64 burned:u64)*assets
//! account_count:u32 (id:u64 account)*` (each account as [`Account::encode`], in slot order)
//! `pair_count:u32 (pair_index:u32 offer_count:u32 (min_price:u128 account:u64 id:u64
//! amount:u64)*)*` (pairs with open offers, in pair order; offers in canonical order), then
//! the market record of last traded prices ([`MarketPrices::encode`]; absent in format `/1`,
//! which is still read, the record then starting empty at the checkpoint's height),
//! followed, only on an exchange bridged to a payments lane, by `0x01 chain_id:u64 epoch:u64
//! shards:u32 validator_count:u16 (key[32] bls_key[48] bls_proof[96])* (escrow:u64)*assets
//! withdrawn_count:u64 (output_id[32] height:u64)*` (withdrawn ids ascending). The committee's
//! proofs of possession are checked again when the section is decoded.

use crate::account::Account;
use crate::bridge::PaymentsBridge;
use crate::market::MarketPrices;
use crate::state::{
    all_slots, new_slot, offer_trie_key, ExchangeState, SlotMap, ACCOUNTS_MAX, OFFER_KEY_BYTES,
};
use std::collections::BTreeMap;
use std::time::Instant;
use walras_crypto::{hash_in, Domain, Hash};
use walras_trie::Trie;
use walras_types::codec::{self, Reader, Writer};
use walras_types::{
    AccountId, AssetId, OfferId, OfferKey, PaymentsGenesis, PaymentsValidator, Price, MAX_ASSETS,
    PAYMENTS_VALIDATORS_MAX,
};

/// Hash domain of the checkpoint checksum.
pub const CHECKPOINT_DOMAIN: Domain = Domain::new("walras/ckpt");
const MAGIC: &[u8] = b"walras-checkpoint/2";
/// The format before the market record: still read, with an empty record from its height.
const MAGIC_V1: &[u8] = b"walras-checkpoint/1";

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
        let mut body = Vec::with_capacity(MAGIC.len() + 32 + 64 + 60 * self.accounts.len());
        body.put_bytes(MAGIC);
        body.put_bytes(&[0; 32]);
        body.put_u64(self.height);
        body.put_bytes(self.last_header_hash.as_bytes());
        body.put_u16(self.assets as u16);
        for asset in 0..self.assets {
            body.put_u64(self.issued[asset]);
            body.put_u64(self.burned[asset]);
        }
        body.put_u32(count_u32(self.accounts.len(), ACCOUNTS_MAX, "accounts"));
        for (id, account) in self.account_ids.iter().zip(&self.accounts) {
            body.put_u64(id.0);
            body.put_bytes(&account.encode());
        }
        let open: Vec<(usize, &BTreeMap<OfferKey, u64>)> = self
            .books
            .iter()
            .enumerate()
            .filter(|(_, book)| !book.is_empty())
            .collect();
        body.put_u32(count_u32(open.len(), PAIRS_MAX, "open books"));
        for (index, book) in open {
            body.put_u32(count_u32(index, PAIRS_MAX - 1, "pair index"));
            body.put_u32(count_u32(book.len(), BOOK_OFFERS_MAX, "offers in a book"));
            for (key, amount) in book {
                body.put_u128(key.min_price.0);
                body.put_u64(key.account.0);
                body.put_u64(key.id.0);
                body.put_u64(*amount);
            }
        }
        self.market.encode(&mut body);
        if let Some(payments) = &self.payments {
            encode_bridge(payments, &mut body);
        }
        body
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
        let (rest, with_market) = match bytes.strip_prefix(MAGIC) {
            Some(rest) => (rest, true),
            None => (
                bytes.strip_prefix(MAGIC_V1).ok_or(CheckpointError::Magic)?,
                false,
            ),
        };
        let (checksum, body) = rest
            .split_first_chunk::<32>()
            .ok_or_else(|| malformed("shorter than its checksum"))?;
        if hash_in(CHECKPOINT_DOMAIN, body).as_bytes() != checksum {
            return Err(CheckpointError::Checksum);
        }
        timings.checksum_ms = lap(&mut clock);
        let mut reader = Reader::new(body);
        let mut state = read_state(&mut reader, &mut timings, &mut clock)?;
        if with_market {
            state.market = MarketPrices::decode(&mut reader, state.assets, state.height)
                .map_err(|error| malformed(&error.to_string()))?;
        }
        if !reader.is_empty() {
            state.payments = Some(read_bridge(&mut reader, state.assets)?);
        }
        reader.finish()?;
        let accounted = state.accounted();
        let issued = state.issued.iter().map(|issued| *issued as u128);
        if !accounted.iter().copied().eq(issued) {
            return Err(malformed(
                "balances, offers and burns do not add up to issuance",
            ));
        }
        timings.decode_offers_ms += lap(&mut clock);
        let all = all_slots(state.accounts.len());
        state.commit_accounts(&all, threads);
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
    /// Decoding the books (and the market record, bridge and conservation check).
    pub decode_offers_ms: f64,
    /// Building the offer tries (structure only: hashing waits for the state root).
    pub offer_tries_ms: f64,
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
    head[MAGIC.len()..].copy_from_slice(hash_in(CHECKPOINT_DOMAIN, body).as_bytes());
}

/// Pair books a state has: one per ordered pair of assets (`sell * assets + buy`).
const PAIRS_MAX: usize = MAX_ASSETS * MAX_ASSETS;
/// Resting offers one book may hold in a checkpoint: its count is a `u32`. (Memory runs out
/// long before: a resting offer takes more than 100 bytes across the book and its trie.)
const BOOK_OFFERS_MAX: usize = u32::MAX as usize;
const _: () = assert!(PAIRS_MAX <= u32::MAX as usize);
const _: () = assert!(ACCOUNTS_MAX <= u32::MAX as usize);

/// `count` as the checkpoint's 4-byte field, asserting it is within `max` (a named limit that
/// fits a `u32`): a count that wrapped would make a checkpoint recovery refuses.
fn count_u32(count: usize, max: usize, what: &str) -> u32 {
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
    let (accounts, account_ids, slots) = read_accounts(reader, assets)?;
    timings.decode_accounts_ms = lap(clock);
    let (books, offer_tries) = read_books(reader, assets, &slots, timings)?;
    timings.decode_offers_ms = lap(clock) - timings.offer_tries_ms;
    Ok(ExchangeState {
        assets,
        accounts,
        account_ids,
        slots,
        books,
        issued,
        burned,
        height,
        last_header_hash,
        account_trie: Trie::new(),
        offer_tries,
        payments: None,
        market: MarketPrices::new(assets, height),
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

type Accounts = (Vec<Account>, Vec<AccountId>, SlotMap);

fn read_accounts(reader: &mut Reader<'_>, assets: usize) -> Result<Accounts, CheckpointError> {
    let count = reader.u32()? as usize;
    // Each account takes at least 50 bytes: never reserve more than the input can hold.
    let capacity = reader.capacity(count as u64, 50);
    let mut accounts = Vec::with_capacity(capacity);
    let mut account_ids = Vec::with_capacity(capacity);
    let mut slots = SlotMap::default();
    slots.reserve(capacity);
    for slot in 0..count {
        let id = AccountId(reader.u64()?);
        let public_key = reader.array::<32>()?;
        let last_sequence = reader.u64()?;
        let balance_count = reader.u16()? as usize;
        let mut balances = Vec::with_capacity(balance_count.min(assets));
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
        let Some(slot) = new_slot(slot, ACCOUNTS_MAX) else {
            return Err(malformed(&format!("more than {ACCOUNTS_MAX} accounts")));
        };
        if slots.insert(id, slot).is_some() {
            return Err(malformed(&format!("account {} twice", id.0)));
        }
        let mut account = Account::new(public_key, balances);
        account.last_sequence = last_sequence;
        accounts.push(account);
        account_ids.push(id);
    }
    Ok((accounts, account_ids, slots))
}

type Books = (
    Vec<BTreeMap<OfferKey, u64>>,
    Vec<Trie<OFFER_KEY_BYTES, [u8; 8]>>,
);

fn read_books(
    reader: &mut Reader<'_>,
    assets: usize,
    slots: &SlotMap,
    timings: &mut LoadTimings,
) -> Result<Books, CheckpointError> {
    let pairs = assets * assets;
    let mut books = vec![BTreeMap::new(); pairs];
    let mut tries: Vec<Trie<OFFER_KEY_BYTES, [u8; 8]>> = (0..pairs).map(|_| Trie::new()).collect();
    let pair_count = reader.u32()?;
    let mut previous: Option<usize> = None;
    for _ in 0..pair_count {
        let index = reader.u32()? as usize;
        let (sell, buy) = (index / assets, index % assets);
        if index >= pairs || sell == buy || previous.is_some_and(|previous| previous >= index) {
            return Err(malformed(&format!("pair index {index}")));
        }
        previous = Some(index);
        let offer_count = reader.u32()?;
        let mut batch = Vec::with_capacity(reader.capacity(offer_count.into(), 48));
        for _ in 0..offer_count {
            let key = OfferKey {
                min_price: Price(reader.u128()?),
                account: AccountId(reader.u64()?),
                id: OfferId(reader.u64()?),
            };
            let amount = reader.u64()?;
            if amount == 0 || !slots.contains_key(&key.account) {
                return Err(malformed(&format!("offer {} of pair {index}", key.id.0)));
            }
            if books[index].insert(key, amount).is_some() {
                return Err(malformed(&format!("offer {} twice", key.id.0)));
            }
            batch.push((offer_trie_key(&key), amount.to_be_bytes()));
        }
        let building = Instant::now();
        tries[index].insert_batch(batch, 1);
        timings.offer_tries_ms += building.elapsed().as_secs_f64() * 1e3;
    }
    Ok((books, tries))
}
