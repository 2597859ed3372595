//! The offline tools: the offer generators (`walras_sim`, as `walras gen offers`), the DBO
//! simulator (`walras_gateway::sim`, as `walras sim dbo`), and the valuation oracle
//! (`walras_oracle`, as `walras oracle value` and `walras oracle replay`).

use crate::{guarded, value_error};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;
use walras_gateway::sim::{parse_trace_csv, LatencyModel, Scheme, SimConfig};
use walras_oracle::read_jsonl;
use walras_oracle::{replay, OracleConfig, ReplayOptions};
use walras_oracle::{value_book_text, Method};
use walras_sim::{generate_offers, MarketShape, OfferModel, OfferWorkload, PairChoice};

/// The most offers one call generates (1.6 GB of columns): a larger ask is a typo.
const GENERATED_OFFERS_MAX: usize = 100_000_000;
/// The oracle replay's thread range (the CLI's).
const REPLAY_THREADS_MAX: usize = 64;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gen_offers, m)?)?;
    m.add_function(wrap_pyfunction!(sim_dbo, m)?)?;
    m.add_function(wrap_pyfunction!(oracle_value, m)?)?;
    m.add_function(wrap_pyfunction!(oracle_replay, m)?)?;
    Ok(())
}

/// Generated offers as columns (u64 native-endian; limits as f64 and, with `exact`, as the
/// exact decimals the CSV writer prints, joined by `\n`) and the model's valuations.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (assets, offers, seed, model, spread, pairs, valuation_decades, exact))]
fn gen_offers<'py>(
    py: Python<'py>,
    assets: usize,
    offers: usize,
    seed: u64,
    model: &str,
    spread: &str,
    pairs: &str,
    valuation_decades: u8,
    exact: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if offers > GENERATED_OFFERS_MAX {
        return Err(value_error(format!(
            "offers: {offers} is more than {GENERATED_OFFERS_MAX}"
        )));
    }
    let model: OfferModel = model
        .parse()
        .map_err(|error| value_error(format!("model: {error}")))?;
    let spread_ppm = walras_bench::market_args::spread_ppm(spread)
        .map_err(|error| value_error(format!("spread: {error}")))?;
    let pairs: PairChoice = pairs
        .parse()
        .map_err(|error| value_error(format!("pairs: {error}")))?;
    let workload = OfferWorkload {
        assets,
        offers,
        seed,
        model,
        market: MarketShape {
            spread_ppm,
            pairs,
            valuation_decades,
        },
    };
    workload
        .validate()
        .map_err(|error| value_error(error.to_string()))?;
    let columns = guarded(py, "generating offers", || {
        Ok(GeneratedColumns::of(&workload, exact))
    })?;
    let dict = PyDict::new(py);
    dict.set_item("offer_id", PyBytes::new(py, &columns.offer_id))?;
    dict.set_item("account", PyBytes::new(py, &columns.account))?;
    dict.set_item("sell", PyBytes::new(py, &columns.sell))?;
    dict.set_item("buy", PyBytes::new(py, &columns.buy))?;
    dict.set_item("amount", PyBytes::new(py, &columns.amount))?;
    dict.set_item("min_price", PyBytes::new(py, &columns.min_price))?;
    dict.set_item("min_price_text", columns.min_price_text)?;
    dict.set_item("valuations", columns.valuations)?;
    Ok(dict)
}

struct GeneratedColumns {
    offer_id: Vec<u8>,
    account: Vec<u8>,
    sell: Vec<u8>,
    buy: Vec<u8>,
    amount: Vec<u8>,
    min_price: Vec<u8>,
    min_price_text: Option<String>,
    valuations: Vec<f64>,
}

impl GeneratedColumns {
    fn of(workload: &OfferWorkload, exact: bool) -> GeneratedColumns {
        let generated = generate_offers(workload);
        let rows = generated.offers.len();
        let column = || Vec::with_capacity(rows * 8);
        let mut columns = GeneratedColumns {
            offer_id: column(),
            account: column(),
            sell: column(),
            buy: column(),
            amount: column(),
            min_price: column(),
            min_price_text: None,
            valuations: generated.valuations,
        };
        for offer in &generated.offers {
            columns
                .offer_id
                .extend_from_slice(&offer.id.0.to_ne_bytes());
            columns
                .account
                .extend_from_slice(&offer.account.0.to_ne_bytes());
            columns
                .sell
                .extend_from_slice(&u64::from(offer.sell.0).to_ne_bytes());
            columns
                .buy
                .extend_from_slice(&u64::from(offer.buy.0).to_ne_bytes());
            columns
                .amount
                .extend_from_slice(&offer.amount.to_ne_bytes());
            columns
                .min_price
                .extend_from_slice(&offer.min_price.to_f64().to_ne_bytes());
        }
        if exact {
            let texts: Vec<String> = generated
                .offers
                .iter()
                .map(|offer| offer.min_price.to_exact_decimal())
                .collect();
            columns.min_price_text = Some(texts.join("\n"));
        }
        columns
    }
}

/// One DBO simulation (`walras sim dbo --json`): the report as JSON text.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (scheme, participants, seconds, seed, delta_us=None, kappa=None, tau_us=None, threshold_us=None, trace=None))]
fn sim_dbo(
    py: Python<'_>,
    scheme: &str,
    participants: u32,
    seconds: f64,
    seed: u64,
    delta_us: Option<u64>,
    kappa: Option<f64>,
    tau_us: Option<u64>,
    threshold_us: Option<u64>,
    trace: Option<PathBuf>,
) -> PyResult<String> {
    let scheme: Scheme = scheme
        .parse()
        .map_err(|error| value_error(format!("scheme {scheme:?}: {error}")))?;
    let mut config = SimConfig::new(scheme, participants, seconds, seed);
    config.delta_us = delta_us.unwrap_or(config.delta_us);
    config.kappa = kappa.unwrap_or(config.kappa);
    config.tau_us = tau_us.unwrap_or(config.tau_us);
    config.threshold_us = threshold_us.unwrap_or(config.threshold_us);
    guarded(py, "the DBO simulation", || {
        if let Some(path) = &trace {
            let text = std::fs::read_to_string(path)
                .map_err(|error| value_error(format!("reading {}: {error}", path.display())))?;
            let rows = parse_trace_csv(&text)
                .map_err(|error| value_error(format!("{}: {error}", path.display())))?;
            config.latency = LatencyModel::Trace(rows);
        }
        let report =
            walras_gateway::sim::run(&config).map_err(|error| value_error(error.to_string()))?;
        serde_json::to_string(&report).map_err(|error| value_error(error.to_string()))
    })
}

/// One book valued (`walras oracle value`): levels as `P:Q,P:Q,...`; the valuation as JSON.
#[pyfunction]
#[pyo3(signature = (bids, asks, method, depth=None, step=None))]
fn oracle_value(
    py: Python<'_>,
    bids: &str,
    asks: &str,
    method: &str,
    depth: Option<f64>,
    step: Option<f64>,
) -> PyResult<String> {
    let method = match method {
        "mid" => Method::Mid,
        "weighted-mid" => Method::WeightedMid,
        "depth-vwap" => match (depth, step) {
            (Some(depth), Some(step)) if depth > 0.0 && step > 0.0 && step <= depth => {
                Method::DepthVwap { depth, step }
            }
            _ => {
                return Err(value_error(
                    "depth-vwap needs depth D and step S with 0 < S <= D",
                ))
            }
        },
        other => {
            return Err(value_error(format!(
                "method {other:?}: use mid, weighted-mid or depth-vwap"
            )))
        }
    };
    guarded(py, "valuing the book", || {
        let valuation = value_book_text(bids, asks, &method)
            .map_err(|error| value_error(format!("book: {error}")))?;
        serde_json::to_string(&valuation).map_err(|error| value_error(error.to_string()))
    })
}

/// A recorded feed replayed through the oracle's pipeline (`walras oracle replay --json`).
#[pyfunction]
#[pyo3(signature = (path, threads))]
fn oracle_replay(py: Python<'_>, path: PathBuf, threads: usize) -> PyResult<String> {
    if !(1..=REPLAY_THREADS_MAX).contains(&threads) {
        return Err(value_error(format!(
            "threads: {threads} is outside 1..={REPLAY_THREADS_MAX}"
        )));
    }
    guarded(py, "the oracle replay", || {
        let file = File::open(&path)
            .map_err(|error| value_error(format!("opening {}: {error}", path.display())))?;
        let records = read_jsonl(BufReader::new(file))
            .map_err(|error| value_error(format!("{}: {error}", path.display())))?;
        let options = ReplayOptions {
            threads,
            speed: None,
        };
        let report = replay(&records, &OracleConfig::default(), options);
        serde_json::to_string(&report).map_err(|error| value_error(error.to_string()))
    })
}
