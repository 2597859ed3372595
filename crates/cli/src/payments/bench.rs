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
//! rate, so offered against goodput over several rates draws the overload curve.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use walras_crypto::{hash_in, Domain, Keypair};
use walras_payments::certificate_bytes;
use walras_payments::{
    genesis_output_id, Committee, Input, Output, OutputId, Payment, PaymentRequest, RootCache,
    SignedPayment,
};
use walras_payments_net::Request;
use walras_payments_net::{certify, CertifyError, CommitteeClient};
use walras_payments_net::{key_hex, CommitteeFile, Fault, GenesisOutputFile};
use walras_types::AssetId;

use super::localnet::{create, start_all, stop_all, Spec};

/// How long the bench waits for the last payments after the last send.
const DRAIN: Duration = Duration::from_secs(10);
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
    /// Requests the client keeps in flight per validator connection; past it a payment is held
    /// back (refused, not sent). Bounds latency past capacity to about this ÷ the served rate
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
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

struct Load {
    /// In send order; a double spend follows the request whose coin it reuses.
    requests: Vec<PaymentRequest>,
    /// Index of the request whose coin a double spend reuses.
    twins: BTreeMap<usize, usize>,
}

fn build_load(args: &BenchArgs, committee: &Committee, keys: &[Keypair]) -> Load {
    let total = (args.rate * args.seconds) as usize;
    let coins_per_key = total.div_ceil(keys.len());
    let mut requests = Vec::with_capacity(total + total / 50 + 1);
    let mut twins = BTreeMap::new();
    let equivocate = args.fault == "equivocate" && args.byzantine > 0;
    for index in 0..total {
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
        let pay_to = |payee: usize| {
            SignedPayment::sign(
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
            )
        };
        requests.push(PaymentRequest {
            signed: pay_to((payer + 1) % keys.len()),
            certificates: Vec::new(),
        });
        if equivocate && index % 50 == 0 {
            twins.insert(requests.len(), requests.len() - 1);
            requests.push(PaymentRequest {
                signed: pay_to((payer + 2) % keys.len()),
                certificates: Vec::new(),
            });
        }
    }
    Load { requests, twins }
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
    let total = (args.rate * args.seconds) as usize;
    let coins_per_key = total.div_ceil(keys.len());
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
        let load = build_load(&args, &committee.committee, &keys);
        let summary = super::block_on(drive(
            &args,
            &committee.committee,
            committee.addresses,
            load,
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
    load: Load,
) -> anyhow::Result<serde_json::Value> {
    let client = CommitteeClient::with_in_flight_max(committee.clone(), addresses, args.in_flight);
    // Connections open before the clock starts.
    for validator in 0..committee.validators.len() {
        let _ = client.call(validator as u16, &Request::Stats).await;
    }
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let total = load.requests.len();
    let interval = Duration::from_nanos(1_000_000_000 / args.rate);
    let mut primary = 0u64;
    // Payments the client library would hold back are counted here without spending a task
    // on them: at 20x capacity the load generator must not starve the committee's cores.
    let mut held_back = 0u64;
    for (index, request) in load.requests.into_iter().enumerate() {
        if !load.twins.contains_key(&index) {
            let due = start + interval * primary as u32;
            primary += 1;
            tokio::time::sleep_until(due.into()).await;
            if client.held_back().is_some() {
                held_back += 1;
                continue;
            }
        }
        let client = client.clone();
        let cache = cache.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let sent = Instant::now();
            let result = certify(&client, &request, &cache).await;
            let _ = done.send((index, request, result, sent.elapsed(), Instant::now()));
        });
    }
    drop(done);
    let send_end = Instant::now();
    let mut latencies = Vec::new();
    let mut certified_inputs: BTreeMap<OutputId, usize> = BTreeMap::new();
    let mut certificate_size = 0;
    let mut failures = 0u64;
    // Overload refusals by reason (not failures: nothing was lost, the payment may be resent).
    let mut refused: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut last = start;
    let mut compact_size: Option<usize> = None;
    let mut received = held_back as usize;
    if held_back > 0 {
        refused.insert("held_back_by_client", held_back);
    }
    while received < total {
        let remaining = (send_end + DRAIN).saturating_duration_since(Instant::now());
        match tokio::time::timeout(remaining, finished.recv()).await {
            Ok(Some((_, request, result, latency, at))) => {
                received += 1;
                match result {
                    Ok(certificates) => {
                        latencies.push(latency.as_micros() as u64);
                        last = last.max(at);
                        if let Some(certificate) = certificates.first() {
                            certificate_size = certificate_bytes(certificate).len();
                            if let Ok(compact) = certificate.compact() {
                                compact_size = Some(compact.wire_bytes());
                            }
                        }
                        for input in &request.signed.payment.inputs {
                            *certified_inputs.entry(input.id).or_default() += 1;
                        }
                    }
                    Err(CertifyError::Overloaded {
                        refused_by_validators,
                        ..
                    }) => {
                        let reason = if refused_by_validators == 0 {
                            "held_back_by_client"
                        } else {
                            "validator_overloaded"
                        };
                        *refused.entry(reason).or_default() += 1;
                    }
                    Err(CertifyError::NoQuorum { .. }) => failures += 1,
                }
            }
            _ => break,
        }
    }
    let unanswered = (total - received) as u64;
    latencies.sort_unstable();
    let elapsed = last
        .duration_since(start)
        .as_secs_f64()
        .max(args.seconds as f64);
    let conflicting = certified_inputs
        .values()
        .filter(|count| **count > 1)
        .count();
    let certified_tx_per_s = (latencies.len() as f64 / elapsed).round();
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
        "sent": total,
        "double_spends_sent": load.twins.len(),
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
            "p50": percentile(&latencies, 0.50),
            "p99": percentile(&latencies, 0.99),
            "p999": percentile(&latencies, 0.999),
            "max": percentile(&latencies, 1.0),
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
    }))
}
