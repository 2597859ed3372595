//! What one block's edits cost the clearing books, on books shaped like the soak's (issue 32):
//! 10 assets (90 pairs), limits within about 2% of the price, and per pair and block 12 fills
//! near the price, 2 cancels anywhere and 18 new offers (about 2,900 edits a block, as a
//! 2,000-transaction block of `walras loadgen`'s mix makes). Prints the median and mean time of
//! the edit per block, and of dropping the books it replaced (the node drops them
//! a block later). `take` edits as a block that executes does (the solo proposer, a follower's
//! apply): [`OrderBooks::edited_from`] consumes the previous books, moving their unedited
//! chunks and dropping the replaced ones (timed with the edit), and the books after reuse
//! their emptied arrays.
//! `share` edits as a proposal's header does ([`OrderBooks::edited_by_pair`]'s sharing).
//!
//! `cargo run --release -p walras-clearing --example book_edit -- [OFFERS_PER_PAIR] [BLOCKS]
//! [THREADS] [CHUNK_MEAN] [take|share]` (defaults 10000 60 2 128 take)
//!
//! An example, not a criterion bench: one run is a whole sequence of blocks on one growing state,
//! and the figure wanted is per block at that state's size. The allocator is the node's.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeSet;
use std::time::Instant;
use walras_clearing::{BookBuffers, OfferEdit, OrderBooks, CHUNK_OFFERS_MEAN};
use walras_sim::Rng;
use walras_types::{AccountId, AssetId, Offer, OfferId, Price};

const ASSETS: usize = 10;
/// Blocks run before timing starts.
const WARM_UP_BLOCKS: usize = 5;

fn normal(rng: &mut Rng) -> f64 {
    let u1 = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn offer(rng: &mut Rng, sell: usize, buy: usize, id: u64) -> Offer {
    Offer {
        id: OfferId(id),
        account: AccountId(1 + rng.next_u64() % 10_000),
        sell: AssetId(sell as u16),
        buy: AssetId(buy as u16),
        amount: 1 + rng.next_u64() % 1000,
        min_price: Price::from_f64(1.0 + 0.02 * normal(rng)),
    }
}

fn argument<T: std::str::FromStr>(at: usize, default: T) -> T {
    std::env::args()
        .nth(at)
        .map(|text| {
            text.parse()
                .unwrap_or_else(|_| panic!("argument {at}: {text:?}"))
        })
        .unwrap_or(default)
}

/// One pair's edits for a block, applied to its open `list` (canonical order) as well.
fn pair_edits(
    rng: &mut Rng,
    list: &mut Vec<Offer>,
    pair: (usize, usize),
    id: &mut u64,
) -> Vec<OfferEdit> {
    let mut removed = BTreeSet::new();
    for _ in 0..12 {
        let near = Price::from_f64(1.0 + 0.005 * normal(rng));
        removed.insert(
            list.partition_point(|o| o.min_price < near)
                .min(list.len() - 1),
        );
    }
    for _ in 0..2 {
        removed.insert(rng.next_u64() as usize % list.len());
    }
    let mut edits: Vec<OfferEdit> = removed
        .iter()
        .map(|at| OfferEdit::Remove(list[*at].key()))
        .collect();
    for _ in 0..18 {
        edits.push(OfferEdit::Insert(offer(rng, pair.0, pair.1, *id)));
        *id += 1;
    }
    edits.sort_by_key(OfferEdit::key);
    for at in removed.iter().rev() {
        list.remove(*at);
    }
    for edit in &edits {
        if let OfferEdit::Insert(new) = edit {
            let at = list.partition_point(|o| o.key() < new.key());
            list.insert(at, *new);
        }
    }
    edits
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let per_pair: usize = argument(1, 10_000);
    let blocks: usize = argument(2, 60).max(WARM_UP_BLOCKS + 1);
    let threads: usize = argument(3, 2);
    let mean: u32 = argument(4, CHUNK_OFFERS_MEAN);
    let take = match argument(5, "take".to_string()).as_str() {
        "take" => true,
        "share" => false,
        other => panic!("argument 5: {other:?} is neither take nor share"),
    };
    let mut rng = Rng::new(7);
    let mut id = 1u64;
    let mut lists: Vec<Vec<Offer>> = vec![Vec::new(); ASSETS * ASSETS];
    let pairs: Vec<(usize, usize)> = (0..ASSETS)
        .flat_map(|sell| (0..ASSETS).map(move |buy| (sell, buy)))
        .filter(|(sell, buy)| sell != buy)
        .collect();
    for &(sell, buy) in &pairs {
        let list = &mut lists[sell * ASSETS + buy];
        for _ in 0..per_pair {
            list.push(offer(&mut rng, sell, buy, id));
            id += 1;
        }
        list.sort_by_key(Offer::key);
    }
    let mut books =
        OrderBooks::from_sorted_pairs_with_chunk_mean(lists.clone(), ASSETS, threads, mean)
            .expect("generated offers are valid");
    let (mut edit_ms, mut drop_ms) = (Vec::new(), Vec::new());
    let mut spare = BookBuffers::default();
    for block in 0..blocks {
        // Per pair, in pair order, as both paths take them.
        let edits: Vec<(usize, Vec<(usize, OfferEdit)>)> = pairs
            .iter()
            .map(|&pair| {
                let index = pair.0 * ASSETS + pair.1;
                let mine = pair_edits(&mut rng, &mut lists[index], pair, &mut id);
                (index, mine.into_iter().map(|edit| (index, edit)).collect())
            })
            .collect();
        let started = Instant::now();
        let replaced = if take {
            let (next, emptied) =
                OrderBooks::edited_from(books, &edits, std::mem::take(&mut spare), threads)
                    .expect("the edits apply");
            books = next;
            spare = emptied;
            None
        } else {
            let next = OrderBooks::edited_by_pair(&books, &edits, Default::default(), threads)
                .expect("the edits apply");
            Some(std::mem::replace(&mut books, next))
        };
        let edited = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        drop(replaced);
        if block >= WARM_UP_BLOCKS {
            edit_ms.push(edited);
            drop_ms.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    let mean_of = |values: &[f64]| values.iter().sum::<f64>() / values.len() as f64;
    println!(
        "{} offers in {} chunks (mean {mean}), {threads} threads, {} blocks timed: edit median {:.3} ms (mean {:.3}), drop median {:.3} ms",
        books.offer_count(),
        books.chunk_count(),
        edit_ms.len(),
        median(edit_ms.clone()),
        mean_of(&edit_ms),
        median(drop_ms),
    );
}
