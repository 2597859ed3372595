//! The genesis state: which accounts exist at block 0, their keys and their balances.
//!
//! Every genesis account starts with sequence number 0 (its first transaction may use 1..=64) and
//! no open offers. Issuance happens only here: an asset's total supply is the sum of its genesis
//! balances and is at most [`MAX_AMOUNT`], which keeps every per-asset sum in a `u64`.
//!
//! Encoding (big-endian throughout):
//!
//! ```text
//! genesis := magic:"WALRASG1" assets:u16 account_count:u64 account{account_count}
//! account := id:u64 public_key:[32] balance_count:u16 balance{balance_count}
//! balance := asset:u16 amount:u64
//! ```
//!
//! Decoding accepts exactly the canonical form and nothing else: accounts strictly increasing by
//! id, each account's balances strictly increasing by asset, every asset below `assets`, every
//! amount positive, every asset's total at most [`MAX_AMOUNT`], no trailing bytes. So every
//! decoded genesis re-encodes to the bytes it came from, and two files describe the same state
//! exactly when they are byte-equal.
//!
//! A genesis that also names the fast-payments committee (the exchange checks withdrawal
//! certificates against it) starts with `"WALRASG2"` instead and appends, after the accounts:
//!
//! ```text
//! payments  := chain_id:u64 epoch:u64 shards:u32 validator_count:u16 validator{validator_count}
//! validator := key:[32] bls_key:[48] bls_proof_of_possession:[96]
//! ```
//!
//! A genesis without a committee encodes exactly as before (`"WALRASG1"`), so its bytes and
//! hash do not change.
//!
//! A genesis that names its assets (a symbol and the decimals of one token, for people: amounts
//! and prices stay integers of base units) starts with `"WALRASG3"`: the asset table follows the
//! asset count, and a flag says whether the committee section follows the accounts:
//!
//! ```text
//! genesis := magic:"WALRASG3" assets:u16 asset{assets} account_count:u64 account{account_count}
//!            has_payments:u8 payments?
//! asset   := symbol_len:u8 symbol:[symbol_len] decimals:u8
//! ```
//!
//! Symbols are 1..=16 characters of `A-Z 0-9 . _ -`, unique; decimals at most 18 (a token of
//! 10^18 base units still fits a `u64`). A genesis without names encodes as `"WALRASG1"` or
//! `"WALRASG2"` as before.
//!
//! Public keys are stored as bytes: whether they are valid ed25519 points is checked by whoever
//! verifies signatures (this crate knows no cryptography).

use crate::codec::{self, Reader, Writer};
use crate::{AccountId, AssetId, MAX_AMOUNT, MAX_ASSETS};

/// The first bytes of every encoded genesis (format name and version).
pub const GENESIS_MAGIC: [u8; 8] = *b"WALRASG1";

/// The first bytes of a genesis that carries a payments committee.
pub const GENESIS_MAGIC_PAYMENTS: [u8; 8] = *b"WALRASG2";

/// The first bytes of a genesis that names its assets (and may carry a committee).
pub const GENESIS_MAGIC_NAMED: [u8; 8] = *b"WALRASG3";

/// Longest asset symbol, in bytes.
pub const ASSET_SYMBOL_LEN_MAX: usize = 16;

/// Most decimals of an asset: one token of 10^18 base units still fits a `u64`.
pub const ASSET_DECIMALS_MAX: u8 = 18;

/// Most validators of a payments committee: a withdrawal certificate names its signers in a
/// 128-bit bitmap, so that it has one fixed size inside a transaction.
pub const PAYMENTS_VALIDATORS_MAX: usize = 128;

/// Bytes of one payments validator: ed25519 key, BLS key, BLS proof of possession.
const PAYMENTS_VALIDATOR_BYTES: usize = 32 + 48 + 96;

/// Bytes of an account with no balances: id, public key, balance count.
const ACCOUNT_HEADER_BYTES: usize = 8 + 32 + 2;
/// Bytes of one balance: asset and amount.
const BALANCE_BYTES: usize = 2 + 8;

/// One account of the genesis state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GenesisAccount {
    pub id: AccountId,
    /// The ed25519 public key that signs for the account.
    pub public_key: [u8; 32],
    /// Balances, sorted by asset, every amount positive.
    pub balances: Vec<(AssetId, u64)>,
}

/// One validator of the fast-payments committee, as the exchange knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PaymentsValidator {
    /// Its ed25519 key (the key of `committee.json`; shard votes are signed with it).
    pub key: [u8; 32],
    /// Its BLS12-381 public key (compressed G1): withdrawal certificates aggregate these.
    pub bls_key: [u8; 48],
    /// Its BLS signature of `bls_key` (proof of possession, against rogue-key aggregates);
    /// checked once when the exchange loads the genesis.
    pub bls_proof: [u8; 96],
}

/// The fast-payments committee stored in exchange state: every node checks withdrawals
/// against exactly this.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PaymentsGenesis {
    pub chain_id: u64,
    pub epoch: u64,
    /// Shards per validator (the payments lane's routing; not used by the exchange's check).
    pub shards: u32,
    /// Validator `i` of the committee (its index in a certificate's signer bitmap).
    pub validators: Vec<PaymentsValidator>,
}

/// What people call an asset: its symbol and how many base units make one token
/// (`10^decimals`). Display only: every amount and price in state and blocks is in base units.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AssetInfo {
    pub symbol: String,
    pub decimals: u8,
}

/// The state before the first block.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Genesis {
    /// Number of assets: ids 0..assets.
    pub assets: u16,
    /// Names of the assets, in asset order: empty (unnamed: shown as `A0`, `A1`, ...) or one
    /// entry per asset.
    pub asset_info: Vec<AssetInfo>,
    /// Accounts, sorted by id, ids unique.
    pub accounts: Vec<GenesisAccount>,
    /// The fast-payments committee, if this exchange bridges to a payments lane.
    pub payments: Option<PaymentsGenesis>,
}

/// Why a genesis is not acceptable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GenesisError {
    /// The bytes do not start with [`GENESIS_MAGIC`].
    #[error("not a Walras genesis file: it does not start with \"WALRASG1\", \"WALRASG2\" or \"WALRASG3\"")]
    BadMagic,
    /// The asset table does not list exactly one entry per asset.
    #[error("the genesis names {named} assets but has {assets}; name every asset or none")]
    AssetTableSize { named: usize, assets: u16 },
    /// A symbol that is empty, too long, not of `A-Z 0-9 . _ -`, or listed twice.
    #[error(
        "asset {asset}'s symbol {symbol:?} is not acceptable: use 1..={max} characters of A-Z 0-9 . _ - and give each asset its own",
        max = ASSET_SYMBOL_LEN_MAX
    )]
    AssetSymbol { asset: u16, symbol: String },
    #[error("asset {asset} ({symbol}) has {decimals} decimals; at most {max}", max = ASSET_DECIMALS_MAX)]
    AssetDecimals {
        asset: u16,
        symbol: String,
        decimals: u8,
    },
    /// The committee flag of a named genesis is neither 0 nor 1.
    #[error("the genesis's committee flag is {0}; expected 0 or 1")]
    PaymentsFlag(u8),
    /// Truncated or trailing bytes: a file not copied whole, or not a genesis.
    #[error("genesis {0}; was the file copied whole?")]
    Codec(#[from] codec::DecodeError),
    /// The asset count is 0 or above [`MAX_ASSETS`].
    #[error("genesis has {0} assets; expected 1..={max}", max = MAX_ASSETS)]
    AssetCount(u16),
    /// Account ids are not strictly increasing.
    #[error(
        "genesis accounts must be sorted by id: account {} follows {}",
        .id.0,
        .previous.0
    )]
    AccountsOutOfOrder { previous: AccountId, id: AccountId },
    #[error("genesis lists account {} twice", (.0).0)]
    DuplicateAccount(AccountId),
    /// An account's balances are not strictly increasing by asset.
    #[error(
        "account {}: balances must be sorted by asset: asset {} follows {}",
        .account.0,
        .asset.0,
        .previous.0
    )]
    BalancesOutOfOrder {
        account: AccountId,
        previous: AssetId,
        asset: AssetId,
    },
    #[error("account {} lists a balance of asset {} twice", .account.0, .asset.0)]
    DuplicateBalance { account: AccountId, asset: AssetId },
    #[error(
        "account {} holds asset {}, but the genesis has only assets 0..{assets}",
        .account.0,
        .asset.0
    )]
    UnknownAsset {
        account: AccountId,
        asset: AssetId,
        assets: u16,
    },
    #[error(
        "account {} lists a zero balance of asset {}; omit zero balances",
        .account.0,
        .asset.0
    )]
    ZeroBalance { account: AccountId, asset: AssetId },
    /// The balances of one asset add up to more than [`MAX_AMOUNT`].
    #[error(
        "the balances of asset {} add up to more than the issuance cap 2^63-1",
        .asset.0
    )]
    SupplyTooLarge { asset: AssetId },
    /// The payments committee has no validator, more than [`PAYMENTS_VALIDATORS_MAX`], or no
    /// shard.
    #[error(
        "the payments committee has {validators} validators and {shards} shards; expected 1..={max} validators and at least 1 shard",
        max = PAYMENTS_VALIDATORS_MAX
    )]
    PaymentsCommittee { validators: usize, shards: u32 },
}

impl Genesis {
    /// The canonical bytes. Encoding does not check the genesis: an invalid one encodes to bytes
    /// that [`Genesis::decode`] rejects.
    pub fn encode(&self) -> Vec<u8> {
        let balances: usize = self.accounts.iter().map(|a| a.balances.len()).sum();
        let mut out = Vec::with_capacity(
            GENESIS_MAGIC.len()
                + 10
                + self.accounts.len() * ACCOUNT_HEADER_BYTES
                + balances * BALANCE_BYTES,
        );
        let named = !self.asset_info.is_empty();
        out.put_bytes(match (named, &self.payments) {
            (true, _) => &GENESIS_MAGIC_NAMED,
            (false, None) => &GENESIS_MAGIC,
            (false, Some(_)) => &GENESIS_MAGIC_PAYMENTS,
        });
        out.put_u16(self.assets);
        for info in &self.asset_info {
            // A valid symbol is at most 16 bytes; a longer one's length wraps and the bytes
            // then fail to decode.
            out.put_u8(info.symbol.len() as u8);
            out.put_bytes(info.symbol.as_bytes());
            out.put_u8(info.decimals);
        }
        out.put_u64(self.accounts.len() as u64);
        for account in &self.accounts {
            encode_account(account, &mut out);
        }
        if named {
            out.put_u8(u8::from(self.payments.is_some()));
        }
        if let Some(payments) = &self.payments {
            out.extend_from_slice(&payments.chain_id.to_be_bytes());
            out.extend_from_slice(&payments.epoch.to_be_bytes());
            out.extend_from_slice(&payments.shards.to_be_bytes());
            // At most PAYMENTS_VALIDATORS_MAX for a valid genesis; an invalid count wraps and
            // the bytes then fail to decode.
            out.extend_from_slice(&(payments.validators.len() as u16).to_be_bytes());
            for validator in &payments.validators {
                out.extend_from_slice(&validator.key);
                out.extend_from_slice(&validator.bls_key);
                out.extend_from_slice(&validator.bls_proof);
            }
        }
        out
    }

    /// Decodes and validates a genesis occupying all of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Genesis, GenesisError> {
        let mut reader = Reader::new(bytes);
        let Header {
            named,
            with_payments,
            summary:
                GenesisSummary {
                    assets,
                    asset_info,
                    accounts: account_count,
                },
        } = read_header(&mut reader)?;
        // Bound the allocation by what the input can hold, not by what it claims.
        let accounts = reader.list(account_count, ACCOUNT_HEADER_BYTES, read_account)?;
        let with_payments = if named {
            match reader.u8()? {
                0 => false,
                1 => true,
                flag => return Err(GenesisError::PaymentsFlag(flag)),
            }
        } else {
            with_payments
        };
        let payments = if with_payments {
            Some(read_payments(&mut reader)?)
        } else {
            None
        };
        reader.finish()?;
        let genesis = Genesis {
            assets,
            asset_info,
            accounts,
            payments,
        };
        genesis.validate()?;
        Ok(genesis)
    }

    /// Checks every rule of the canonical form (see the module docs).
    pub fn validate(&self) -> Result<(), GenesisError> {
        if self.assets == 0 || usize::from(self.assets) > MAX_ASSETS {
            return Err(GenesisError::AssetCount(self.assets));
        }
        self.check_asset_info()?;
        let mut supply = vec![0u64; usize::from(self.assets)];
        let mut previous: Option<AccountId> = None;
        for account in &self.accounts {
            check_account_order(previous, account.id)?;
            self.check_balances(account, &mut supply)?;
            previous = Some(account.id);
        }
        if let Some(payments) = &self.payments {
            let validators = payments.validators.len();
            if !(1..=PAYMENTS_VALIDATORS_MAX).contains(&validators) || payments.shards == 0 {
                return Err(GenesisError::PaymentsCommittee {
                    validators,
                    shards: payments.shards,
                });
            }
        }
        Ok(())
    }

    /// The asset table: empty, or one acceptable and distinct symbol per asset.
    fn check_asset_info(&self) -> Result<(), GenesisError> {
        if self.asset_info.is_empty() {
            return Ok(());
        }
        if self.asset_info.len() != usize::from(self.assets) {
            return Err(GenesisError::AssetTableSize {
                named: self.asset_info.len(),
                assets: self.assets,
            });
        }
        let mut seen = std::collections::BTreeSet::new();
        for (asset, info) in self.asset_info.iter().enumerate() {
            let asset = asset as u16;
            if !symbol_acceptable(&info.symbol) || !seen.insert(info.symbol.as_str()) {
                return Err(GenesisError::AssetSymbol {
                    asset,
                    symbol: info.symbol.clone(),
                });
            }
            if info.decimals > ASSET_DECIMALS_MAX {
                return Err(GenesisError::AssetDecimals {
                    asset,
                    symbol: info.symbol.clone(),
                    decimals: info.decimals,
                });
            }
        }
        Ok(())
    }

    /// Asset `asset`'s symbol: the genesis's name, or `A{asset}` when the genesis names none.
    pub fn symbol(&self, asset: u16) -> String {
        symbol_of(&self.asset_info, asset)
    }

    /// Checks one account's balances and adds them to `supply` (per asset).
    fn check_balances(
        &self,
        account: &GenesisAccount,
        supply: &mut [u64],
    ) -> Result<(), GenesisError> {
        let mut previous: Option<AssetId> = None;
        for &(asset, amount) in &account.balances {
            check_balance_order(account.id, previous, asset)?;
            if asset.0 >= self.assets {
                return Err(GenesisError::UnknownAsset {
                    account: account.id,
                    asset,
                    assets: self.assets,
                });
            }
            if amount == 0 {
                return Err(GenesisError::ZeroBalance {
                    account: account.id,
                    asset,
                });
            }
            let total = &mut supply[usize::from(asset.0)];
            *total = total
                .checked_add(amount)
                .filter(|&total| total <= MAX_AMOUNT)
                .ok_or(GenesisError::SupplyTooLarge { asset })?;
            previous = Some(asset);
        }
        Ok(())
    }

    /// Each asset's total supply (the sum of its balances), indexed by asset. Saturates at
    /// `u64::MAX` for a genesis that fails [`Genesis::validate`].
    pub fn supply(&self) -> Vec<u64> {
        let mut supply = vec![0u64; usize::from(self.assets)];
        for account in &self.accounts {
            for &(asset, amount) in &account.balances {
                if let Some(total) = supply.get_mut(usize::from(asset.0)) {
                    *total = total.saturating_add(amount);
                }
            }
        }
        supply
    }
}

fn check_account_order(previous: Option<AccountId>, id: AccountId) -> Result<(), GenesisError> {
    match previous {
        Some(previous) if previous == id => Err(GenesisError::DuplicateAccount(id)),
        Some(previous) if previous > id => Err(GenesisError::AccountsOutOfOrder { previous, id }),
        _ => Ok(()),
    }
}

fn check_balance_order(
    account: AccountId,
    previous: Option<AssetId>,
    asset: AssetId,
) -> Result<(), GenesisError> {
    match previous {
        Some(previous) if previous == asset => {
            Err(GenesisError::DuplicateBalance { account, asset })
        }
        Some(previous) if previous > asset => Err(GenesisError::BalancesOutOfOrder {
            account,
            previous,
            asset,
        }),
        _ => Ok(()),
    }
}

fn encode_account(account: &GenesisAccount, out: &mut Vec<u8>) {
    out.put_u64(account.id.0);
    out.put_bytes(&account.public_key);
    // A valid account holds at most MAX_ASSETS (1024) balances; for an invalid one with 2^16
    // or more the count wraps, and the bytes then fail to decode.
    out.put_u16(account.balances.len() as u16);
    for &(asset, amount) in &account.balances {
        out.put_u16(asset.0);
        out.put_u64(amount);
    }
}

/// Whether `symbol` may name an asset: 1..=16 characters of `A-Z 0-9 . _ -`.
pub fn symbol_acceptable(symbol: &str) -> bool {
    (1..=ASSET_SYMBOL_LEN_MAX).contains(&symbol.len())
        && symbol
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

/// What a genesis says before its accounts: its assets, their names, and how many accounts
/// follow. Read without the accounts ([`GenesisSummary::decode`]) where only these are needed:
/// a restarted node at 10M accounts spent about a second decoding the whole genesis for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenesisSummary {
    pub assets: u16,
    /// As [`Genesis::asset_info`]: empty, or one entry per asset.
    pub asset_info: Vec<AssetInfo>,
    /// The number of accounts the genesis holds.
    pub accounts: u64,
}

impl GenesisSummary {
    /// The summary of an encoded genesis: its prefix only, read by the same code as
    /// [`Genesis::decode`]; the accounts and the rest are neither read nor checked (the store
    /// checked the whole genesis when it was created).
    pub fn decode(bytes: &[u8]) -> Result<GenesisSummary, GenesisError> {
        let summary = read_header(&mut Reader::new(bytes))?.summary;
        if summary.assets == 0 || usize::from(summary.assets) > MAX_ASSETS {
            return Err(GenesisError::AssetCount(summary.assets));
        }
        Ok(summary)
    }

    /// The symbol of `asset`, as [`Genesis::symbol`] gives it.
    pub fn symbol(&self, asset: u16) -> String {
        symbol_of(&self.asset_info, asset)
    }
}

/// The symbol of `asset` among `asset_info` (`A3` when the genesis names no assets).
fn symbol_of(asset_info: &[AssetInfo], asset: u16) -> String {
    asset_info
        .get(usize::from(asset))
        .map_or_else(|| format!("A{asset}"), |info| info.symbol.clone())
}

/// A genesis's prefix: its format flags and its summary.
struct Header {
    named: bool,
    with_payments: bool,
    summary: GenesisSummary,
}

fn read_header(reader: &mut Reader<'_>) -> Result<Header, GenesisError> {
    let (named, with_payments) = match reader.take(GENESIS_MAGIC.len())? {
        magic if magic == GENESIS_MAGIC => (false, false),
        magic if magic == GENESIS_MAGIC_PAYMENTS => (false, true),
        magic if magic == GENESIS_MAGIC_NAMED => (true, false),
        _ => return Err(GenesisError::BadMagic),
    };
    let assets = reader.u16()?;
    let asset_info = if named {
        // Each entry holds at least 3 bytes (length, one character, decimals).
        reader.list(u64::from(assets), 3, read_asset_info)?
    } else {
        Vec::new()
    };
    let accounts = reader.u64()?;
    Ok(Header {
        named,
        with_payments,
        summary: GenesisSummary {
            assets,
            asset_info,
            accounts,
        },
    })
}

fn read_asset_info(reader: &mut Reader<'_>) -> Result<AssetInfo, GenesisError> {
    let len = reader.u8()?;
    let symbol = reader.ascii(usize::from(len), "asset symbol")?.to_string();
    let decimals = reader.u8()?;
    Ok(AssetInfo { symbol, decimals })
}

fn read_account(reader: &mut Reader<'_>) -> Result<GenesisAccount, GenesisError> {
    let id = AccountId(reader.u64()?);
    let public_key = reader.array()?;
    let count = reader.u16()?;
    let balances = reader.list(count.into(), BALANCE_BYTES, |reader| {
        Ok::<_, codec::DecodeError>((AssetId(reader.u16()?), reader.u64()?))
    })?;
    Ok(GenesisAccount {
        id,
        public_key,
        balances,
    })
}

fn read_payments(reader: &mut Reader<'_>) -> Result<PaymentsGenesis, GenesisError> {
    let chain_id = reader.u64()?;
    let epoch = reader.u64()?;
    let shards = reader.u32()?;
    let count = reader.u16()?;
    let validators = reader.list(count.into(), PAYMENTS_VALIDATOR_BYTES, |reader| {
        Ok::<_, codec::DecodeError>(PaymentsValidator {
            key: reader.array()?,
            bls_key: reader.array()?,
            bls_proof: reader.array()?,
        })
    })?;
    Ok(PaymentsGenesis {
        chain_id,
        epoch,
        shards,
        validators,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn account(id: u64, balances: &[(u16, u64)]) -> GenesisAccount {
        GenesisAccount {
            id: AccountId(id),
            public_key: [id as u8; 32],
            balances: balances.iter().map(|&(a, x)| (AssetId(a), x)).collect(),
        }
    }

    fn small() -> Genesis {
        Genesis {
            asset_info: Vec::new(),
            payments: None,
            assets: 3,
            accounts: vec![
                account(1, &[(0, 10), (2, 5)]),
                account(4, &[]),
                account(9, &[(1, 7)]),
            ],
        }
    }

    /// A valid genesis: ids and assets drawn as sets (so sorted and unique), amounts small
    /// enough that no asset's total can exceed the cap.
    fn valid_genesis() -> impl Strategy<Value = Genesis> {
        (1u16..=40).prop_flat_map(|assets| {
            let balances = proptest::collection::btree_map(0..assets, 1u64..=1 << 50, 0..6);
            let account = (any::<[u8; 32]>(), balances);
            // Half of them name their assets (`"WALRASG3"`), with decimals across the range.
            let names = proptest::option::of(proptest::collection::vec(
                0..=ASSET_DECIMALS_MAX,
                usize::from(assets),
            ));
            (
                proptest::collection::btree_map(any::<u64>(), account, 0..20),
                names,
            )
                .prop_map(move |(accounts, names)| Genesis {
                    asset_info: names.map_or_else(Vec::new, |decimals| {
                        decimals
                            .into_iter()
                            .enumerate()
                            .map(|(asset, decimals)| AssetInfo {
                                symbol: format!("T{asset}.X"),
                                decimals,
                            })
                            .collect()
                    }),
                    payments: None,
                    assets,
                    accounts: accounts
                        .into_iter()
                        .map(|(id, (public_key, balances))| GenesisAccount {
                            id: AccountId(id),
                            public_key,
                            balances: balances
                                .into_iter()
                                .map(|(asset, amount)| (AssetId(asset), amount))
                                .collect(),
                        })
                        .collect(),
                })
        })
    }

    proptest! {
        #[test]
        fn encoding_round_trips(genesis in valid_genesis()) {
            prop_assert_eq!(genesis.validate(), Ok(()));
            let bytes = genesis.encode();
            prop_assert_eq!(Genesis::decode(&bytes), Ok(genesis));
        }

        /// Arbitrary bytes, with or without the magic, decode to an error or to a genesis that
        /// re-encodes to exactly those bytes.
        #[test]
        fn decoding_never_panics_and_is_canonical(
            with_magic in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut bytes = if with_magic { GENESIS_MAGIC.to_vec() } else { Vec::new() };
            bytes.extend_from_slice(&body);
            if let Ok(genesis) = Genesis::decode(&bytes) {
                prop_assert_eq!(genesis.encode(), bytes);
            }
        }

        /// Flipping any one byte of a valid encoding gives an error or another canonical genesis.
        #[test]
        fn corrupted_bytes_stay_canonical(genesis in valid_genesis(), at in any::<usize>(), bit in 0u8..8) {
            let mut bytes = genesis.encode();
            let at = at % bytes.len();
            bytes[at] ^= 1 << bit;
            if let Ok(decoded) = Genesis::decode(&bytes) {
                prop_assert_eq!(decoded.encode(), bytes);
            }
        }

        #[test]
        fn truncation_and_trailing_bytes_are_errors(genesis in valid_genesis(), cut in 1usize..30) {
            let bytes = genesis.encode();
            let cut = cut.min(bytes.len());
            prop_assert!(Genesis::decode(&bytes[..bytes.len() - cut]).is_err());
            let mut longer = bytes;
            longer.push(0);
            prop_assert_eq!(Genesis::decode(&longer), Err(GenesisError::Codec(codec::DecodeError::TrailingBytes { extra: 1 })));
        }
    }

    fn decode_modified(modify: impl FnOnce(&mut Genesis)) -> Result<Genesis, GenesisError> {
        let mut genesis = small();
        modify(&mut genesis);
        Genesis::decode(&genesis.encode())
    }

    /// The summary reads what decode reads before the accounts, for every format (named,
    /// unnamed, with payments), and refuses what decode refuses there.
    #[test]
    fn a_summary_is_the_genesis_without_its_accounts() {
        let mut named = small();
        named.asset_info = (0..named.assets)
            .map(|asset| AssetInfo {
                symbol: format!("X{asset}"),
                decimals: 2,
            })
            .collect();
        for genesis in [small(), named] {
            let summary = GenesisSummary::decode(&genesis.encode()).unwrap();
            assert_eq!(summary.assets, genesis.assets);
            assert_eq!(summary.asset_info, genesis.asset_info);
            assert_eq!(summary.accounts, genesis.accounts.len() as u64);
            for asset in 0..genesis.assets {
                assert_eq!(summary.symbol(asset), genesis.symbol(asset));
            }
        }
        assert_eq!(
            GenesisSummary::decode(b"not a genesis, not at all: no magic here"),
            Err(GenesisError::BadMagic)
        );
        let mut none = small();
        none.assets = 0;
        assert_eq!(
            GenesisSummary::decode(&none.encode()),
            Err(GenesisError::AssetCount(0))
        );
    }

    #[test]
    fn every_rule_has_its_error() {
        assert_eq!(decode_modified(|_| {}), Ok(small()));
        assert_eq!(
            decode_modified(|g| g.assets = 0),
            Err(GenesisError::AssetCount(0))
        );
        assert_eq!(
            decode_modified(|g| g.assets = MAX_ASSETS as u16 + 1),
            Err(GenesisError::AssetCount(MAX_ASSETS as u16 + 1))
        );
        assert_eq!(
            decode_modified(|g| g.accounts.swap(0, 1)),
            Err(GenesisError::AccountsOutOfOrder {
                previous: AccountId(4),
                id: AccountId(1)
            })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[1].id = AccountId(1)),
            Err(GenesisError::DuplicateAccount(AccountId(1)))
        );
        assert_eq!(
            decode_modified(|g| g.accounts[0].balances.swap(0, 1)),
            Err(GenesisError::BalancesOutOfOrder {
                account: AccountId(1),
                previous: AssetId(2),
                asset: AssetId(0)
            })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[0].balances[1].0 = AssetId(0)),
            Err(GenesisError::DuplicateBalance {
                account: AccountId(1),
                asset: AssetId(0)
            })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[2].balances[0].0 = AssetId(3)),
            Err(GenesisError::UnknownAsset {
                account: AccountId(9),
                asset: AssetId(3),
                assets: 3
            })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[2].balances[0].1 = 0),
            Err(GenesisError::ZeroBalance {
                account: AccountId(9),
                asset: AssetId(1)
            })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[0].balances[0].1 = MAX_AMOUNT),
            Ok({
                let mut g = small();
                g.accounts[0].balances[0].1 = MAX_AMOUNT;
                g
            })
        );
        assert_eq!(
            decode_modified(|g| {
                g.accounts[0].balances[0].1 = MAX_AMOUNT;
                g.accounts[1].balances.push((AssetId(0), 1));
            }),
            Err(GenesisError::SupplyTooLarge { asset: AssetId(0) })
        );
        assert_eq!(
            decode_modified(|g| g.accounts[2].balances[0].1 = u64::MAX),
            Err(GenesisError::SupplyTooLarge { asset: AssetId(1) })
        );
    }

    fn with_payments(validators: usize, shards: u32) -> Genesis {
        Genesis {
            asset_info: Vec::new(),
            payments: Some(PaymentsGenesis {
                chain_id: 9,
                epoch: 2,
                shards,
                validators: (0..validators)
                    .map(|index| PaymentsValidator {
                        key: [index as u8; 32],
                        bls_key: [index as u8 + 1; 48],
                        bls_proof: [index as u8 + 2; 96],
                    })
                    .collect(),
            }),
            ..small()
        }
    }

    /// The committee section: round trip, its own magic, every truncation refused, the
    /// committee's size rule named; a genesis without one keeps its old bytes.
    #[test]
    fn the_payments_committee_round_trips_and_is_checked() {
        let genesis = with_payments(4, 2);
        let bytes = genesis.encode();
        assert_eq!(&bytes[..8], &GENESIS_MAGIC_PAYMENTS);
        assert_eq!(Genesis::decode(&bytes), Ok(genesis.clone()));
        assert_eq!(
            bytes.len(),
            small().encode().len() + 22 + 4 * PAYMENTS_VALIDATOR_BYTES
        );
        for cut in 1..=22 + PAYMENTS_VALIDATOR_BYTES {
            assert!(Genesis::decode(&bytes[..bytes.len() - cut]).is_err());
        }
        assert_eq!(&small().encode()[..8], &GENESIS_MAGIC);
        for (validators, shards) in [(0, 1), (PAYMENTS_VALIDATORS_MAX + 1, 1), (4, 0)] {
            assert_eq!(
                Genesis::decode(&with_payments(validators, shards).encode()),
                Err(GenesisError::PaymentsCommittee { validators, shards })
            );
        }
        assert_eq!(with_payments(PAYMENTS_VALIDATORS_MAX, 1).validate(), Ok(()));
    }

    #[test]
    fn framing_errors_are_named() {
        let bytes = small().encode();
        let mut wrong_magic = bytes.clone();
        wrong_magic[7] = b'9';
        assert_eq!(Genesis::decode(&wrong_magic), Err(GenesisError::BadMagic));
        assert_eq!(
            Genesis::decode(&bytes[..4]),
            Err(GenesisError::Codec(codec::DecodeError::Truncated {
                offset: 0,
                needed: 8,
                available: 4
            }))
        );
        // A count far beyond the input must fail cleanly, not allocate for it.
        let mut huge_count = bytes[..10].to_vec();
        huge_count.extend_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(
            Genesis::decode(&huge_count),
            Err(GenesisError::Codec(codec::DecodeError::Truncated { .. }))
        ));
    }

    fn named(assets: u16) -> Genesis {
        Genesis {
            asset_info: (0..assets)
                .map(|asset| AssetInfo {
                    symbol: ["USD", "BTC", "ETH"][usize::from(asset) % 3].to_string()
                        + &"X".repeat(usize::from(asset / 3)),
                    decimals: 2 + asset as u8,
                })
                .collect(),
            ..small()
        }
    }

    /// A genesis that names its assets starts with `"WALRASG3"`, carries its table (and a
    /// committee, behind the flag) through encoding, and a genesis without names keeps the
    /// bytes it had before names existed.
    #[test]
    fn asset_names_round_trip_and_unnamed_bytes_do_not_change() {
        let genesis = named(3);
        let bytes = genesis.encode();
        assert_eq!(&bytes[..8], b"WALRASG3");
        assert_eq!(Genesis::decode(&bytes), Ok(genesis.clone()));
        assert_eq!(genesis.symbol(1), "BTC");
        let with_committee = Genesis {
            payments: with_payments(4, 2).payments,
            ..genesis
        };
        let bytes = with_committee.encode();
        assert_eq!(&bytes[..8], b"WALRASG3");
        assert_eq!(Genesis::decode(&bytes), Ok(with_committee));
        let unnamed = small();
        assert_eq!(&unnamed.encode()[..8], b"WALRASG1");
        assert_eq!(unnamed.symbol(2), "A2");
        assert_eq!(&with_payments(4, 2).encode()[..8], b"WALRASG2");
    }

    /// Every rule of the asset table has its error: a table of the wrong size, an empty, long,
    /// lowercase or repeated symbol, too many decimals, a committee flag other than 0 or 1.
    #[test]
    fn every_asset_table_rule_has_its_error() {
        let check = |modify: &dyn Fn(&mut Genesis)| {
            let mut genesis = named(3);
            modify(&mut genesis);
            Genesis::decode(&genesis.encode())
        };
        // The encoding has room for exactly one entry per asset; a table of another size is
        // refused by validation (and its bytes do not decode).
        let mut short = named(3);
        short.asset_info.pop();
        assert_eq!(
            short.validate(),
            Err(GenesisError::AssetTableSize {
                named: 2,
                assets: 3
            })
        );
        assert!(Genesis::decode(&short.encode()).is_err());
        for bad in ["", "btc", "B TC", "ABCDEFGHIJKLMNOPQ", "USD"] {
            let result = check(&|g| g.asset_info[2].symbol = bad.to_string());
            assert!(
                matches!(
                    result,
                    Err(GenesisError::AssetSymbol { asset: 2, .. }) | Err(GenesisError::Codec(_))
                ),
                "{bad:?}: {result:?}"
            );
        }
        assert!(matches!(
            check(&|g| g.asset_info[1].decimals = 19),
            Err(GenesisError::AssetDecimals {
                asset: 1,
                decimals: 19,
                ..
            })
        ));
        let mut bytes = named(3).encode();
        let flag_at = bytes.len() - 1;
        bytes[flag_at] = 2;
        assert_eq!(Genesis::decode(&bytes), Err(GenesisError::PaymentsFlag(2)));
    }

    #[test]
    fn supply_sums_each_asset() {
        assert_eq!(small().supply(), vec![10, 7, 5]);
    }

    #[test]
    fn layout_matches_the_documented_format() {
        let genesis = Genesis {
            asset_info: Vec::new(),
            payments: None,
            assets: 2,
            accounts: vec![account(0x0102, &[(1, 0x0a0b)])],
        };
        let mut expected = b"WALRASG1".to_vec();
        expected.extend_from_slice(&[0, 2]);
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.extend_from_slice(&0x0102u64.to_be_bytes());
        expected.extend_from_slice(&[2u8; 32]);
        expected.extend_from_slice(&[0, 1, 0, 1]);
        expected.extend_from_slice(&0x0a0bu64.to_be_bytes());
        assert_eq!(genesis.encode(), expected);
    }
    #[test]
    fn messages_that_read_inner_ids_keep_their_text() {
        assert_eq!(
            GenesisError::DuplicateAccount(AccountId(7)).to_string(),
            "genesis lists account 7 twice"
        );
        assert_eq!(
            GenesisError::UnknownAsset {
                account: AccountId(7),
                asset: AssetId(3),
                assets: 2,
            }
            .to_string(),
            "account 7 holds asset 3, but the genesis has only assets 0..2"
        );
    }
}
