//! Venue valuations to one published price per asset (the paper's §1.5, which gives no formula).
//!
//! Per asset: each venue's valuation is converted to the numeraire (USD) through the oracle's own
//! price of the venue's quote currency (a stablecoin is never assumed worth exactly 1: USDT and
//! USDC are priced first, from their own books, and an asset quoted in an unpriced stablecoin is
//! excluded with that reason); books that are not `Synced` are excluded with their health;
//! venues further from the median venue price (by count, so that one venue holding most of the
//! liquidity cannot outvote the rest) than
//! `max(outlier_bps_min, outlier_mad_k × median absolute deviation)` are rejected; a survivor
//! that no *other* venue's book corroborates (its price within that venue's bid–ask spread, or
//! within `agree_bps_min` of that venue's price) is rejected too, so that one venue quoting a
//! wrong price just inside the outlier band cannot count towards `venues_min`; no venue's weight
//! may exceed half the other venues' together, so that no venue sets the price alone; the
//! liquidity-weighted median of the survivors is published, with status `Ok` when at least
//! `venues_min` distinct venues remain.

use crate::book::Health;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One instrument's state at a publication instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstrumentQuote {
    pub venue: String,
    pub symbol: String,
    pub base: String,
    pub quote: String,
    pub health: Health,
    /// Valuation in the instrument's quote currency; `None` when the book could not be valued.
    pub price: Option<f64>,
    /// Quote notional within the liquidity band (weight).
    pub liquidity: f64,
    pub last_update_ns: u64,
    /// Why the valuation failed, when it did.
    pub value_error: Option<String>,
    /// The book's bid–ask spread, basis points of its mid (`None` when a side is empty): how
    /// far from this venue's price another venue may be and still agree with it.
    #[serde(default)]
    pub spread_bps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggregateConfig {
    pub numeraire: String,
    /// Priced first, in this order, so that other assets can be converted through them.
    pub stablecoins: Vec<String>,
    pub venues_min: usize,
    pub outlier_bps_min: f64,
    pub outlier_mad_k: f64,
    /// Two venues agree when their prices are within this many basis points, or within the
    /// spread of the venue agreed with, whichever is wider.
    #[serde(default = "agree_bps_min_default")]
    pub agree_bps_min: f64,
}

fn agree_bps_min_default() -> f64 {
    AGREE_BPS_MIN_DEFAULT
}

/// Venues of one liquid asset stay within a few basis points of each other; a venue 10 bps or
/// more away from every other venue (and outside each one's spread) speaks for itself alone.
pub const AGREE_BPS_MIN_DEFAULT: f64 = 10.0;

impl Default for AggregateConfig {
    fn default() -> Self {
        AggregateConfig {
            numeraire: "USD".into(),
            stablecoins: vec!["USDT".into(), "USDC".into()],
            venues_min: 3,
            outlier_bps_min: 50.0,
            outlier_mad_k: 5.0,
            agree_bps_min: AGREE_BPS_MIN_DEFAULT,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PriceStatus {
    Ok,
    /// Fewer than `venues_min` venues survived; the price is shown but must not be relied on.
    InsufficientVenues,
    Unavailable,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsedVenue {
    pub venue: String,
    pub symbol: String,
    pub price: f64,
    /// The weight the median used: the venue's liquidity, capped at the other survivors'
    /// weights together.
    pub weight: f64,
    /// The venue's spread (bps of its mid), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_bps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ExcludedVenue {
    pub venue: String,
    pub symbol: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishedPrice {
    pub asset: String,
    pub price: Option<f64>,
    pub status: PriceStatus,
    /// Age of the oldest book used.
    pub age_ns: u64,
    /// Weighted median absolute deviation of the used venues, basis points of the price.
    pub dispersion_bps: f64,
    pub venues_used: Vec<UsedVenue>,
    pub venues_excluded: Vec<ExcludedVenue>,
    pub method: String,
}

/// Weighted median of `(value, weight)` pairs sorted by value; the lower median on an exact tie.
pub fn weighted_median(sorted: &[(f64, f64)]) -> Option<f64> {
    let total: f64 = sorted.iter().map(|p| p.1).sum();
    if sorted.is_empty() || total.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return None;
    }
    let mut cumulative = 0.0;
    for &(value, weight) in sorted {
        cumulative += weight;
        if cumulative * 2.0 >= total {
            return Some(value);
        }
    }
    sorted.last().map(|p| p.0)
}

fn sort_pairs(pairs: &mut [(f64, f64)]) {
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
}

/// Aggregates one asset. `rates` holds USD prices of quote currencies already published (status Ok).
pub fn aggregate_asset(
    asset: &str,
    quotes: &[InstrumentQuote],
    rates: &BTreeMap<String, f64>,
    now_ns: u64,
    cfg: &AggregateConfig,
    method: &str,
) -> PublishedPrice {
    let mut candidates: Vec<UsedVenue> = Vec::new();
    let mut excluded: Vec<ExcludedVenue> = Vec::new();
    let mut ages: Vec<u64> = Vec::new();
    let exclude = |q: &InstrumentQuote, reason: String| ExcludedVenue {
        venue: q.venue.clone(),
        symbol: q.symbol.clone(),
        reason,
    };
    for q in quotes {
        if !q.health.is_good() {
            excluded.push(exclude(q, format!("health: {}", health_text(&q.health))));
            continue;
        }
        let Some(price) = q.price else {
            excluded.push(exclude(
                q,
                format!("not valued: {}", q.value_error.clone().unwrap_or_default()),
            ));
            continue;
        };
        let rate = if q.quote == cfg.numeraire {
            Some(1.0)
        } else {
            rates.get(&q.quote).copied()
        };
        let Some(rate) = rate else {
            excluded.push(exclude(q, format!("quote leg {} unpriced", q.quote)));
            continue;
        };
        if !(price.is_finite() && price > 0.0 && q.liquidity > 0.0) {
            excluded.push(exclude(q, "thin: no liquidity within band".into()));
            continue;
        }
        candidates.push(UsedVenue {
            venue: q.venue.clone(),
            symbol: q.symbol.clone(),
            price: price * rate,
            weight: q.liquidity * rate,
            spread_bps: q.spread_bps,
        });
        ages.push(now_ns.saturating_sub(q.last_update_ns));
    }
    // The outlier reference is the median by venue count, not by weight: one venue holding most
    // of the liquidity must not be able to declare every other venue an outlier.
    let mut pairs: Vec<(f64, f64)> = candidates.iter().map(|c| (c.price, 1.0)).collect();
    sort_pairs(&mut pairs);
    let first = weighted_median(&pairs);
    let mut used = Vec::new();
    let mut used_ages = Vec::new();
    if let Some(m) = first {
        let mut devs: Vec<(f64, f64)> = candidates
            .iter()
            .map(|c| ((c.price - m).abs() / m, 1.0))
            .collect();
        sort_pairs(&mut devs);
        let mad = weighted_median(&devs).unwrap_or(0.0);
        let threshold = (cfg.outlier_bps_min / 1e4).max(cfg.outlier_mad_k * mad);
        for (c, age) in candidates.into_iter().zip(ages) {
            let dev = (c.price - m).abs() / m;
            if dev > threshold {
                excluded.push(ExcludedVenue {
                    venue: c.venue,
                    symbol: c.symbol,
                    reason: format!(
                        "outlier: {:.1} bps from median, limit {:.1}",
                        dev * 1e4,
                        threshold * 1e4
                    ),
                });
            } else {
                used.push(c);
                used_ages.push(age);
            }
        }
    }
    let (mut used, uncorroborated) = split_corroborated(used, used_ages, cfg.agree_bps_min);
    let used_ages: Vec<u64> = used.iter().map(|(_, age)| *age).collect();
    excluded.extend(uncorroborated);
    cap_weights(&mut used);
    let mut used: Vec<UsedVenue> = used.into_iter().map(|(venue, _)| venue).collect();
    let mut pairs: Vec<(f64, f64)> = used.iter().map(|c| (c.price, c.weight)).collect();
    sort_pairs(&mut pairs);
    let price = weighted_median(&pairs);
    let dispersion_bps = match price {
        Some(p) => {
            let mut devs: Vec<(f64, f64)> = used
                .iter()
                .map(|c| ((c.price - p).abs() / p * 1e4, c.weight))
                .collect();
            sort_pairs(&mut devs);
            weighted_median(&devs).unwrap_or(0.0)
        }
        None => 0.0,
    };
    let venues: std::collections::BTreeSet<&str> = used.iter().map(|c| c.venue.as_str()).collect();
    let status = match venues.len() {
        0 => PriceStatus::Unavailable,
        n if n < cfg.venues_min => PriceStatus::InsufficientVenues,
        _ => PriceStatus::Ok,
    };
    used.sort_by(|a, b| (&a.venue, &a.symbol).cmp(&(&b.venue, &b.symbol)));
    excluded.sort();
    PublishedPrice {
        asset: asset.to_string(),
        price,
        status,
        age_ns: used_ages.iter().copied().max().unwrap_or(0),
        dispersion_bps,
        venues_used: used,
        venues_excluded: excluded,
        method: method.to_string(),
    }
}

/// Whether `other`'s book backs `price`: within `other`'s spread of its price, or within
/// `agree_bps_min` of it.
fn agrees_with(price: f64, other: &UsedVenue, agree_bps_min: f64) -> bool {
    let tolerance_bps = other.spread_bps.unwrap_or(0.0).max(agree_bps_min);
    (price - other.price).abs() / other.price * 1e4 <= tolerance_bps
}

/// Splits survivors into those some other venue's book backs and the rest (excluded, with the
/// reason). With a single survivor there is nothing to corroborate against: it stays, and
/// `venues_min` decides what its price is worth.
fn split_corroborated(
    used: Vec<UsedVenue>,
    ages: Vec<u64>,
    agree_bps_min: f64,
) -> (Vec<(UsedVenue, u64)>, Vec<ExcludedVenue>) {
    let distinct: std::collections::BTreeSet<&str> =
        used.iter().map(|c| c.venue.as_str()).collect();
    if distinct.len() < 2 {
        return (used.into_iter().zip(ages).collect(), Vec::new());
    }
    let backed: Vec<bool> = used
        .iter()
        .map(|c| {
            used.iter()
                .any(|o| o.venue != c.venue && agrees_with(c.price, o, agree_bps_min))
        })
        .collect();
    let mut kept = Vec::new();
    let mut excluded = Vec::new();
    for ((c, age), backed) in used.into_iter().zip(ages).zip(backed) {
        if backed {
            kept.push((c, age));
        } else {
            excluded.push(ExcludedVenue {
                venue: c.venue,
                symbol: c.symbol,
                reason: format!(
                    "uncorroborated: no other venue within {agree_bps_min:.1} bps or its spread"
                ),
            });
        }
    }
    (kept, excluded)
}

/// Caps venue weights (all of a venue's instruments together) so that, with three venues or
/// more, none holds more than a third of the capped total: every venue's weight is at most half
/// the others' together, so none can set the weighted median alone, whatever depth it shows.
/// The cap `c` is the largest with `3c ≤ Σ min(w_v, c)` (water-filling over the sorted venue
/// weights), so the property holds on the capped weights themselves.
///
/// Trigger: caps used to be computed venue by venue from the *uncapped* weights (each at half
/// the others' uncapped total). A liar of weight 10,000 beside honest venues of 1,000 and
/// 19,000 capped the big honest one to 5,500 and kept its own 10,000 — more than both honest
/// venues together — and set the price alone (proptest `one_venue_alone_never_moves_the_price
/// _outside_the_honest_ones`). With two venues no cap can keep either from the median; each
/// is then capped at half the other's weight, as before.
fn cap_weights(used: &mut [(UsedVenue, u64)]) {
    let mut by_venue: BTreeMap<String, f64> = BTreeMap::new();
    for (c, _) in used.iter() {
        *by_venue.entry(c.venue.clone()).or_default() += c.weight;
    }
    let Some(cap) = venue_cap(&by_venue.values().copied().collect::<Vec<f64>>()) else {
        return;
    };
    for (c, _) in used.iter_mut() {
        let own = by_venue[&c.venue];
        let venue_cap = if by_venue.len() == 2 {
            let other: f64 = by_venue.values().sum::<f64>() - own;
            own.min(other / 2.0)
        } else {
            own.min(cap)
        };
        if own > 0.0 && venue_cap < own {
            c.weight *= venue_cap / own;
        }
    }
}

/// The water-filling cap of [`cap_weights`] for three venues or more; `None` (no cap) with
/// fewer than two venues. With exactly two, `Some(+inf)`: the caller caps pairwise.
fn venue_cap(weights: &[f64]) -> Option<f64> {
    if weights.len() < 2 {
        return None;
    }
    if weights.len() == 2 {
        return Some(f64::INFINITY);
    }
    let mut sorted = weights.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let total: f64 = sorted.iter().sum();
    if 3.0 * sorted[0] <= total {
        return Some(f64::INFINITY);
    }
    // The top venue capped: c = (the others) / 2, valid when the second is at most c.
    let cap = (total - sorted[0]) / 2.0;
    if sorted[1] <= cap {
        return Some(cap);
    }
    // The top two capped: c = (the rest), valid when the third is at most c; else the top
    // three share the third's weight.
    let rest = total - sorted[0] - sorted[1];
    Some(rest.max(sorted[2]).min(sorted[1]))
}

pub fn health_text(h: &Health) -> String {
    match h {
        Health::Synced => "synced".into(),
        Health::Crossed => "crossed".into(),
        Health::Stale => "stale".into(),
        Health::Thin => "thin".into(),
        Health::Resyncing(r) => format!(
            "resyncing ({})",
            serde_json::to_string(r).unwrap_or_default()
        ),
    }
}

/// Aggregates every asset: stablecoins first (in `cfg.stablecoins` order), then the rest by name.
/// `quotes` may come in any order; the output is sorted by asset.
pub fn aggregate_all(
    quotes: &[InstrumentQuote],
    now_ns: u64,
    cfg: &AggregateConfig,
    method: &str,
) -> Vec<PublishedPrice> {
    let mut by_asset: BTreeMap<&str, Vec<InstrumentQuote>> = BTreeMap::new();
    for q in quotes {
        by_asset.entry(q.base.as_str()).or_default().push(q.clone());
    }
    for list in by_asset.values_mut() {
        list.sort_by(|a, b| (&a.venue, &a.symbol).cmp(&(&b.venue, &b.symbol)));
    }
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    let mut out: BTreeMap<String, PublishedPrice> = BTreeMap::new();
    let order = cfg
        .stablecoins
        .iter()
        .map(String::as_str)
        .filter(|s| by_asset.contains_key(s))
        .chain(
            by_asset
                .keys()
                .copied()
                .filter(|a| !cfg.stablecoins.iter().any(|s| s == a)),
        );
    for asset in order.collect::<Vec<_>>() {
        let published = aggregate_asset(asset, &by_asset[asset], &rates, now_ns, cfg, method);
        if let (Some(p), PriceStatus::Ok) = (published.price, published.status) {
            rates.insert(asset.to_string(), p);
        }
        out.insert(asset.to_string(), published);
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::venue_cap;
    use proptest::prelude::*;

    fn capped(weights: &[f64]) -> Vec<f64> {
        let cap = venue_cap(weights).unwrap();
        weights.iter().map(|w| w.min(cap)).collect()
    }

    /// The trigger of the cap's fix: a liar (10,000) beside honest venues of 1,000 and 19,000.
    #[test]
    fn a_liar_heavier_than_all_but_one_honest_venue_is_capped_below_the_honest_together() {
        let weights = capped(&[1_000.0, 19_000.0, 10_000.0]);
        assert!(weights[2] < weights[0] + weights[1], "{weights:?}");
    }

    proptest! {
        /// With three venues or more, no capped venue holds more than a third of the capped
        /// total, and a venue at or below the cap keeps its weight.
        #[test]
        fn no_venue_holds_more_than_a_third_after_capping(
            weights in prop::collection::vec(0.001f64..1e9, 3..12)
        ) {
            let cap = venue_cap(&weights).unwrap();
            let after = capped(&weights);
            let total: f64 = after.iter().sum();
            for (before, after) in weights.iter().zip(&after) {
                prop_assert!(3.0 * after <= total * (1.0 + 1e-12), "{after} of {total}");
                if *before <= cap {
                    prop_assert_eq!(before, after);
                }
            }
        }
    }
}
