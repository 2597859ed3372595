//! The genesis state: the accounts an exchange starts with, their keys and balances.
//!
//! Encoding (big-endian): `"WALRASG1" assets:u16 accounts:u64 (id:u64 public_key:[32]
//! balances:u16 (asset:u16 amount:u64)*)*`. Canonical: accounts sorted by id without
//! duplicates, each account's balances sorted by asset without duplicates, amounts positive,
//! per-asset totals within the issuance cap. Decoding accepts exactly the canonical form.

use crate::{AccountId, AssetId, MAX_AMOUNT};
use std::fmt;

const MAGIC: &[u8; 8] = b"WALRASG1";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenesisAccount {
    pub id: AccountId,
    pub public_key: [u8; 32],
    /// Sorted by asset; amounts positive.
    pub balances: Vec<(AssetId, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Genesis {
    pub assets: u16,
    /// Sorted by id; ids unique.
    pub accounts: Vec<GenesisAccount>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenesisError {
    Magic,
    Truncated,
    TrailingBytes,
    AssetCount(u16),
    UnsortedAccounts { id: u64 },
    UnsortedBalances { account: u64 },
    UnknownAsset { account: u64, asset: u16 },
    ZeroBalance { account: u64, asset: u16 },
    AssetTotalTooLarge { asset: u16 },
}

impl fmt::Display for GenesisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GenesisError::*;
        match self {
            Magic => write!(f, "not a Walras genesis file (bad magic)"),
            Truncated => write!(f, "genesis truncated"),
            TrailingBytes => write!(f, "bytes after the end of the genesis"),
            AssetCount(assets) => write!(f, "{assets} assets: need 2..={}", crate::MAX_ASSETS),
            UnsortedAccounts { id } => write!(f, "account {id} is out of order or repeated"),
            UnsortedBalances { account } => {
                write!(f, "account {account}: balances out of order or repeated")
            }
            UnknownAsset { account, asset } => {
                write!(f, "account {account} holds unknown asset {asset}")
            }
            ZeroBalance { account, asset } => {
                write!(f, "account {account} lists a zero balance of asset {asset}")
            }
            AssetTotalTooLarge { asset } => {
                write!(f, "asset {asset}: balances exceed the issuance cap 2^63-1")
            }
        }
    }
}

impl std::error::Error for GenesisError {}

impl Genesis {
    /// Checks the canonical-form rules.
    pub fn validate(&self) -> Result<(), GenesisError> {
        if !(2..=crate::MAX_ASSETS).contains(&(self.assets as usize)) {
            return Err(GenesisError::AssetCount(self.assets));
        }
        let mut totals = vec![0u64; self.assets as usize];
        for (index, account) in self.accounts.iter().enumerate() {
            let id = account.id.0;
            if index > 0 && self.accounts[index - 1].id >= account.id {
                return Err(GenesisError::UnsortedAccounts { id });
            }
            for (position, (asset, amount)) in account.balances.iter().enumerate() {
                if position > 0 && account.balances[position - 1].0 >= *asset {
                    return Err(GenesisError::UnsortedBalances { account: id });
                }
                if asset.0 >= self.assets {
                    return Err(GenesisError::UnknownAsset {
                        account: id,
                        asset: asset.0,
                    });
                }
                if *amount == 0 {
                    return Err(GenesisError::ZeroBalance {
                        account: id,
                        asset: asset.0,
                    });
                }
                let total = &mut totals[asset.0 as usize];
                *total = total
                    .checked_add(*amount)
                    .filter(|sum| *sum <= MAX_AMOUNT)
                    .ok_or(GenesisError::AssetTotalTooLarge { asset: asset.0 })?;
            }
        }
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(18 + self.accounts.len() * 62);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.assets.to_be_bytes());
        out.extend_from_slice(&(self.accounts.len() as u64).to_be_bytes());
        for account in &self.accounts {
            out.extend_from_slice(&account.id.0.to_be_bytes());
            out.extend_from_slice(&account.public_key);
            out.extend_from_slice(&(account.balances.len() as u16).to_be_bytes());
            for (asset, amount) in &account.balances {
                out.extend_from_slice(&asset.0.to_be_bytes());
                out.extend_from_slice(&amount.to_be_bytes());
            }
        }
        out
    }

    /// Decodes and validates; never panics on any input.
    pub fn decode(bytes: &[u8]) -> Result<Genesis, GenesisError> {
        let mut reader = Reader { bytes, at: 0 };
        if reader.take(8)? != MAGIC {
            return Err(GenesisError::Magic);
        }
        let assets = u16::from_be_bytes(reader.array()?);
        let count = u64::from_be_bytes(reader.array()?);
        // An account takes at least 42 bytes: refuse counts the input cannot hold.
        if count > (bytes.len() / 42) as u64 {
            return Err(GenesisError::Truncated);
        }
        let mut accounts = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let id = AccountId(u64::from_be_bytes(reader.array()?));
            let public_key = reader.array()?;
            let balance_count = u16::from_be_bytes(reader.array()?);
            let mut balances = Vec::with_capacity(balance_count as usize);
            for _ in 0..balance_count {
                let asset = AssetId(u16::from_be_bytes(reader.array()?));
                balances.push((asset, u64::from_be_bytes(reader.array()?)));
            }
            accounts.push(GenesisAccount {
                id,
                public_key,
                balances,
            });
        }
        if reader.at != bytes.len() {
            return Err(GenesisError::TrailingBytes);
        }
        let genesis = Genesis { assets, accounts };
        genesis.validate()?;
        Ok(genesis)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], GenesisError> {
        if self.bytes.len() - self.at < count {
            return Err(GenesisError::Truncated);
        }
        let slice = &self.bytes[self.at..self.at + count];
        self.at += count;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GenesisError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Genesis {
        Genesis {
            assets: 3,
            accounts: vec![
                GenesisAccount {
                    id: AccountId(1),
                    public_key: [1; 32],
                    balances: vec![(AssetId(0), 5), (AssetId(2), 9)],
                },
                GenesisAccount {
                    id: AccountId(4),
                    public_key: [2; 32],
                    balances: vec![],
                },
            ],
        }
    }

    #[test]
    fn round_trips_and_rejects_non_canonical_forms() {
        let genesis = sample();
        assert_eq!(Genesis::decode(&genesis.encode()), Ok(genesis.clone()));
        let mut unsorted = genesis.clone();
        unsorted.accounts.swap(0, 1);
        assert!(matches!(
            Genesis::decode(&unsorted.encode()),
            Err(GenesisError::UnsortedAccounts { .. })
        ));
        let mut zero = genesis.clone();
        zero.accounts[0].balances[0].1 = 0;
        assert!(matches!(
            zero.validate(),
            Err(GenesisError::ZeroBalance { .. })
        ));
        let mut unknown = genesis.clone();
        unknown.accounts[0].balances[1].0 = AssetId(3);
        assert!(matches!(
            unknown.validate(),
            Err(GenesisError::UnknownAsset { .. })
        ));
        let mut trailing = genesis.encode();
        trailing.push(0);
        assert_eq!(Genesis::decode(&trailing), Err(GenesisError::TrailingBytes));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Genesis::decode(&bytes);
            let mut prefixed = MAGIC.to_vec();
            prefixed.extend_from_slice(&bytes);
            let _ = Genesis::decode(&prefixed);
        }
    }
}
