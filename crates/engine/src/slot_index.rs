//! The account id → slot index, in shards shared copy-on-write between the state and the
//! account views it publishes (see [`crate::account_view`]).
//!
//! It was one hash map of every account: built on one thread when a checkpoint loaded (10M
//! inserts at 10M accounts), cloned whole into the first view at start-up (~285 MB of fresh
//! pages), and cloned whole again into the next view by every block that created an account.
//! Now the index is [`SHARDS`] maps behind `Arc`s, themselves behind one `Arc`: a view takes
//! the state's index by one reference count, and a block that creates accounts copies the
//! pointer array once and only the shards its accounts land in (at 10M accounts ~2,400
//! entries, ~40 KB each) while a view still holds them. Shards are built on all threads.
//!
//! Which shard an id lands in is a function of the id alone, so the index is the same map
//! however it was built; nothing iterates it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use walras_types::AccountId;

/// Heap bytes of a `std::collections::HashMap` of `capacity` (as `HashMap::capacity` reports
/// it) with entries of `entry_bytes`: per bucket an entry and a control byte, the buckets found
/// by hashbrown's rule (capacity + 1 rounded up to a power of two below 8 buckets, 7/8 of the
/// buckets usable from 8 up). For the memory gauges.
pub fn hash_map_heap_bytes(capacity: usize, entry_bytes: usize) -> u64 {
    let buckets = match capacity {
        0 => 0,
        1..=7 => (capacity + 1).next_power_of_two(),
        _ => capacity * 8 / 7,
    };
    (buckets * (entry_bytes + 1)) as u64
}

/// A fast hasher for account ids and slots (already well distributed). Only for lookups:
/// nothing iterates these maps in an order that matters.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ *byte as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = id_hash(value);
    }
    /// Slots (the account view's written accounts) are keys too.
    fn write_u32(&mut self, value: u32) {
        self.0 = id_hash(u64::from(value));
    }
}

/// The hash of an account id's value, for [`IdHasher`] and the shards of [`SlotIndex`].
pub(crate) fn id_hash(value: u64) -> u64 {
    (value ^ (value >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

pub type SlotMap = HashMap<AccountId, u32, BuildHasherDefault<IdHasher>>;

/// Shards of the index: enough that a block creating a few thousand accounts at 10M copies a
/// few tens of MB at most; few enough that a copy of the pointer array is 32 KB.
pub(crate) const SHARDS: usize = 1 << 12;

/// Shards looked up together by [`SlotIndex::first_missing`]: at 10M accounts a shard's map is
/// ~40 KB, so a pass's maps fit a core's L2 cache.
const SHARDS_PER_PASS: usize = 16;

/// The shard of `id`: bits of the id's hash that the maps inside do not use (they take the low
/// bits for the bucket and the top seven for the control byte).
fn shard_of(id: AccountId) -> usize {
    (id_hash(id.0) >> 40) as usize & (SHARDS - 1)
}

/// Account id → slot.
#[derive(Clone, Debug)]
pub(crate) struct SlotIndex {
    shards: Arc<Vec<Arc<SlotMap>>>,
    len: usize,
}

impl Default for SlotIndex {
    fn default() -> SlotIndex {
        SlotIndex {
            shards: Arc::new((0..SHARDS).map(|_| Arc::default()).collect()),
            len: 0,
        }
    }
}

impl SlotIndex {
    /// The index of accounts `ids`, each at its position, built on up to `threads` threads
    /// (each builds the shards of its own range, reading every id). `Err` names an id given
    /// twice (the one of the lowest shard holding a repeat).
    ///
    /// # Panics
    /// If `ids` holds more than `u32::MAX + 1` ids (a slot is a `u32`; callers cap it first).
    pub(crate) fn from_ids(ids: &[AccountId], threads: usize) -> Result<SlotIndex, AccountId> {
        assert!(
            ids.len() <= u32::MAX as usize + 1,
            "{} accounts: slots are u32",
            ids.len()
        );
        let ranges: Vec<std::ops::Range<usize>> = {
            let parts = threads.clamp(1, SHARDS);
            let per_part = SHARDS.div_ceil(parts);
            (0..parts)
                .map(|part| part * per_part..((part + 1) * per_part).min(SHARDS))
                .filter(|range| !range.is_empty())
                .collect()
        };
        let built = walras_par::run_each(ranges, threads, |range| build_shards(ids, range));
        let mut shards = Vec::with_capacity(SHARDS);
        for part in built {
            shards.extend(part?);
        }
        assert_eq!(shards.len(), SHARDS, "every shard built once");
        let index = SlotIndex {
            shards: Arc::new(shards),
            len: ids.len(),
        };
        debug_assert_eq!(
            index.shards.iter().map(|shard| shard.len()).sum::<usize>(),
            index.len
        );
        Ok(index)
    }

    pub(crate) fn get(&self, id: &AccountId) -> Option<&u32> {
        self.shards[shard_of(*id)].get(id)
    }

    pub(crate) fn contains_key(&self, id: &AccountId) -> bool {
        self.get(id).is_some()
    }

    /// The first id of `groups` not in the index, if any: groups are sorted by shard, then
    /// looked up a pass of [`SHARDS_PER_PASS`] shards at a time on up to `threads` threads, so
    /// that a pass's maps stay in cache while it runs (in arbitrary order, each lookup of a
    /// large index misses the cache two or three times). "First" is by pass, then group, then
    /// (shard, id) within the group: the same id whatever the thread count.
    pub(crate) fn first_missing(
        &self,
        groups: Vec<Vec<AccountId>>,
        threads: usize,
    ) -> Option<AccountId> {
        let groups = walras_par::map_owned_in_order(groups, threads, 2, |mut ids| {
            ids.sort_unstable_by_key(|id| (shard_of(*id), id.0));
            ids
        });
        let passes: Vec<std::ops::Range<usize>> = (0..SHARDS)
            .step_by(SHARDS_PER_PASS)
            .map(|start| start..start + SHARDS_PER_PASS)
            .collect();
        let missing = walras_par::map_owned_in_order(passes, threads, 2, |pass| {
            groups.iter().find_map(|ids| {
                let start = ids.partition_point(|id| shard_of(*id) < pass.start);
                ids[start..]
                    .iter()
                    .take_while(|id| shard_of(**id) < pass.end)
                    .find(|id| !self.contains_key(id))
                    .copied()
            })
        });
        missing.into_iter().flatten().next()
    }

    /// Sets `id`'s slot; returns the one it replaced. Copies the shard (and the pointer array)
    /// only when a view still shares them.
    pub(crate) fn insert(&mut self, id: AccountId, slot: u32) -> Option<u32> {
        let shards = Arc::make_mut(&mut self.shards);
        let replaced = Arc::make_mut(&mut shards[shard_of(id)]).insert(id, slot);
        if replaced.is_none() {
            self.len += 1;
        }
        replaced
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the index, O(shards): the pointer array, and each shard's map (its `Arc`'s
    /// counters, the map, and its table: [`hash_map_heap_bytes`]).
    pub(crate) fn heap_bytes(&self) -> u64 {
        use std::mem::size_of;
        let maps: u64 = self
            .shards
            .iter()
            .map(|shard| {
                (2 * size_of::<usize>() + size_of::<SlotMap>()) as u64
                    + hash_map_heap_bytes(shard.capacity(), size_of::<(AccountId, u32)>())
            })
            .sum();
        (2 * size_of::<usize>() + SHARDS * size_of::<Arc<SlotMap>>()) as u64 + maps
    }

    /// Whether `self` and `other` share every shard (a view taken and nothing created since).
    #[cfg(test)]
    pub(crate) fn shares_all_with(&self, other: &SlotIndex) -> bool {
        Arc::ptr_eq(&self.shards, &other.shards)
    }

    /// How many shards `self` and `other` share.
    #[cfg(test)]
    pub(crate) fn shards_shared_with(&self, other: &SlotIndex) -> usize {
        self.shards
            .iter()
            .zip(other.shards.iter())
            .filter(|(mine, theirs)| Arc::ptr_eq(mine, theirs))
            .count()
    }
}

impl std::ops::Index<&AccountId> for SlotIndex {
    type Output = u32;

    fn index(&self, id: &AccountId) -> &u32 {
        self.get(id).expect("an account id of the index")
    }
}

/// The shards `range` of the index of `ids`: counted first, so each map is made at its size,
/// and each shard's entries gathered together before its map is filled, so that the inserts of
/// one map run while it is in cache. Inserting in slot order instead sent every insert to a
/// random map of a few hundred MB: at 10M accounts that was ~1 s of a restart (`perf`: most of
/// the account decode's time in `HashMap::insert`).
fn build_shards(
    ids: &[AccountId],
    range: std::ops::Range<usize>,
) -> Result<Vec<Arc<SlotMap>>, AccountId> {
    let mut starts = vec![0usize; range.len() + 1];
    for id in ids {
        let shard = shard_of(*id);
        if range.contains(&shard) {
            starts[shard - range.start + 1] += 1;
        }
    }
    for shard in 1..starts.len() {
        starts[shard] += starts[shard - 1];
    }
    let mut gathered = vec![(AccountId(0), 0u32); starts[range.len()]];
    let mut next = starts.clone();
    for (slot, id) in ids.iter().enumerate() {
        let shard = shard_of(*id);
        if range.contains(&shard) {
            let at = &mut next[shard - range.start];
            gathered[*at] = (*id, slot as u32);
            *at += 1;
        }
    }
    let mut maps = Vec::with_capacity(range.len());
    let mut repeated: Option<AccountId> = None;
    for entries in starts
        .windows(2)
        .map(|bounds| &gathered[bounds[0]..bounds[1]])
    {
        let mut map = SlotMap::with_capacity_and_hasher(entries.len(), Default::default());
        for &(id, slot) in entries {
            if map.insert(id, slot).is_some() && repeated.is_none() {
                repeated = Some(id);
            }
        }
        maps.push(Arc::new(map));
    }
    match repeated {
        Some(id) => Err(id),
        None => Ok(maps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Built on any thread count, the index answers every id's position and nothing
        /// else, as a plain map of the same ids does; an id given twice is refused.
        #[test]
        fn the_index_answers_as_a_plain_map_of_the_same_ids(
            raw in prop::collection::vec(any::<u64>(), 0..3_000),
            repeat in any::<bool>(),
            threads in 1usize..5,
        ) {
            let mut ids: Vec<AccountId> = raw.iter().copied().map(AccountId).collect();
            ids.sort_unstable();
            ids.dedup();
            if repeat && !ids.is_empty() {
                ids.push(ids[ids.len() / 2]);
                prop_assert_eq!(
                    SlotIndex::from_ids(&ids, threads).err(),
                    Some(ids[ids.len() - 1])
                );
                return Ok(());
            }
            let index = SlotIndex::from_ids(&ids, threads).expect("distinct ids");
            prop_assert_eq!(index.len(), ids.len());
            for (slot, id) in ids.iter().enumerate() {
                prop_assert_eq!(index.get(id), Some(&(slot as u32)));
            }
            for probe in raw.iter().map(|x| AccountId(x.wrapping_mul(3) ^ 1)) {
                prop_assert_eq!(index.get(&probe).is_some(), ids.binary_search(&probe).is_ok());
            }
        }
    }

    proptest! {
        /// Groups of ids (a checkpoint's books), some not in the index: `first_missing`
        /// finds one exactly when an id is missing, and the same one on any thread count; it
        /// is the first missing id of the earliest pass, then group, then position.
        #[test]
        fn first_missing_finds_a_missing_id_exactly_when_there_is_one(
            known in prop::collection::vec(any::<u64>(), 1..2_000),
            picks in prop::collection::vec(
                prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..200),
                0..6),
            threads in 1usize..5,
        ) {
            let mut ids: Vec<AccountId> = known.iter().copied().map(AccountId).collect();
            ids.sort_unstable();
            ids.dedup();
            let index = SlotIndex::from_ids(&ids, 2).expect("distinct ids");
            // A picked id, or one next to it that the index may not hold.
            let groups: Vec<Vec<AccountId>> = picks
                .iter()
                .map(|group| {
                    group
                        .iter()
                        .map(|(pick, stray)| {
                            let id = *pick.get(&ids);
                            if *stray { AccountId(id.0 ^ 1) } else { id }
                        })
                        .collect()
                })
                .collect();
            let expected = (0..SHARDS).step_by(SHARDS_PER_PASS).find_map(|pass| {
                groups.iter().find_map(|group| {
                    let mut in_pass: Vec<AccountId> = group
                        .iter()
                        .copied()
                        .filter(|id| (pass..pass + SHARDS_PER_PASS).contains(&shard_of(*id)))
                        .collect();
                    in_pass.sort_by_key(|id| (shard_of(*id), id.0));
                    in_pass.into_iter().find(|id| ids.binary_search(id).is_err())
                })
            });
            let any_missing = groups.iter().flatten().any(|id| ids.binary_search(id).is_err());
            let found = index.first_missing(groups, threads);
            prop_assert_eq!(found.is_some(), any_missing);
            prop_assert_eq!(found, expected);
        }
    }

    /// Every pass is looked up: for each pass, one id missing from the index among thousands
    /// that are present is found, in whichever group it is (a pass skipped would let an offer
    /// of an unknown account through a checkpoint's load).
    #[test]
    fn first_missing_looks_in_every_pass() {
        let ids: Vec<AccountId> = (0..20_000u64).map(|x| AccountId(x * 7 + 3)).collect();
        let index = SlotIndex::from_ids(&ids, 2).expect("distinct ids");
        let strays: Vec<AccountId> = (0..SHARDS / SHARDS_PER_PASS)
            .map(|pass| {
                (0u64..)
                    .map(|x| AccountId(x * 7 + 4))
                    .find(|id| shard_of(*id) / SHARDS_PER_PASS == pass)
                    .expect("an id in every pass")
            })
            .collect();
        for (pass, stray) in strays.iter().enumerate() {
            for threads in [1, 3] {
                let groups = vec![
                    ids[..10_000].to_vec(),
                    vec![ids[10_000], *stray],
                    ids[10_001..].to_vec(),
                ];
                assert_eq!(
                    index.first_missing(groups, threads),
                    Some(*stray),
                    "pass {pass}"
                );
            }
        }
        assert_eq!(index.first_missing(vec![ids.clone(), ids], 2), None);
    }

    /// A view's copy shares every shard; an insert then copies the pointer array and the one
    /// shard it lands in, and leaves the view's index as it was.
    #[test]
    fn an_insert_copies_only_the_shard_it_lands_in() {
        let ids: Vec<AccountId> = (0..50_000u64).map(|x| AccountId(x * 7 + 3)).collect();
        let mut state = SlotIndex::from_ids(&ids, 2).expect("distinct ids");
        let view = state.clone();
        assert!(view.shares_all_with(&state));
        assert_eq!(state.insert(AccountId(1), 50_000), None);
        assert!(!view.shares_all_with(&state));
        assert_eq!(view.shards_shared_with(&state), SHARDS - 1);
        assert_eq!(view.get(&AccountId(1)), None);
        assert_eq!(state[&AccountId(1)], 50_000);
        assert_eq!((view.len(), state.len()), (50_000, 50_001));
        assert_eq!(state.insert(AccountId(1), 7), Some(50_000));
        assert_eq!(state.len(), 50_001);
    }

    /// The memory gauges' bucket rule inverts the standard map's capacity: for a map made for
    /// any number of entries, the buckets found are a power of two whose usable share (one
    /// less below 8, 7/8 from 8 up) is the capacity the map reports, and at least the entries.
    #[test]
    fn a_map_s_buckets_are_found_from_its_capacity() {
        assert_eq!(hash_map_heap_bytes(0, 16), 0);
        for entries in (1..2_000).chain([2_441, 10_000, 100_000]) {
            let map: SlotMap = HashMap::with_capacity_and_hasher(entries, Default::default());
            let capacity = map.capacity();
            let buckets = (hash_map_heap_bytes(capacity, 0)) as usize;
            assert!(buckets.is_power_of_two(), "{entries}: {buckets} buckets");
            let usable = if buckets < 8 {
                buckets - 1
            } else {
                buckets / 8 * 7
            };
            assert_eq!(usable, capacity, "{entries} entries");
            assert!(capacity >= entries);
            assert_eq!(hash_map_heap_bytes(capacity, 16), (buckets * 17) as u64);
        }
    }
}
