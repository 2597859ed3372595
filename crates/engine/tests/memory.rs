//! What a state reports it holds in memory (`ExchangeState::memory`, the node's
//! `walras_state_memory_bytes` gauges) follows the state: each part grows with what it holds,
//! and decoded keys are counted while an account holds them. One test in its own binary: the
//! decoded-key count is the process's, and other tests would decode keys beside it.

use walras_crypto::Keypair;
use walras_engine::{decoded_keys_live, ExchangeState, DECODED_KEY_BYTES};
use walras_types::genesis::{Genesis, GenesisAccount};
use walras_types::{AccountId, AssetId, OfferId, Price};
use walras_types::{Offer, PairId};

fn keypair(account: u64) -> Keypair {
    let mut seed = [3u8; 32];
    seed[..8].copy_from_slice(&account.to_be_bytes());
    Keypair::from_seed(seed)
}

/// A state of `accounts` accounts with real keys and `offers` resting offers.
fn state(accounts: u64, offers: u64) -> ExchangeState {
    let genesis = Genesis {
        asset_info: Vec::new(),
        payments: None,
        assets: 2,
        accounts: (0..accounts)
            .map(|id| GenesisAccount {
                id: AccountId(id * 3),
                public_key: *keypair(id).public_key().as_bytes(),
                balances: vec![(AssetId(0), 1_000_000), (AssetId(1), 1_000_000)],
            })
            .collect(),
    };
    let resting = (0..offers)
        .map(|number| Offer {
            id: OfferId(number),
            account: AccountId((number % accounts) * 3),
            sell: AssetId(0),
            buy: AssetId(1),
            amount: 10,
            min_price: Price::from_f64(0.5 + (number % 1_000) as f64 / 1_000.0),
        })
        .collect();
    ExchangeState::from_genesis_with_resting_offers(&genesis, resting, 2).expect("a state")
}

#[test]
fn a_state_s_memory_grows_with_what_it_holds_and_decoded_keys_are_counted_while_held() {
    let small = state(1_000, 100);
    let large = state(20_000, 10_000);
    let (small_memory, large_memory) = (small.memory(), large.memory());
    let account_bytes = std::mem::size_of::<walras_engine::Account>() as u64;
    assert!(
        large_memory.accounts >= 20_000 * account_bytes,
        "{large_memory:?}"
    );
    assert!(
        small_memory.accounts < 2_000 * account_bytes,
        "{small_memory:?}"
    );
    // The index's maps and the trie's nodes at least hold each account's id once.
    assert!(
        large_memory.account_index >= 20_000 * 12,
        "{large_memory:?}"
    );
    assert!(large_memory.account_trie >= 20_000 * 40, "{large_memory:?}");
    assert!(large_memory.account_trie > 10 * small_memory.account_trie);
    // An offer's key is 32 bytes, held once in its trie.
    assert!(large_memory.offer_tries >= 10_000 * 32, "{large_memory:?}");
    assert!(large_memory.offer_tries > 50 * small_memory.offer_tries);
    assert_eq!(
        large.open_offer_count(),
        10_000,
        "the resting offers are in the books"
    );
    let pair = PairId {
        sell: AssetId(0),
        buy: AssetId(1),
    };
    assert_eq!(large.book(pair).len(), 10_000);

    // Keys are decoded on first use, counted while an account holds them.
    let before = decoded_keys_live();
    for id in 0..50u64 {
        let account = large.account(AccountId(id * 3)).expect("an account");
        assert!(account.verifying_key().is_some(), "a real key");
        assert!(account.verifying_key().is_some(), "decoded once");
    }
    assert_eq!(decoded_keys_live(), before + 50);
    const { assert!(DECODED_KEY_BYTES >= 32) };
    drop(large);
    assert_eq!(decoded_keys_live(), before, "dropped with their accounts");
}
