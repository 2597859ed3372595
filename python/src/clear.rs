//! `walras.clear`: one batch of offers cleared by `walras_clearing`, exactly as `walras clear`
//! clears it (the same books, the same parameters through `walras_bench`'s `ClearingArgs`, the
//! same prices, in units of asset 0).
//!
//! Offers arrive in one of two forms: a CSV path, read by the CLI's own reader
//! (`walras_types::offers_csv`), or columns. Columns are contiguous little buffers the Python
//! side made from numpy arrays (`ndarray.tobytes()`: one memcpy per column, no Python object
//! per row), read here with the GIL released. Every row is checked with the CSV reader's rules
//! and a bad one is refused naming its column and row.

use crate::{guarded, value_error};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::fs::File;
use std::io::BufReader;
use std::time::Instant;
use walras_bench::clearing_args::ClearingArgs;
use walras_clearing::{Clearing, OrderBooks, SupplyGrid};
use walras_types::{offers_csv, AccountId, AssetId, Fraction, Offer, OfferId, Price, MAX_AMOUNT};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(clear_columns, m)?)?;
    m.add_function(wrap_pyfunction!(clear_csv, m)?)?;
    Ok(())
}

/// What the caller asked for besides the offers.
struct Request {
    assets: usize,
    args: ClearingArgs,
    threads: usize,
}

/// A finished clearing and the figures the result reports.
struct Outcome {
    clearing: Clearing,
    /// Per-offer fills (the CLI's `--fills` rows) as three native-endian u64 columns, made
    /// while the GIL is released.
    fills: FillColumns,
    offers: usize,
    read_millis: f64,
    prepare_millis: f64,
    grid_millis: f64,
}

/// The limit prices of a column: binary f64 (each the decimal Python prints for it), or the
/// decimal texts themselves, separated by newlines (exactly as the CSV would hold them).
#[derive(Clone, Copy)]
enum PriceColumn<'a> {
    Float(&'a [u8]),
    Text(&'a str),
}

/// Clears offers given as columns. Each integer column is `rows` native-endian u64s; `prices`
/// is `rows` f64s (`price_kind` "float") or UTF-8 decimals joined by `\n` ("text").
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (offer_id, account, sell, buy, amount, prices, price_kind, rows, assets, epsilon, mu, threads, timeout_ms))]
fn clear_columns<'py>(
    py: Python<'py>,
    offer_id: &Bound<'py, PyBytes>,
    account: &Bound<'py, PyBytes>,
    sell: &Bound<'py, PyBytes>,
    buy: &Bound<'py, PyBytes>,
    amount: &Bound<'py, PyBytes>,
    prices: &Bound<'py, PyBytes>,
    price_kind: &str,
    rows: usize,
    assets: usize,
    epsilon: &str,
    mu: &str,
    threads: usize,
    timeout_ms: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let request = request(assets, epsilon, mu, threads, timeout_ms)?;
    let columns = Columns {
        offer_id: offer_id.as_bytes(),
        account: account.as_bytes(),
        sell: sell.as_bytes(),
        buy: buy.as_bytes(),
        amount: amount.as_bytes(),
        prices: match price_kind {
            "float" => PriceColumn::Float(prices.as_bytes()),
            "text" => PriceColumn::Text(
                std::str::from_utf8(prices.as_bytes())
                    .map_err(|_| value_error("column 'min_price': the texts are not UTF-8"))?,
            ),
            other => return Err(value_error(format!("unknown price kind {other:?}"))),
        },
        rows,
    };
    let outcome = guarded(py, "clearing", || {
        let started = Instant::now();
        let offers = columns.offers(assets)?;
        let read_millis = started.elapsed().as_secs_f64() * 1e3;
        clear_offers(offers, &request, read_millis)
    })?;
    report(py, &request, &outcome)
}

/// Clears the offers CSV at `path` (the `walras clear --offers` format and reader).
#[pyfunction]
#[pyo3(signature = (path, assets, epsilon, mu, threads, timeout_ms))]
fn clear_csv<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    assets: usize,
    epsilon: &str,
    mu: &str,
    threads: usize,
    timeout_ms: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let request = request(assets, epsilon, mu, threads, timeout_ms)?;
    let outcome = guarded(py, "clearing", || {
        let started = Instant::now();
        let file = File::open(&path)
            .map_err(|error| value_error(format!("cannot open {}: {error}", path.display())))?;
        let offers = offers_csv::read_offers(BufReader::new(file), assets)
            .map_err(|error| value_error(format!("{}: {error}", path.display())))?;
        let read_millis = started.elapsed().as_secs_f64() * 1e3;
        clear_offers(offers, &request, read_millis)
    })?;
    report(py, &request, &outcome)
}

/// The parameters, parsed by the CLI's own parsers (so `2^-15` and `0.001` both work and the
/// same values are refused).
fn request(
    assets: usize,
    epsilon: &str,
    mu: &str,
    threads: usize,
    timeout_ms: u64,
) -> PyResult<Request> {
    walras_types::parse::asset_count(&assets.to_string())
        .map_err(|error| value_error(format!("assets: {error}")))?;
    walras_types::parse::thread_count(&threads.to_string())
        .map_err(|error| value_error(format!("threads: {error}")))?;
    if !(1..=3_600_000).contains(&timeout_ms) {
        return Err(value_error(format!(
            "timeout_ms: {timeout_ms} is outside 1..=3600000"
        )));
    }
    let fraction = |name: &str, text: &str| -> PyResult<Fraction> {
        walras_types::parse::fraction(text).map_err(|error| value_error(format!("{name}: {error}")))
    };
    Ok(Request {
        assets,
        args: ClearingArgs {
            epsilon: fraction("epsilon", epsilon)?,
            mu: fraction("mu", mu)?,
            timeout_ms,
        },
        threads,
    })
}

/// `walras clear`'s steps after reading: books, supply grid, clearing.
fn clear_offers(offers: Vec<Offer>, request: &Request, read_millis: f64) -> PyResult<Outcome> {
    let offer_count = offers.len();
    let prepare_started = Instant::now();
    let books = OrderBooks::build(offers, request.assets, request.threads)
        .map_err(|error| value_error(error.to_string()))?;
    let grid_started = Instant::now();
    let supply_grid = SupplyGrid::for_mu(&books, request.args.mu);
    let grid_millis = grid_started.elapsed().as_secs_f64() * 1e3;
    let prepare_millis = prepare_started.elapsed().as_secs_f64() * 1e3;
    let params = request.args.params();
    let clearing = request
        .args
        .clear(&books, supply_grid.as_ref(), &params, request.threads)
        .map_err(|error| value_error(format!("clearing refused the batch: {error}")))?;
    let fills = FillColumns::of(&clearing, &books);
    Ok(Outcome {
        fills,
        clearing,
        offers: offer_count,
        read_millis,
        prepare_millis,
        grid_millis,
    })
}

/// The offers as columns of one batch.
struct Columns<'a> {
    offer_id: &'a [u8],
    account: &'a [u8],
    sell: &'a [u8],
    buy: &'a [u8],
    amount: &'a [u8],
    prices: PriceColumn<'a>,
    rows: usize,
}

const WORD_BYTES: usize = 8;

/// Row `row` of a column of native-endian u64s.
fn word(column: &[u8], row: usize) -> u64 {
    let at = row * WORD_BYTES;
    let mut bytes = [0u8; WORD_BYTES];
    bytes.copy_from_slice(&column[at..at + WORD_BYTES]);
    u64::from_ne_bytes(bytes)
}

impl Columns<'_> {
    /// Every row as an offer, checked with the offers CSV's rules; the first bad row is
    /// refused naming its column and row (rows count from 0, as in the DataFrame).
    fn offers(&self, assets: usize) -> PyResult<Vec<Offer>> {
        self.check_lengths()?;
        let texts: Option<Vec<&str>> = match self.prices {
            PriceColumn::Text(_) if self.rows == 0 => Some(Vec::new()),
            PriceColumn::Text(text) => Some(text.split('\n').collect()),
            PriceColumn::Float(_) => None,
        };
        if let Some(texts) = &texts {
            if texts.len() != self.rows {
                return Err(value_error(format!(
                    "column 'min_price': {} texts for {} rows",
                    texts.len(),
                    self.rows
                )));
            }
        }
        let mut offers = Vec::with_capacity(self.rows);
        let mut totals = vec![0u64; assets];
        for row in 0..self.rows {
            let offer = self.offer(row, assets, texts.as_deref())?;
            let total = &mut totals[offer.sell.0 as usize];
            *total = total
                .checked_add(offer.amount)
                .filter(|sum| *sum <= MAX_AMOUNT)
                .ok_or_else(|| {
                    value_error(format!(
                        "row {row}: offers of asset {} add up to more than the issuance cap 2^63-1",
                        offer.sell.0
                    ))
                })?;
            offers.push(offer);
        }
        refuse_duplicate_ids(&offers)?;
        Ok(offers)
    }

    fn check_lengths(&self) -> PyResult<()> {
        let expected = self.rows * WORD_BYTES;
        let mut columns = vec![
            ("offer_id", self.offer_id.len()),
            ("account", self.account.len()),
            ("sell", self.sell.len()),
            ("buy", self.buy.len()),
            ("amount", self.amount.len()),
        ];
        if let PriceColumn::Float(bytes) = self.prices {
            columns.push(("min_price", bytes.len()));
        }
        match columns.iter().find(|(_, len)| *len != expected) {
            Some((name, len)) => Err(value_error(format!(
                "column '{name}' holds {len} bytes, not {expected} ({} rows of 8 bytes)",
                self.rows
            ))),
            None => Ok(()),
        }
    }

    fn offer(&self, row: usize, assets: usize, texts: Option<&[&str]>) -> PyResult<Offer> {
        let asset = |column: &str, bytes: &[u8]| -> PyResult<AssetId> {
            let asset = word(bytes, row);
            if asset >= assets as u64 {
                return Err(value_error(format!(
                    "row {row}: column '{column}': asset {asset} is unknown (assets are 0..{})",
                    assets - 1
                )));
            }
            Ok(AssetId(asset as u16))
        };
        let sell = asset("sell", self.sell)?;
        let buy = asset("buy", self.buy)?;
        if sell == buy {
            return Err(value_error(format!(
                "row {row}: offer sells and buys the same asset {}",
                sell.0
            )));
        }
        let amount = word(self.amount, row);
        if amount == 0 || amount > MAX_AMOUNT {
            return Err(value_error(format!(
                "row {row}: column 'amount': {amount} is not in 1..=2^63-1"
            )));
        }
        Ok(Offer {
            id: OfferId(word(self.offer_id, row)),
            account: AccountId(word(self.account, row)),
            sell,
            buy,
            amount,
            min_price: self.limit(row, texts)?,
        })
    }

    fn limit(&self, row: usize, texts: Option<&[&str]>) -> PyResult<Price> {
        let parsed = match (texts, self.prices) {
            (Some(texts), _) => Price::parse_limit(texts[row].trim()),
            (None, PriceColumn::Float(bytes)) => {
                let value = f64::from_bits(word(bytes, row));
                // The decimal Python prints for the float (shortest round trip), rounded up
                // as the CSV's decimals are: a DataFrame written with to_csv clears the same.
                Price::parse_limit(&format!("{value:e}"))
            }
            (None, PriceColumn::Text(_)) => unreachable!("texts are split before the rows"),
        };
        parsed.map_err(|error| value_error(format!("row {row}: column 'min_price': {error}")))
    }
}

/// The CSV reader's rule: an `offer_id` appears once in a batch.
fn refuse_duplicate_ids(offers: &[Offer]) -> PyResult<()> {
    let mut ids: Vec<(u64, usize)> = offers
        .iter()
        .enumerate()
        .map(|(row, offer)| (offer.id.0, row))
        .collect();
    ids.sort_unstable();
    match ids.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        Some(pair) => Err(value_error(format!(
            "row {}: column 'offer_id': {} was already used on row {}",
            pair[1].1, pair[1].0, pair[0].1
        ))),
        None => Ok(()),
    }
}

/// The result, with the field names of `walras clear --json` (fills as three u64 columns).
fn report<'py>(
    py: Python<'py>,
    request: &Request,
    outcome: &Outcome,
) -> PyResult<Bound<'py, PyDict>> {
    let clearing = &outcome.clearing;
    let settlement = &clearing.settlement;
    let quality = &clearing.quality;
    let dict = PyDict::new(py);
    // The CLI's function, so the prices are the CLI's (which prints them as 12-digit decimal
    // strings): units of asset 0, `None` (NaN in the array) for an asset that did not trade in
    // one group with asset 0; each the double nearest the exact Q48.80 rate.
    let prices: Vec<Option<f64>> = walras_bench::clear::prices_in_asset0(settlement)
        .iter()
        .map(|price| price.map(|price| price.to_f64()))
        .collect();
    let valuations: Vec<u128> = settlement.valuations().iter().map(|v| v.0).collect();
    dict.set_item("assets", request.assets)?;
    dict.set_item("offers", outcome.offers)?;
    dict.set_item("prices", prices)?;
    dict.set_item("valuations", valuations)?;
    let trades = PyList::empty(py);
    for pair in settlement.pairs().iter().filter(|pair| pair.sold > 0) {
        trades.append((
            pair.sell,
            pair.buy,
            pair.sold,
            pair.bought,
            pair.rate.to_f64(),
        ))?;
    }
    dict.set_item("trades", trades)?;
    dict.set_item("burned", settlement.burned().to_vec())?;
    dict.set_item("converged", clearing.converged)?;
    dict.set_item("prices_converged", clearing.prices_converged)?;
    dict.set_item("iterations", clearing.iterations)?;
    dict.set_item("cut_steps", clearing.cut_steps)?;
    dict.set_item("instance", clearing.instance)?;
    dict.set_item("epsilon", request.args.epsilon.to_f64())?;
    dict.set_item("mu", request.args.mu.to_f64())?;
    dict.set_item("achieved_epsilon", quality.achieved_epsilon)?;
    dict.set_item("achieved_mu", quality.achieved_mu)?;
    dict.set_item("realized_utility", quality.realized_utility)?;
    dict.set_item("unrealized_utility", quality.unrealized_utility)?;
    let ratio = quality.unrealized_utility_ratio;
    dict.set_item(
        "unrealized_utility_ratio",
        ratio.is_finite().then_some(ratio),
    )?;
    dict.set_item("lp_with_lower_bounds", settlement.lp_with_lower_bounds())?;
    dict.set_item("repairs", settlement.repairs())?;
    dict.set_item("mu_shortfall", settlement.mu_shortfall())?;
    dict.set_item("threads", request.threads)?;
    dict.set_item("millis", clearing.millis())?;
    dict.set_item("price_millis", clearing.price_millis)?;
    dict.set_item("settle_millis", clearing.settle_millis)?;
    dict.set_item("prepare_millis", outcome.prepare_millis)?;
    dict.set_item("grid_millis", outcome.grid_millis)?;
    dict.set_item("read_millis", outcome.read_millis)?;
    dict.set_item("fill_offer_id", PyBytes::new(py, &outcome.fills.offer_id))?;
    dict.set_item("fill_sold", PyBytes::new(py, &outcome.fills.sold))?;
    dict.set_item("fill_bought", PyBytes::new(py, &outcome.fills.bought))?;
    Ok(dict)
}

/// The fills of a clearing as columns.
struct FillColumns {
    offer_id: Vec<u8>,
    sold: Vec<u8>,
    bought: Vec<u8>,
}

impl FillColumns {
    fn of(clearing: &Clearing, books: &OrderBooks) -> FillColumns {
        let mut columns = FillColumns {
            offer_id: Vec::new(),
            sold: Vec::new(),
            bought: Vec::new(),
        };
        for fill in clearing.settlement.fills(books) {
            columns
                .offer_id
                .extend_from_slice(&fill.offer.0.to_ne_bytes());
            columns.sold.extend_from_slice(&fill.sold.to_ne_bytes());
            columns.bought.extend_from_slice(&fill.bought.to_ne_bytes());
        }
        columns
    }
}
