//! The key pool and parallel signing.

use walras_crypto::{hash, Keypair};
use walras_types::{AccountId, SignedTransaction, Transaction};

/// The largest key pool: 65536 keys take about a second to derive on one core.
pub const KEY_POOL_MAX: usize = 65_536;

/// The number of keys for `accounts` genesis accounts: `min(accounts, KEY_POOL_MAX)`.
pub fn key_pool_size(accounts: usize) -> usize {
    accounts.clamp(1, KEY_POOL_MAX)
}

/// The secret seed of pool key `key_index`: `hash(seed ‖ key_index)`, both u64 big-endian.
pub fn key_seed(seed: u64, key_index: u64) -> [u8; 32] {
    let mut message = [0u8; 16];
    message[..8].copy_from_slice(&seed.to_be_bytes());
    message[8..].copy_from_slice(&key_index.to_be_bytes());
    hash(&message).0
}

/// `min(accounts, KEY_POOL_MAX)` keypairs; account `id` uses key `id mod pool size`.
pub struct KeyPool {
    keys: Vec<Keypair>,
}

impl KeyPool {
    /// Derives the pool for `accounts` genesis accounts, in parallel over `threads`.
    pub fn derive(seed: u64, accounts: usize, threads: usize) -> KeyPool {
        let size = key_pool_size(accounts);
        let indices: Vec<u64> = (0..size as u64).collect();
        let keys = parallel_map(&indices, threads, |&index| {
            Keypair::from_seed(key_seed(seed, index))
        });
        KeyPool { keys }
    }

    /// The keypair that signs for `account`.
    pub fn for_account(&self, account: AccountId) -> &Keypair {
        &self.keys[(account.0 % self.keys.len() as u64) as usize]
    }
}

/// Signs every transaction with its source's key, in parallel over `threads`.
pub fn sign_all(
    transactions: &[Transaction],
    keys: &KeyPool,
    threads: usize,
) -> Vec<SignedTransaction> {
    parallel_map(transactions, threads, |transaction| {
        let signature = keys
            .for_account(transaction.source)
            .sign(&transaction.encode());
        SignedTransaction {
            transaction: *transaction,
            signature: *signature.as_bytes(),
        }
    })
}

/// `items.iter().map(f)` on up to `threads` threads, results in input order.
fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    walras_par::map_in_order(items, threads, 2, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_map_keeps_order_for_any_thread_count() {
        let items: Vec<u32> = (0..1000).collect();
        let expected: Vec<u32> = items.iter().map(|x| x * 3).collect();
        for threads in [0, 1, 2, 3, 7, 64, 5000] {
            assert_eq!(parallel_map(&items, threads, |x| x * 3), expected);
        }
        assert!(parallel_map(&[] as &[u32], 4, |x| *x).is_empty());
    }

    #[test]
    fn accounts_share_pool_keys_by_residue() {
        let pool = KeyPool::derive(7, 5, 2);
        assert_eq!(
            pool.for_account(AccountId(1)).public_key(),
            pool.for_account(AccountId(6)).public_key()
        );
        assert_ne!(
            pool.for_account(AccountId(1)).public_key(),
            pool.for_account(AccountId(2)).public_key()
        );
        assert_eq!(
            pool.for_account(AccountId(3)).public_key(),
            Keypair::from_seed(key_seed(7, 3)).public_key()
        );
    }
}
