//! Ordered access: `get`, `iter` and `range_from` against a `BTreeMap` model.
//!
//! Proptest builds tries from random batches with some keys marked deleted (and sometimes
//! cleaned) and checks that iteration yields exactly the live entries in increasing key order,
//! that `range_from(k)` equals the model's `range(k..)` for present, absent and extreme `k`, and
//! that `get` agrees with the model. A deterministic test walks an offer book in price order.

mod common;

use common::{batch, Key, Model};
use proptest::prelude::*;
use walras_trie::Trie;

fn entries_of<'a>(iter: impl Iterator<Item = (&'a Key, &'a Vec<u8>)>) -> Vec<(Key, Vec<u8>)> {
    iter.map(|(k, v)| (*k, v.clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn iteration_and_ranges_match_the_model(
        entries in batch(400),
        delete_every in 2usize..8,
        clean in any::<bool>(),
        starts in proptest::collection::vec(common::key(), 0..6),
    ) {
        let mut trie = Trie::<8>::new();
        trie.insert_batch(entries.clone(), 2);
        let mut model = Model::new();
        common::apply_batch(&mut model, &entries);
        let deleted: Vec<Key> = model.keys().step_by(delete_every).copied().collect();
        for key in &deleted {
            trie.mark_deleted(key);
            model.remove(key);
        }
        if clean {
            trie.clean();
        }
        prop_assert_eq!(entries_of(trie.iter()), entries_of(model.iter()));
        let present = model.keys().next().copied();
        let extremes = [[0u8; 8], [0xff; 8]];
        for start in starts.iter().chain(present.iter()).chain(deleted.iter().take(3)).chain(&extremes) {
            prop_assert_eq!(entries_of(trie.range_from(start)), entries_of(model.range(*start..)));
        }
        for key in deleted.iter().chain(model.keys()).chain(&starts) {
            prop_assert_eq!(trie.get(key), model.get(key));
        }
    }
}

#[test]
fn an_offer_book_keyed_by_price_account_id_walks_in_price_order() {
    // 24-byte offer keys: big-endian price, account, offer id.
    let offer_key = |price: u64, account: u64, id: u64| {
        let mut key = [0u8; 24];
        key[..8].copy_from_slice(&price.to_be_bytes());
        key[8..16].copy_from_slice(&account.to_be_bytes());
        key[16..].copy_from_slice(&id.to_be_bytes());
        key
    };
    let offers = [
        (300, 1, 7),
        (100, 2, 1),
        (100, 1, 9),
        (250, 3, 2),
        (100, 1, 3),
    ];
    let mut book = Trie::<24>::new();
    book.insert_batch(
        offers
            .iter()
            .map(|&(p, a, i)| (offer_key(p, a, i), vec![]))
            .collect(),
        1,
    );
    let order: Vec<Key3> = book.iter().map(|(k, _)| decode(k)).collect();
    assert_eq!(
        order,
        vec![
            (100, 1, 3),
            (100, 1, 9),
            (100, 2, 1),
            (250, 3, 2),
            (300, 1, 7)
        ]
    );
    let from_200: Vec<Key3> = book
        .range_from(&offer_key(200, 0, 0))
        .map(|(k, _)| decode(k))
        .collect();
    assert_eq!(from_200, vec![(250, 3, 2), (300, 1, 7)]);
}

type Key3 = (u64, u64, u64);

fn decode(key: &[u8; 24]) -> Key3 {
    let word = |at: usize| u64::from_be_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    (word(0), word(8), word(16))
}
