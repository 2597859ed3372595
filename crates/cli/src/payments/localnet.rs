//! `walras payments localnet --validators N --shards S --dir DIR`: a payments committee on
//! loopback, one `walras payments validator` process per validator (each with S shards), and
//! wallet files holding the genesis coins. `localnet down --dir DIR` stops it.
//!
//! DIR holds `committee.json`, `genesis.json`, `validatorI/{config.json,key,data,log,pid}` and
//! `wallets/walletJ.json`. Running `localnet --dir DIR` again on an existing DIR (no
//! `--validators` needed) restarts the validators that are not running (their effect logs are
//! kept).
//!
//! Ports: a new committee lists every member at `127.0.0.1:0`; each validator binds port 0 and
//! writes the address the kernel gave it to `validatorI/address` (held by its own listening
//! socket, so no two members can get the same port), and the localnet records it in
//! `committee.json`, where a restart finds it again. A committee that does not come up whole is
//! reported (which member, why) and stopped entirely.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::supervise::Supervised;
use walras_crypto::Keypair;
use walras_payments::ChainId;
use walras_payments_net::write_private_durable;
use walras_payments_net::Wallet;
use walras_payments_net::{
    key_hex, member_with_bls, write_json, CommitteeFile, Fault, GenesisFile, GenesisOutputFile,
    ValidatorFile, MERKLE_BATCH_LEAVES_DEFAULT,
};

/// How long `down` waits after SIGTERM before SIGKILL.
/// How long `up` waits for every validator to listen.
const START_WAIT: Duration = Duration::from_secs(30);

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct LocalnetArgs {
    #[command(subcommand)]
    action: Option<LocalnetAction>,
    #[command(flatten)]
    up: UpArgs,
}

#[derive(clap::Subcommand, Debug)]
enum LocalnetAction {
    /// Stop every validator of the committee in DIR.
    Down(DownArgs),
}

#[derive(clap::Args, Debug)]
struct DownArgs {
    #[arg(long)]
    dir: PathBuf,
}

#[derive(clap::Args, Debug)]
struct UpArgs {
    /// Validators (a new committee; an existing DIR keeps its own and restarts it)
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    validators: Option<u16>,
    /// Shards per validator
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    shards: u32,
    /// The committee's directory
    #[arg(long, required = true)]
    dir: Option<PathBuf>,
    /// `merkle`, `naive` or `bls`
    #[arg(long, default_value = "merkle")]
    scheme: String,
    /// Wallets with genesis coins
    #[arg(long, default_value_t = 10)]
    wallets: usize,
    /// Genesis coins per wallet
    #[arg(long, default_value_t = 4)]
    coins: usize,
    /// Amount of each genesis coin (asset 0)
    #[arg(long, default_value_t = 1_000_000)]
    amount: u128,
    /// Chain id of the committee
    #[arg(long, default_value_t = 1)]
    chain_id: u64,
    /// An exchange node whose committed deposits the validators admit (base URL)
    #[arg(long, value_name = "URL")]
    exchange: Option<String>,
}

pub(super) fn run(args: LocalnetArgs) -> anyhow::Result<()> {
    if let Some(LocalnetAction::Down(down)) = args.action {
        stop_all(&down.dir)?;
        println!("payments localnet down: {}", down.dir.display());
        return Ok(());
    }
    let up = args.up;
    let dir = up
        .dir
        .ok_or_else(|| anyhow::Error::msg("--dir is required"))?;
    if dir.join("committee.json").exists() {
        let members = validator_homes(&dir)?.len();
        if let Some(validators) = up.validators.filter(|v| usize::from(*v) != members) {
            eprintln!(
                "walras payments localnet: {} already holds a committee of {members} validators \
                 (not {validators}); restarting it",
                dir.display()
            );
        }
    } else {
        let validators = up.validators.ok_or_else(|| {
            anyhow::anyhow!(
                "{} holds no committee.json: --validators N is required to create one",
                dir.display()
            )
        })?;
        let mut seeds = Vec::new();
        let mut outputs = Vec::new();
        for _ in 0..up.wallets {
            let seed = walras_client::keyfile::random_seed()?;
            let owner = key_hex(&Keypair::from_seed(seed).public_key());
            for _ in 0..up.coins {
                outputs.push(GenesisOutputFile {
                    asset: 0,
                    amount: up.amount.to_string(),
                    owner: owner.clone(),
                });
            }
            seeds.push(seed);
        }
        let spec = Spec {
            validators: usize::from(validators),
            shards: up.shards,
            scheme: up.scheme.clone(),
            chain_id: up.chain_id,
            faults: Vec::new(),
        };
        create(&dir, &spec, outputs, |_| {
            walras_client::keyfile::random_seed()
        })?;
        let genesis = GenesisFile::load(&dir.join("genesis.json"), ChainId(up.chain_id))
            .map_err(|error| anyhow::Error::msg(error.to_string()))?;
        std::fs::create_dir_all(dir.join("wallets"))?;
        for (index, seed) in seeds.iter().enumerate() {
            let roots = &genesis[index * up.coins..(index + 1) * up.coins];
            Wallet::create(
                &dir.join("wallets").join(format!("wallet{index}.json")),
                seed,
                roots,
            )?;
        }
    }
    start_all(&dir, up.exchange.as_deref())?;
    println!(
        "payments localnet up: committee {}, wallets in {}",
        dir.join("committee.json").display(),
        dir.join("wallets").display()
    );
    Ok(())
}

/// A committee to create.
pub(super) struct Spec {
    pub validators: usize,
    pub shards: u32,
    pub scheme: String,
    pub chain_id: u64,
    /// Validator index and the fault it plays.
    pub faults: Vec<(usize, Fault)>,
}

/// A member's address before its validator first started: it binds port 0 and reports.
pub(super) const UNASSIGNED: &str = "127.0.0.1:0";
/// The file a validator writes its listening address to (`validatorI/address`).
const ADDRESS_FILE: &str = "address";

/// Writes a committee's files into `dir` (keys from `seed_of(validator)`).
pub(super) fn create(
    dir: &Path,
    spec: &Spec,
    outputs: Vec<GenesisOutputFile>,
    seed_of: impl Fn(usize) -> Result<[u8; 32], walras_client::keyfile::KeyFileError>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut members = Vec::new();
    let mut seeds = Vec::new();
    for index in 0..spec.validators {
        let seed = seed_of(index)?;
        // With its BLS key: the validator signs withdrawal votes (and, under the bls scheme,
        // every vote) with the key derived from the same seed.
        members.push(member_with_bls(&seed, UNASSIGNED.to_string()));
        seeds.push(seed);
    }
    let committee = CommitteeFile {
        chain_id: spec.chain_id,
        epoch: 0,
        shards: spec.shards,
        scheme: spec.scheme.clone(),
        batch_leaves_max: MERKLE_BATCH_LEAVES_DEFAULT,
        validators: members,
    };
    committee.to_config()?;
    write_json(&dir.join("genesis.json"), &GenesisFile { outputs })
        .map_err(|error| anyhow::Error::msg(error.to_string()))?;
    for (index, seed) in seeds.iter().enumerate() {
        let home = dir.join(format!("validator{index}"));
        std::fs::create_dir_all(&home)?;
        write_private_durable(&home.join("key"), hex::encode(seed).as_bytes())?;
        let config = ValidatorFile {
            committee: PathBuf::from("../committee.json"),
            genesis: PathBuf::from("../genesis.json"),
            index: index as u16,
            key: PathBuf::from("key"),
            data: PathBuf::from("data"),
            listen: None,
            fault: spec
                .faults
                .iter()
                .find(|(faulty, _)| *faulty == index)
                .map(|(_, fault)| *fault),
        };
        write_json(&home.join("config.json"), &config)
            .map_err(|error| anyhow::Error::msg(error.to_string()))?;
    }
    // Written last: its presence marks a complete directory.
    write_json(&dir.join("committee.json"), &committee)
        .map_err(|error| anyhow::Error::msg(error.to_string()))?;
    Ok(())
}

fn validator_homes(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let committee = CommitteeFile::load(&dir.join("committee.json"))
        .map_err(|error| anyhow::Error::msg(error.to_string()))?;
    Ok((0..committee.addresses.len())
        .map(|index| dir.join(format!("validator{index}")))
        .collect())
}

/// Validator `index` (running from `home`) as a supervised process: its pid file, and its
/// config in its command line.
fn supervised(index: usize, home: &Path) -> Supervised {
    Supervised {
        name: format!("payments validator {index}"),
        pid_file: home.join("pid"),
        marker: home.join("config.json"),
    }
}

/// The pid of the validator running from `home`, if it is alive and is ours.
pub(super) fn running_pid(home: &Path) -> Option<i32> {
    crate::supervise::running_pid(&home.join("pid"), &home.join("config.json"))
}

/// Starts every validator of `dir` that is not running and waits until all listen, each on
/// its own port (recorded in `committee.json`). If one does not come up, every validator of
/// `dir` is stopped and the error names the member and why: never half a committee.
/// With `exchange`, each validator admits the deposits of that node's committed blocks.
pub(super) fn start_all(dir: &Path, exchange: Option<&str>) -> anyhow::Result<()> {
    start_members(dir, exchange).map_err(|error| {
        let stopped = stop_all(dir);
        anyhow::anyhow!(
            "the payments committee in {} did not come up whole: {error:#}; {}",
            dir.display(),
            match stopped {
                Ok(()) => "every validator of it was stopped".to_string(),
                Err(stop) => format!("stopping its validators failed too: {stop:#}"),
            }
        )
    })
}

fn start_members(dir: &Path, exchange: Option<&str>) -> anyhow::Result<()> {
    let executable = std::env::current_exe()?;
    let committee_path = dir.join("committee.json");
    let mut committee: CommitteeFile = serde_json::from_str(
        &std::fs::read_to_string(&committee_path)
            .map_err(|error| anyhow::anyhow!("reading {}: {error}", committee_path.display()))?,
    )
    .map_err(|error| anyhow::anyhow!("{}: {error}", committee_path.display()))?;
    let homes = validator_homes(dir)?;
    let mut started = vec![false; homes.len()];
    for (index, home) in homes.iter().enumerate() {
        if running_pid(home).is_some() {
            continue;
        }
        // A stale report must not pass for this start's.
        let _ = std::fs::remove_file(home.join(ADDRESS_FILE));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("log"))?;
        let mut command = Command::new(&executable);
        command
            .args(["payments", "validator", "--config"])
            .arg(home.join("config.json"))
            .arg("--address-file")
            .arg(home.join(ADDRESS_FILE))
            .args(exchange.iter().flat_map(|url| ["--exchange", url]))
            .env("WALRAS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        supervised(index, home).spawn(&mut command)?;
        started[index] = true;
    }
    let deadline = Instant::now() + START_WAIT;
    let mut addresses = Vec::with_capacity(homes.len());
    for (index, home) in homes.iter().enumerate() {
        let recorded = &committee.validators[index].address;
        let address = if started[index] || recorded == UNASSIGNED {
            reported_address(index, home, deadline)?
        } else {
            recorded.clone()
        };
        // Listening, by a live process of ours (a zombie holds no socket).
        while std::net::TcpStream::connect(&address).is_err() {
            if running_pid(home).is_none() {
                return Err(exited(index, home));
            }
            if Instant::now() > deadline {
                return Err(anyhow::anyhow!(
                    "validator {index} does not listen on {address} (see {})",
                    home.join("log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        addresses.push(address);
    }
    if let Some((first, second)) = shared_address(&addresses) {
        return Err(anyhow::anyhow!(
            "validators {first} and {second} both list {}",
            addresses[first]
        ));
    }
    let changed = committee
        .validators
        .iter()
        .zip(&addresses)
        .any(|(member, address)| member.address != *address);
    if changed {
        for (member, address) in committee.validators.iter_mut().zip(addresses) {
            member.address = address;
        }
        write_json(&committee_path, &committee)
            .map_err(|error| anyhow::Error::msg(error.to_string()))?;
    }
    Ok(())
}

/// The first two members that list the same address, if any.
pub(super) fn shared_address(addresses: &[String]) -> Option<(usize, usize)> {
    let mut seen = std::collections::HashMap::new();
    for (index, address) in addresses.iter().enumerate() {
        if let Some(first) = seen.insert(address.as_str(), index) {
            return Some((first, index));
        }
    }
    None
}

/// Waits for validator `index` to report the address it listens on.
fn reported_address(index: usize, home: &Path, deadline: Instant) -> anyhow::Result<String> {
    loop {
        if let Ok(text) = std::fs::read_to_string(home.join(ADDRESS_FILE)) {
            let address = text.trim();
            if address.parse::<std::net::SocketAddr>().is_ok() {
                return Ok(address.to_string());
            }
        }
        if running_pid(home).is_none() {
            return Err(exited(index, home));
        }
        if Instant::now() > deadline {
            return Err(anyhow::anyhow!(
                "validator {index} did not report a listening address within {START_WAIT:?} \
                 (see {})",
                home.join("log").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn exited(index: usize, home: &Path) -> anyhow::Error {
    let log = std::fs::read_to_string(home.join("log")).unwrap_or_default();
    anyhow::anyhow!(
        "validator {index} exited: {}",
        log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
    )
}

/// Stops every validator of `dir`: SIGTERM, then SIGKILL after the grace period.
pub(super) fn stop_all(dir: &Path) -> anyhow::Result<()> {
    let processes: Vec<Supervised> = validator_homes(dir)?
        .iter()
        .enumerate()
        .map(|(index, home)| supervised(index, home))
        .collect();
    crate::supervise::stop_all(&processes);
    Ok(())
}
