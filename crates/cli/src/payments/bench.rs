//! `walras payments bench`: a fresh local committee (real validator processes on loopback), an
//! open-loop load of pre-signed payments at a fixed rate, and one JSON object with the certified
//! rate, latency percentiles, conflicting certificates and certificate size.
//!
//! Each payment spends one genesis coin of one of `--keys` payers into one output for another
//! key, so every payment is independent (the open loop never waits for an earlier payment); the
//! client verifies every vote before counting it (one cache of verified Merkle roots shared by
//! the client, as a wallet process would keep). With `--fault equivocate` every 50th payment is a
//! Byzantine client's double spend: a second payment over the same coin, sent at the same time.
//!
//! Past capacity (issue 31) a payment may be refused for overload: by validators (their shard
//! queue cannot drain in time) or held back by the client library (fewer than a quorum of
//! validators can take it). Those are counted as `refused` by reason, apart from `failed`; the
//! latency percentiles are of certified payments only, and `goodput_tx_per_s` is the certified
//! rate, so offered against goodput over several rates draws the overload curve. The client's
//! in-flight window per validator (adaptive by default, `--in-flight N` for a fixed cap) is
//! reported under `client_window`: its mean and final size per validator.
//!
//! The load is bounded whatever the rate: at most `--presigned` payments (default
//! [`PRESIGNED_MAX`]) are signed before the clock and given genesis coins, and the open loop
//! (`walras_payments_net::run_open_loop`) stops offering on time. Payments held back by the
//! client take nothing from the pool and payments refused for overload go back to it (resent
//! unchanged later, as a wallet does), so it only runs out when the committee certifies that
//! many; slots past it are counted in `not_offered`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use walras_crypto::{hash_in, Domain, Keypair};
use walras_payments::certificate_bytes;
use walras_payments::{
    genesis_output_id, Committee, Input, Output, OutputId, Payment, PaymentRequest, RootCache,
    SignedPayment,
};
use walras_payments_net::Request;
use walras_payments_net::{key_hex, CommitteeFile, Fault, GenesisOutputFile};
use walras_payments_net::{run_open_loop, CommitteeClient, LoadReport, Offer, OpenLoop};
use walras_payments_net::{WindowConfig, CLIENT_IN_FLIGHT_MAX, WINDOW_TARGET_FLOOR};
use walras_types::AssetId;

use super::localnet::{create, start_all, stop_all, Spec};

/// How long the bench waits for the last payments after the last send.
const DRAIN: Duration = Duration::from_secs(10);
/// Payments signed before the clock (and genesis coins made for them) by default, whatever the
/// rate: 400,000/s over 5 s once meant 2,000,000 coins and signatures before the first send,
/// and the run did not end within 60 s. A 16-core committee certifies about 20,000/s, and
/// payments the client holds back take none, so this lasts any 5 s run.
const PRESIGNED_MAX: usize = 262_144;
const CHAIN_ID: u64 = 7;
const SEED_DOMAIN: Domain = Domain::new("walras/pay/bench");

#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {
    #[arg(long, default_value_t = 4)]
    validators: usize,
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// naive, merkle or bls
    #[arg(long, default_value = "merkle")]
    scheme: String,
    /// Payments offered per second
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// Seconds of load
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Faulty validators (indices 0..K)
    #[arg(long, default_value_t = 0)]
    byzantine: usize,
    /// silent, equivocate or garbage
    #[arg(long, default_value = "silent")]
    fault: String,
    /// Payer keys
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// A fixed cap of requests in flight per validator connection; past it a payment is held
    /// back (refused, not sent), and latency past capacity is about this ÷ the served rate.
    /// Without it each connection's window adapts to its measured latency (at most 512)
    #[arg(long)]
    in_flight: Option<usize>,
    /// The adaptive window's target floor: a connection's window shrinks when its mean latency
    /// exceeds 2 × its minimum + this (default: the client library's, `WINDOW_TARGET_FLOOR`)
    #[arg(long)]
    window_floor_ms: Option<u64>,
    /// Payments signed before the clock, with a genesis coin each (default: rate × seconds, at
    /// most 262,144); slots past them are reported under `not_offered`
    #[arg(long)]
    presigned: Option<usize>,
    /// Print one JSON object (the default prints it too; kept for the documented command line)
    #[arg(long)]
    json: bool,
    /// Directory for the committee (default: a fresh one under the system temporary directory,
    /// removed afterwards)
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn seed(index: u64) -> [u8; 32] {
    hash_in(SEED_DOMAIN, &index.to_be_bytes()).0
}

/// Payments signed before the clock: one per slot of the schedule, at most `--presigned`.
fn pool_size(args: &BenchArgs) -> usize {
    let slots = args.rate.saturating_mul(args.seconds);
    args.presigned
        .unwrap_or(PRESIGNED_MAX)
        .min(usize::try_from(slots).unwrap_or(usize::MAX))
}

/// Payments to offer, one per slot, each with its double spend (`--fault equivocate`: every
/// 50th), signed on every core: a 262,144-payment pool takes seconds on one.
fn build_load(
    args: &BenchArgs,
    committee: &Committee,
    keys: &[Keypair],
    pool: usize,
) -> Vec<Offer> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let chunk = pool.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..pool)
            .step_by(chunk)
            .map(|first| {
                let last = (first + chunk).min(pool);
                scope.spawn(move || {
                    (first..last)
                        .map(|index| offer(args, committee, keys, pool, index))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap_or_default())
            .collect()
    })
}

/// Offer `index` of a pool of `pool`: payer `index mod keys` spends its next genesis coin to the
/// next key.
fn offer(
    args: &BenchArgs,
    committee: &Committee,
    keys: &[Keypair],
    pool: usize,
    index: usize,
) -> Offer {
    let coins_per_key = pool.div_ceil(keys.len());
    let payer = index % keys.len();
    let coin = index / keys.len();
    let genesis_index = (payer * coins_per_key + coin) as u32;
    let owner = keys[payer].public_key();
    let input = Input {
        id: genesis_output_id(committee.chain_id, genesis_index),
        output: Output {
            asset: AssetId(0),
            amount: 1,
            owner,
        },
    };
    let pay_to = |payee: usize| PaymentRequest {
        signed: SignedPayment::sign(
            Payment {
                chain_id: committee.chain_id,
                epoch: committee.epoch,
                inputs: vec![input],
                outputs: vec![Output {
                    asset: AssetId(0),
                    amount: 1,
                    owner: keys[payee].public_key(),
                }],
            },
            &keys[payer],
        ),
        certificates: Vec::new(),
    };
    let mut offer = vec![pay_to((payer + 1) % keys.len())];
    if args.fault == "equivocate" && args.byzantine > 0 && index.is_multiple_of(50) {
        offer.push(pay_to((payer + 2) % keys.len()));
    }
    offer
}

fn percentile(sorted: &[u64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64) * fraction).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    let fault = Fault::parse(&args.fault)?;
    if args.rate == 0 || args.seconds == 0 || args.keys == 0 || args.validators == 0 {
        return Err(anyhow::Error::msg(
            "rate, seconds, keys and validators must be positive",
        ));
    }
    let command_line: Vec<String> = std::env::args().collect();
    let (dir, remove) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|duration| duration.as_nanos())
                .unwrap_or(0);
            (
                std::env::temp_dir()
                    .join(format!("walras-pay-bench-{}-{stamp}", std::process::id())),
                true,
            )
        }
    };
    if dir.join("committee.json").exists() {
        return Err(anyhow::anyhow!(
            "{} already holds a committee; the bench needs a fresh directory",
            dir.display()
        ));
    }
    let keys: Vec<Keypair> = (0..args.keys as u64)
        .map(|index| Keypair::from_seed(seed(index)))
        .collect();
    let pool = pool_size(&args);
    let coins_per_key = pool.div_ceil(keys.len());
    let mut outputs = Vec::with_capacity(keys.len() * coins_per_key);
    for key in &keys {
        let owner = key_hex(&key.public_key());
        for _ in 0..coins_per_key {
            outputs.push(GenesisOutputFile {
                asset: 0,
                amount: "1".into(),
                owner: owner.clone(),
            });
        }
    }
    let spec = Spec {
        validators: args.validators,
        shards: args.shards,
        scheme: args.scheme.clone(),
        chain_id: CHAIN_ID,
        faults: (0..args.byzantine).map(|index| (index, fault)).collect(),
    };
    create(&dir, &spec, outputs, |index| {
        Ok(seed(1_000_000_000 + index as u64))
    })?;
    let result = (|| {
        start_all(&dir, None)?;
        let committee = CommitteeFile::load(&dir.join("committee.json"))
            .map_err(|error| anyhow::Error::msg(error.to_string()))?;
        let offers = build_load(&args, &committee.committee, &keys, pool);
        let summary = super::block_on(drive(
            &args,
            &committee.committee,
            committee.addresses,
            offers,
        ))??;
        Ok::<_, anyhow::Error>(summary)
    })();
    let _ = stop_all(&dir);
    if remove {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut summary = result?;
    summary["command"] = serde_json::Value::String(command_line.join(" "));
    println!("{}", serde_json::to_string(&summary)?);
    Ok(())
}

async fn drive(
    args: &BenchArgs,
    committee: &Committee,
    addresses: Vec<String>,
    offers: Vec<Offer>,
) -> anyhow::Result<serde_json::Value> {
    let client = match args.in_flight {
        Some(cap) => CommitteeClient::with_in_flight_max(committee.clone(), addresses, cap),
        None => {
            let mut window = WindowConfig::up_to(CLIENT_IN_FLIGHT_MAX);
            if let Some(floor_ms) = args.window_floor_ms {
                window.target_floor = Duration::from_millis(floor_ms);
            }
            CommitteeClient::with_window(committee.clone(), addresses, window)
        }
    };
    // Connections open before the clock starts.
    for validator in 0..committee.validators.len() {
        let _ = client.call(validator as u16, &Request::Stats).await;
    }
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let double_spends_sent = offers.iter().map(|offer| offer.len() - 1).sum::<usize>();
    let load = OpenLoop {
        rate_per_s: args.rate,
        duration: Duration::from_secs(args.seconds),
        drain: DRAIN,
    };
    let mut certified_inputs: BTreeMap<OutputId, usize> = BTreeMap::new();
    let mut certificate_size = 0;
    let mut compact_size: Option<usize> = None;
    let report = run_open_loop(&client, &cache, load, offers, |request, result| {
        let Ok(certificates) = result else {
            return;
        };
        if let Some(certificate) = certificates.first() {
            certificate_size = certificate_bytes(certificate).len();
            if let Ok(compact) = certificate.compact() {
                compact_size = Some(compact.wire_bytes());
            }
        }
        for input in &request.signed.payment.inputs {
            *certified_inputs.entry(input.id).or_default() += 1;
        }
    })
    .await;
    let LoadReport {
        offered,
        certified_latencies_us: ref latencies,
        ref refused,
        ref not_offered,
        failed: failures,
        unanswered,
        ref windows,
        ..
    } = report;
    let conflicting = certified_inputs
        .values()
        .filter(|count| **count > 1)
        .count();
    let certified_tx_per_s = report.goodput_per_s(&load).round();
    let client_window: Vec<serde_json::Value> = windows
        .iter()
        .map(|window| {
            serde_json::json!({
                "validator": window.validator,
                "final": window.final_limit,
                "mean": (window.mean_limit * 10.0).round() / 10.0,
                "min": window.min_limit,
                "min_latency_ms": window.min_latency_us.map(|us| us as f64 / 1000.0),
            })
        })
        .collect();
    // Every validator processes every payment, on one thread per shard (its signing and
    // spent-set work), so a validator's throughput per core is the certified rate over its
    // shard count. All validators share this machine's cores: when validators × shards
    // exceeds them, the per-core figure is a floor, not the design's capacity.
    let machine_cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    Ok(serde_json::json!({
        "validators": args.validators,
        "shards": args.shards,
        "scheme": args.scheme,
        "rate": args.rate,
        "seconds": args.seconds,
        "byzantine": args.byzantine,
        "fault": if args.byzantine > 0 { args.fault.as_str() } else { "none" },
        "sent": offered,
        // Of `sent`: handed to the client library (the rest were held back at once), and of
        // those, resent after an overload refusal (the same request, as a wallet resends it).
        "sent_to_validators": report.sent,
        "resent": report.resent,
        "presigned": pool_size(args),
        "not_offered": not_offered,
        "double_spends_sent": double_spends_sent,
        "certified": latencies.len(),
        "refused": refused.values().sum::<u64>(),
        "refused_by_reason": refused,
        "failed": failures,
        "unanswered": unanswered,
        "certified_tx_per_s": certified_tx_per_s,
        "offered_tx_per_s": args.rate,
        // Certified payments per second: the overload curve's y against offered_tx_per_s.
        "goodput_tx_per_s": certified_tx_per_s,
        "validator_cores": args.shards,
        "tx_per_s_per_validator_core": (certified_tx_per_s / f64::from(args.shards.max(1))).round(),
        "machine_cores": machine_cores,
        "cores_oversubscribed": args.validators * args.shards as usize > machine_cores,
        "latency_ms": {
            "p50": percentile(latencies, 0.50),
            "p99": percentile(latencies, 0.99),
            "p999": percentile(latencies, 0.999),
            "max": percentile(latencies, 1.0),
        },
        "conflicting_certificates": conflicting,
        // The encoded certificate of one output (`codec::certificate_bytes`): header and
        // quorum-many votes.
        "certificate_bytes": certificate_size,
        // Scheme bls only: the same certificate as one aggregate signature and the signer
        // indices (`bls::compact_certificate`), the form a wallet downloads or the exchange
        // checks.
        "compact_certificate_bytes": compact_size,
        "quorum": committee.quorum(),
        // Each validator connection's in-flight window over the load: adaptive (the default) or
        // the fixed `--in-flight` cap.
        "client_window": {
            "adaptive": args.in_flight.is_none(),
            "target_floor_ms": args
                .in_flight
                .is_none()
                .then(|| args.window_floor_ms.unwrap_or(WINDOW_TARGET_FLOOR.as_millis() as u64)),
            "per_validator": client_window,
        },
    }))
}
