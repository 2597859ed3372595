//! Validators in-process over real TCP: payments certify through the client, which verifies every
//! vote; typed refusals; malformed frames answered and the connection closed; a garbage-signing
//! validator named by the quorum round; votes durable across a restart of the process state.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use walras_crypto::Keypair;
use walras_payments::{
    genesis_output_id, verify_certificate, ChainId, Committee, Epoch, Input, Output, OutputId,
    Payment, PaymentRequest, RootCache, Scheme, SignedPayment, Verdict, VoteFault,
};
use walras_payments_net::Fault;
use walras_payments_net::{certify, CertifyError, CommitteeClient, NetError, QuorumRound};
use walras_payments_net::{decode_response_message, ErrorCode, Request, Response};
use walras_payments_net::{run_open_loop, LoadReport, Offer, OpenLoop, LATE_GRACE};
use walras_payments_net::{ConnectionPolicy, LoadProbe, Validator, ValidatorSetup};
use walras_payments_net::{FrameError, FrameReader};
use walras_types::AssetId;

const CHAIN: ChainId = ChainId(5);

struct Net {
    committee: Committee,
    addresses: Vec<String>,
    keys: Vec<Keypair>,
    payers: Vec<Keypair>,
    genesis: Vec<(OutputId, Output)>,
}

async fn start(dir: &std::path::Path, faults: &[(usize, Fault)], shards: u32) -> Net {
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    start_with(dir, faults, shards, scheme).await
}

async fn start_with(
    dir: &std::path::Path,
    faults: &[(usize, Fault)],
    shards: u32,
    scheme: Scheme,
) -> Net {
    start_with_policies(dir, faults, shards, scheme, &[], 8)
        .await
        .0
}

/// A committee of four whose validator `i` serves under `policies`' entry for `i` (the default
/// otherwise), `payers` payers with one genesis coin each; also each validator's load probe.
async fn start_with_policies(
    dir: &std::path::Path,
    faults: &[(usize, Fault)],
    shards: u32,
    scheme: Scheme,
    policies: &[(usize, ConnectionPolicy)],
    payers: u32,
) -> (Net, Vec<LoadProbe>) {
    let keys: Vec<Keypair> = (0..4u8).map(|i| Keypair::from_seed([i + 1; 32])).collect();
    let payers: Vec<Keypair> = (0..payers)
        .map(|i| {
            // Payers below 65,536 keep the seeds they had when the count was a u16.
            let mut seed = [100; 32];
            seed[..2].copy_from_slice(&(i as u16).to_be_bytes());
            seed[2] = 100 + (i >> 16) as u8;
            Keypair::from_seed(if i < 8 { [100 + i as u8; 32] } else { seed })
        })
        .collect();
    let committee = Committee {
        chain_id: CHAIN,
        epoch: Epoch(0),
        validators: keys.iter().map(Keypair::public_key).collect(),
        shards,
        bls: keys
            .iter()
            .map(|key| walras_payments::VoteSigner::new(key.clone()).bls_member())
            .collect(),
    };
    let genesis: Vec<(OutputId, Output)> = payers
        .iter()
        .enumerate()
        .map(|(index, payer)| {
            (
                genesis_output_id(CHAIN, index as u32),
                Output {
                    asset: AssetId(0),
                    amount: 100,
                    owner: payer.public_key(),
                },
            )
        })
        .collect();
    let mut addresses = Vec::new();
    let mut probes = Vec::new();
    for (index, key) in keys.iter().enumerate() {
        let validator = Validator::start(
            ValidatorSetup {
                committee: committee.clone(),
                scheme,
                index: index as u16,
                keypair: key.clone(),
                genesis: genesis.clone(),
                data: dir.join(format!("v{index}")),
                fault: faults
                    .iter()
                    .find(|(faulty, _)| *faulty == index)
                    .map(|(_, fault)| *fault),
            },
            "127.0.0.1:0",
        )
        .await
        .expect("validator starts");
        let validator = match policies.iter().find(|(which, _)| *which == index) {
            Some((_, policy)) => validator.with_policy(*policy),
            None => validator,
        };
        addresses.push(validator.address.to_string());
        probes.push(validator.load_probe());
        tokio::spawn(validator.serve());
    }
    let net = Net {
        committee,
        addresses,
        keys,
        payers,
        genesis,
    };
    (net, probes)
}

fn spend(net: &Net, payer: usize, to: usize) -> PaymentRequest {
    let (id, output) = net.genesis[payer];
    PaymentRequest {
        signed: SignedPayment::sign(
            Payment {
                chain_id: CHAIN,
                epoch: Epoch(0),
                inputs: vec![Input { id, output }],
                outputs: vec![Output {
                    asset: AssetId(0),
                    amount: 100,
                    owner: net.payers[to].public_key(),
                }],
            },
            &net.payers[payer],
        ),
        certificates: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_certify_and_bad_requests_get_typed_refusals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), &[], 2).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    for payer in 0..8 {
        let request = spend(&net, payer, (payer + 1) % 8);
        let certificates = certify(&client, &request, &cache).await.expect("certifies");
        assert_eq!(certificates.len(), 1);
        assert!(certificates[0].votes.len() >= net.committee.quorum());
        walras_payments::verify_certificate(
            &certificates[0],
            &net.committee,
            &mut RootCache::default(),
        )
        .expect("a verified certificate");
    }
    // A payment sent to the wrong shard is refused with a typed error, nothing recorded.
    let request = spend(&net, 0, 2);
    let owner_shard = net.committee.shard_of(&net.payers[0].public_key());
    let wrong = Request::Pay {
        shard: 1 - owner_shard,
        request: request.clone(),
    };
    match client.call(1, &wrong).await {
        Err(NetError::Refused { error, .. }) => {
            assert_eq!(error.code, ErrorCode::Refused);
            assert!(error.message.contains("shard"), "{}", error.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A shard the validator does not have.
    match client
        .call(
            1,
            &Request::Pay {
                shard: 9,
                request: request.clone(),
            },
        )
        .await
    {
        Err(NetError::Refused { error, .. }) => assert_eq!(error.code, ErrorCode::UnknownShard),
        other => panic!("expected UnknownShard, got {other:?}"),
    }
    // A second payment over a spent coin: a conflict naming the holder at every validator.
    let double = Request::Pay {
        shard: owner_shard,
        request,
    };
    match client.call(2, &double).await {
        Ok(Response::Conflict(conflict)) => {
            assert_eq!(conflict.holder, spend(&net, 0, 1).signed);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Stats: every validator records all 8 inputs (the client stops at the quorum, so the
    // last validator may still be working: wait for it), and no shard sent another a message.
    for validator in 0..4u16 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let Ok(Response::Stats(shards)) = client.call(validator, &Request::Stats).await else {
                panic!("stats");
            };
            assert_eq!(shards.len(), 2);
            assert!(shards.iter().all(|shard| shard.cross_shard_messages == 0));
            let spent: u64 = shards.iter().map(|shard| shard.spent).sum();
            if spent == 8 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "validator {validator} recorded {spent} of 8 inputs"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let _ = &net.keys;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_a_typed_error_and_the_connection_closes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), &[], 1).await;
    let mut stream = tokio::net::TcpStream::connect(&net.addresses[0])
        .await
        .expect("connects");
    let garbage = [0u8, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 42, 7, 1, 2, 3];
    stream.write_all(&garbage).await.expect("writes");
    let body = read_frame(&mut stream).await.expect("an error reply");
    let (id, response) = decode_response_message(&body).expect("decodes");
    assert_eq!(id, 42);
    assert!(matches!(response, Response::Error(error) if error.code == ErrorCode::Malformed));
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut rest),
    )
    .await
    .expect("the validator closes the connection");
    assert_eq!(read.expect("clean close"), 0);
    // An oversized frame header is refused before the body is read.
    let mut stream = tokio::net::TcpStream::connect(&net.addresses[0])
        .await
        .expect("connects");
    stream
        .write_all(&u32::MAX.to_be_bytes())
        .await
        .expect("writes");
    let body = read_frame(&mut stream).await.expect("an error reply");
    assert!(matches!(
        decode_response_message(&body),
        Ok((0, Response::Error(error))) if error.code == ErrorCode::Malformed
    ));
}

/// Merkle votes are checked alone on arrival: the garbage signer's reply, fed first, is named
/// and the three honest ones certify with the fourth reply. Fed last, it comes after the quorum
/// and is not checked at all (the collector stops at the quorum, as FastPay's does; before the
/// one quorum rule the network client checked every reply, and this test, reading the replies
/// in arrival order, expected the fault either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_signing_validator_is_named_and_honest_votes_still_certify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start(dir.path(), &[(2, Fault::Garbage)], 1).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    let request = spend(&net, 3, 4);
    let (faults, certified) = feed_first(&net, &client, &request, &cache, 2).await;
    assert_eq!(faults, vec![(2, VoteFault::BadSignature)]);
    let positions: Vec<usize> = certified.iter().map(|(position, _)| *position).collect();
    assert_eq!(
        positions,
        vec![3],
        "certified once, with the third honest reply"
    );

    let request = spend(&net, 5, 6);
    let mut replies = client.broadcast(0, &request);
    let mut all = Vec::new();
    while let Some(reply) = replies.recv().await {
        all.push(reply);
    }
    all.sort_by_key(|reply| reply.validator == 2);
    let mut round = QuorumRound::new(&net.committee, &request);
    let verdicts: Vec<Verdict> = all
        .into_iter()
        .map(|reply| round.take(reply, &cache))
        .collect();
    assert!(matches!(verdicts[2], Verdict::Certified(_)));
    assert_eq!(verdicts[3], Verdict::Finished);
    assert!(round.faults.is_empty(), "{:?}", round.faults);
}

/// Scheme bls over TCP: four validator processes' BLS votes certify every payment, each
/// certificate verifies, and the client spent one aggregate check per certificate rather than
/// one per vote (votes wait unchecked until they reach the quorum).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bls_validators_certify_and_the_client_checks_one_aggregate_per_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start_with(dir.path(), &[], 2, Scheme::Bls).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    for payer in 0..8 {
        let request = spend(&net, payer, (payer + 1) % 8);
        let certificates = certify(&client, &request, &cache).await.expect("certifies");
        assert_eq!(certificates.len(), 1);
        assert!(certificates[0]
            .votes
            .iter()
            .all(|vote| matches!(vote.signature, walras_payments::VoteSignature::Bls(_))));
        let mut fresh = RootCache::default();
        verify_certificate(&certificates[0], &net.committee, &mut fresh).expect("verifies");
        assert_eq!(fresh.signature_checks, 1);
    }
    let checks = cache.lock().expect("cache").signature_checks;
    assert_eq!(checks, 8, "one aggregate check per single-output payment");
}

/// Scheme bls: the garbage-signing validator's reply arrives first, so the first quorum-sized
/// aggregate includes it and fails; each waiting vote is then checked alone, the garbage one is
/// named, and the honest votes still certify once a third honest one arrives. Its next vote is
/// checked alone at once: before, a garbage validator spoiled every payment's first aggregate
/// (measured: `bench --scheme bls --byzantine 1 --fault garbage` at 200/s certified 97/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_signing_bls_validator_is_named_when_its_vote_spoils_the_aggregate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = start_with(dir.path(), &[(2, Fault::Garbage)], 1, Scheme::Bls).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    let request = spend(&net, 3, 4);
    let (faults, certified) = feed_first(&net, &client, &request, &cache, 2).await;
    assert_eq!(faults, vec![(2, VoteFault::BadSignature)]);
    let (position, certificates) = certified.first().expect("three honest votes certify");
    assert_eq!(
        *position, 3,
        "certified with the fourth reply, the third honest one"
    );
    assert!(certificates[0].votes.iter().all(|vote| vote.validator != 2));
    verify_certificate(&certificates[0], &net.committee, &mut RootCache::default())
        .expect("verifies");

    // The next payment, garbage first again: validator 2 is now a suspect (the shared cache
    // remembers), so its vote is checked alone on arrival and the three honest votes aggregate
    // at once: two checks, where the first payment took five (a failed aggregate, three single
    // checks, the aggregate that certified).
    let checks_before = cache.lock().expect("cache").signature_checks;
    assert_eq!(checks_before, 5);
    let request = spend(&net, 5, 6);
    let (faults, certified) = feed_first(&net, &client, &request, &cache, 2).await;
    assert!(!certified.is_empty());
    assert_eq!(faults, vec![(2, VoteFault::BadSignature)]);
    let checks = cache.lock().expect("cache").signature_checks - checks_before;
    assert_eq!(checks, 2, "the suspect alone, then one aggregate");
}

/// Broadcasts `request`, waits for all four replies, and feeds them to a fresh quorum round with
/// validator `first`'s reply first: the faults it recorded and, for each reply that completed
/// a quorum, its position and the certificates.
async fn feed_first(
    net: &Net,
    client: &Arc<CommitteeClient>,
    request: &PaymentRequest,
    cache: &Mutex<RootCache>,
    first: u16,
) -> (
    Vec<(u16, VoteFault)>,
    Vec<(usize, Vec<walras_payments::Certificate>)>,
) {
    let mut replies = client.broadcast(0, request);
    let mut all = Vec::new();
    while let Some(reply) = replies.recv().await {
        all.push(reply);
    }
    assert_eq!(all.len(), 4);
    all.sort_by_key(|reply| reply.validator != first);
    let mut round = QuorumRound::new(&net.committee, request);
    let mut certified = Vec::new();
    for (position, reply) in all.into_iter().enumerate() {
        if let Verdict::Certified(certificates) = round.take(reply, cache) {
            certified.push((position, certificates));
        }
    }
    (round.faults, certified)
}

/// Two of four validators silent: no quorum, and the error counts the two valid votes it got
/// and names the silent validators. Under bls the two honest votes never reach the quorum that
/// triggers the aggregate check; before the fix they stayed unchecked and the error said "0
/// valid votes of 3" (now they are checked alone before the error is built).
async fn silent_validators_beyond_f_stop_certification(scheme: Scheme) {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = [(0, Fault::Silent), (1, Fault::Silent)];
    let net = start_with(dir.path(), &faults, 1, scheme).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let error = certify(&client, &spend(&net, 5, 6), &cache)
        .await
        .expect_err("two silent of four: no quorum");
    let text = error.to_string();
    assert!(text.contains("2 valid votes of 3"), "{scheme:?}: {text}");
    assert!(
        text.contains("validator 0") && text.contains("validator 1"),
        "{scheme:?}: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_validators_beyond_f_stop_certification_with_a_named_reason() {
    let merkle = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    silent_validators_beyond_f_stop_certification(merkle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_bls_a_missing_quorum_still_counts_the_valid_votes_it_got() {
    silent_validators_beyond_f_stop_certification(Scheme::Bls).await;
}

/// A validator configuration carrying a deliberate fault (what `walras payments bench` writes)
/// is refused when faults are refused (the production build), before anything starts; with
/// faults allowed the same file gets past that check (and here fails on its missing committee).
/// Before, a production validator started from such a file played the fault, with a warning.
#[tokio::test]
async fn a_production_validator_refuses_a_configuration_with_a_deliberate_fault() {
    use walras_payments_net::{start_from_file, Faults};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("validator0.json");
    std::fs::write(
        &path,
        r#"{"committee": "committee.json", "genesis": "genesis.json", "index": 0,
            "key": "validator0.key", "data": "v0", "fault": "equivocate"}"#,
    )
    .unwrap();
    let refused = start_from_file(&path, Faults::Refused).await.err().unwrap();
    assert!(
        matches!(
            refused,
            walras_payments_net::ValidatorError::FaultRefused {
                index: 0,
                fault: walras_payments_net::Fault::Equivocate,
                ..
            }
        ),
        "{refused}"
    );
    let refused = refused.to_string();
    assert!(
        refused.contains("Equivocate") && refused.contains("refuses"),
        "{refused}"
    );
    let allowed = start_from_file(&path, Faults::Allowed)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(!allowed.contains("refuses"), "{allowed}");
    assert!(allowed.contains("committee.json"), "{allowed}");
}

/// Trigger: one client address opens connections and leaves them idle (issue 26 item 9). Past
/// its share the next connection from that address gets a typed `TooManyConnections` reply and
/// is closed, while another address is still served; idle ones are closed after the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_a_validators_connections_and_idle_ones_are_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = Keypair::from_seed([9; 32]);
    let committee = Committee {
        chain_id: CHAIN,
        epoch: Epoch(0),
        validators: vec![key.public_key()],
        shards: 1,
        bls: Vec::new(),
    };
    let validator = Validator::start(
        ValidatorSetup {
            committee,
            scheme: Scheme::Merkle {
                batch_leaves_max: 128,
            },
            index: 0,
            keypair: key,
            genesis: Vec::new(),
            data: dir.path().join("v0"),
            fault: None,
        },
        "127.0.0.1:0",
    )
    .await
    .expect("validator starts")
    .with_policy(ConnectionPolicy {
        max: 8,
        per_address_max: 3,
        idle_timeout: std::time::Duration::from_millis(800),
        ..ConnectionPolicy::default()
    });
    let address = validator.address;
    tokio::spawn(validator.serve());
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(
            tokio::net::TcpStream::connect(address)
                .await
                .expect("connects"),
        );
    }
    let mut over = tokio::net::TcpStream::connect(address)
        .await
        .expect("connects");
    let body = tokio::time::timeout(std::time::Duration::from_secs(2), read_frame(&mut over))
        .await
        .expect("a reply")
        .expect("a frame");
    match decode_response_message(&body).expect("decodes").1 {
        Response::Error(error) => {
            assert_eq!(error.code, ErrorCode::TooManyConnections);
            assert!(error.message.contains("127.0.0.1"), "{}", error.message);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Another client address (all of 127/8 is loopback) is still served.
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.2:0".parse().expect("address"))
        .expect("binds 127.0.0.2");
    let other = socket.connect(address).await.expect("connects");
    let (mut reader, mut writer) = other.into_split();
    walras_payments_net::write_frame(
        &mut writer,
        &walras_payments_net::encode_request_message(7, &Request::Stats),
    )
    .await
    .expect("writes");
    let body = read_frame(&mut reader).await.expect("a frame");
    assert!(matches!(
        decode_response_message(&body).expect("decodes"),
        (7, Response::Stats(_))
    ));
    // The idle ones are closed by the validator (a read sees the end), freeing the share.
    for stream in &mut idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(std::time::Duration::from_secs(3), stream.read(&mut byte))
            .await
            .expect("closed within the idle timeout");
        assert_eq!(read.expect("clean close"), 0);
    }
    let mut again = tokio::net::TcpStream::connect(address)
        .await
        .expect("connects");
    again
        .write_all(&{
            let body = walras_payments_net::encode_request_message(8, &Request::Stats);
            let mut framed = (body.len() as u32).to_be_bytes().to_vec();
            framed.extend_from_slice(&body);
            framed
        })
        .await
        .expect("writes");
    let body = read_frame(&mut again).await.expect("a frame");
    assert!(matches!(
        decode_response_message(&body).expect("decodes"),
        (8, Response::Stats(_))
    ));
}

/// Issue 33: 50 committees of four started in a row, each member binding port 0 (what `payments
/// localnet` now does). In every committee the four addresses differ and each answers a payment
/// with the votes of its own index, so no member ever answers for another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_committees_in_a_row_give_every_member_its_own_port() {
    let keys: Vec<Keypair> = (0..4u8).map(|i| Keypair::from_seed([i + 1; 32])).collect();
    let payer = Keypair::from_seed([77; 32]);
    let committee = Committee {
        chain_id: CHAIN,
        epoch: Epoch(0),
        validators: keys.iter().map(Keypair::public_key).collect(),
        shards: 1,
        bls: Vec::new(),
    };
    let coin = (
        genesis_output_id(CHAIN, 0),
        Output {
            asset: AssetId(0),
            amount: 1,
            owner: payer.public_key(),
        },
    );
    let request = PaymentRequest {
        signed: SignedPayment::sign(
            Payment {
                chain_id: CHAIN,
                epoch: Epoch(0),
                inputs: vec![Input {
                    id: coin.0,
                    output: coin.1,
                }],
                outputs: vec![Output {
                    owner: keys[0].public_key(),
                    ..coin.1
                }],
            },
            &payer,
        ),
        certificates: Vec::new(),
    };
    for round in 0..50 {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut addresses = Vec::new();
        let mut serving = Vec::new();
        for (index, key) in keys.iter().enumerate() {
            let validator = Validator::start(
                ValidatorSetup {
                    committee: committee.clone(),
                    scheme: Scheme::Merkle {
                        batch_leaves_max: 128,
                    },
                    index: index as u16,
                    keypair: key.clone(),
                    genesis: vec![coin],
                    data: dir.path().join(format!("v{index}")),
                    fault: None,
                },
                "127.0.0.1:0",
            )
            .await
            .expect("validator starts");
            addresses.push(validator.address.to_string());
            serving.push(tokio::spawn(validator.serve()));
        }
        let distinct: std::collections::BTreeSet<&String> = addresses.iter().collect();
        assert_eq!(distinct.len(), 4, "round {round}: {addresses:?}");
        let client = CommitteeClient::new(committee.clone(), addresses.clone());
        for index in 0..4u16 {
            let pay = Request::Pay {
                shard: 0,
                request: request.clone(),
            };
            match client.call(index, &pay).await {
                Ok(Response::Votes(votes)) => assert_eq!(votes.validator, index, "round {round}"),
                other => panic!("round {round} validator {index}: {other:?}"),
            }
        }
        for task in serving {
            task.abort();
        }
    }
}

/// The payments of `net`'s first `count` payers, each spending its genesis coin to the next.
fn spends(net: &Net, count: usize) -> Vec<PaymentRequest> {
    (0..count)
        .map(|payer| spend(net, payer, (payer + 1) % count))
        .collect()
}

/// A validator that refuses every payment for overload: its queue holds none.
fn always_overloaded() -> ConnectionPolicy {
    ConnectionPolicy {
        queued_max: 0,
        queue_wait_max: std::time::Duration::from_secs(10),
        ..ConnectionPolicy::default()
    }
}

/// Issue 31, trigger: 1,200 payments offered at once to a committee whose shards queue at most
/// 32 (before, a connection waited for room and every payment was queued and handled however
/// late; the bench collapsed to 518/s at 20x its capacity). Now what is over the queue is
/// refused at once, typed `Overloaded` with a retry hint, unhandled; no shard ever holds more
/// than 32 (each validator's high-water mark); resending only what was refused, after the
/// hint, certifies every payment (goodput: all 1,200 within 200 rounds, none failed, nothing
/// lost), and no validator's core refused or double-spent anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_committee_refuses_typed_keeps_its_queues_bounded_and_loses_nothing() {
    const PAYMENTS: usize = 1_200;
    const QUEUED_MAX: usize = 32;
    let policy = ConnectionPolicy {
        queued_max: QUEUED_MAX,
        // The count bounds the queue here unless a payment takes over 6 ms (the bound holds
        // either way); the retry hint is 200 ms.
        queue_wait_max: std::time::Duration::from_millis(200),
        in_flight_max: 4 * PAYMENTS,
        ..ConnectionPolicy::default()
    };
    let policies: Vec<_> = (0..4).map(|index| (index, policy)).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    let (net, probes) =
        start_with_policies(dir.path(), &[], 1, scheme, &policies, PAYMENTS as u32).await;
    // The client holds nothing back, so the validators' admission is what is tested.
    let client = CommitteeClient::with_in_flight_max(
        net.committee.clone(),
        net.addresses.clone(),
        1_000_000,
    );
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let mut waiting = spends(&net, PAYMENTS);
    let mut certified = 0;
    let mut refused_by_validators = 0;
    let mut rounds = 0;
    while !waiting.is_empty() {
        rounds += 1;
        assert!(rounds <= 200, "{} payments still refused", waiting.len());
        let mut tasks = Vec::new();
        for request in waiting.drain(..) {
            let client = client.clone();
            let cache = cache.clone();
            tasks.push(tokio::spawn(async move {
                let result = certify(&client, &request, &cache).await;
                (request, result)
            }));
        }
        let mut retry_after = std::time::Duration::ZERO;
        for task in tasks {
            let (request, result) = task.await.expect("task");
            match result {
                Ok(certificates) => {
                    assert_eq!(certificates.len(), 1);
                    certified += 1;
                }
                Err(CertifyError::Overloaded {
                    refused_by_validators: by,
                    retry_after: after,
                    ..
                }) => {
                    if by > 0 {
                        refused_by_validators += 1;
                    }
                    retry_after = retry_after.max(after);
                    waiting.push(request);
                }
                Err(other) => panic!("a payment failed instead of being refused: {other}"),
            }
        }
        tokio::time::sleep(retry_after).await;
    }
    assert_eq!(certified, PAYMENTS);
    assert!(
        refused_by_validators > 0,
        "1,200 payments at once into queues of {QUEUED_MAX}: some must be refused"
    );
    // A payment is certified once a quorum answers; the last validator may still hold its
    // copy then. Its queue must drain, not be empty at that instant (a run failed on 3 still
    // queued at one validator).
    let drained_by = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while probes.iter().any(|probe| probe.loads()[0].queued > 0)
        && std::time::Instant::now() < drained_by
    {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for (validator, probe) in probes.iter().enumerate() {
        let load = probe.loads()[0];
        assert!(
            load.queued_high <= QUEUED_MAX,
            "validator {validator} queued {} payments, over {QUEUED_MAX}",
            load.queued_high
        );
        assert!(load.refused_at_admission > 0);
        assert_eq!(load.queued, 0);
    }
    let client_stats = client.call(0, &Request::Stats).await.expect("stats");
    let Response::Stats(shards) = client_stats else {
        panic!("stats")
    };
    // Every payment handled once at validator 0, none refused by the core, each coin spent
    // once: no work was done for a refused request.
    // Nothing refused by the core (a refusal for overload is not a refusal of the payment),
    // and no coin spent twice. Resends of a payment a validator already holds are answered
    // with the same votes (2,776 handled for 1,200 payments in one run: the cost of four
    // validators admitting independently, bounded by the rounds).
    assert_eq!(shards[0].refused, 0);
    assert!(shards[0].spent <= PAYMENTS as u64);
    assert!(shards[0].requests >= shards[0].spent);
}

/// Issue 31, trigger: two of four validators refuse every payment for overload. The first
/// payment reaches all four, gets two votes and two typed refusals: `Overloaded`, not a
/// failure. The client then backs off those two for their retry hint, and since two cannot make
/// a quorum of three, the next payment is sent to none (held back, nothing handled anywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_backs_off_overloaded_validators_and_sends_nothing_without_a_quorum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    let policies = [(0, always_overloaded()), (1, always_overloaded())];
    let (net, _) = start_with_policies(dir.path(), &[], 1, scheme, &policies, 8).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    match certify(&client, &spend(&net, 0, 1), &cache).await {
        Err(CertifyError::Overloaded {
            valid,
            overloaded,
            refused_by_validators,
            retry_after,
            ..
        }) => {
            assert_eq!((valid, overloaded, refused_by_validators), (2, 2, 2));
            assert_eq!(retry_after, std::time::Duration::from_secs(1));
        }
        other => panic!("expected an overload refusal, got {other:?}"),
    }
    match certify(&client, &spend(&net, 2, 3), &cache).await {
        Err(CertifyError::Overloaded {
            valid: 0,
            overloaded: 4,
            refused_by_validators: 0,
            ..
        }) => {}
        other => panic!("expected the client to hold the payment back, got {other:?}"),
    }
    // The honest validators handled the first payment only.
    for validator in 2..4u16 {
        let Ok(Response::Stats(shards)) = client.call(validator, &Request::Stats).await else {
            panic!("stats")
        };
        assert_eq!(shards[0].requests, 1, "validator {validator}");
    }
}

/// Issue 31, trigger: payments that waited in the queue past the age limit (here 0: every
/// one) are refused unhandled by the shard thread, typed `Overloaded`: no signature check, no
/// spend, and the same request certifies once the validator keeps up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_that_waited_past_its_age_limit_is_refused_unhandled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    let stale = ConnectionPolicy {
        job_age_max: std::time::Duration::ZERO,
        ..ConnectionPolicy::default()
    };
    let policies: Vec<_> = (0..4).map(|index| (index, stale)).collect();
    let (net, probes) = start_with_policies(dir.path(), &[], 1, scheme, &policies, 8).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let request = spend(&net, 0, 1);
    let reply = client
        .call(
            0,
            &Request::Pay {
                shard: 0,
                request: request.clone(),
            },
        )
        .await;
    match reply {
        Err(NetError::Overloaded { message, .. }) => {
            assert!(message.contains("age limit"), "{message}")
        }
        other => panic!("expected an overload refusal, got {other:?}"),
    }
    let Ok(Response::Stats(shards)) = client.call(0, &Request::Stats).await else {
        panic!("stats")
    };
    assert_eq!((shards[0].requests, shards[0].spent), (0, 0));
    assert_eq!(probes[0].loads()[0].shed_stale, 1);
}

/// Trigger (found measuring `bench --scheme bls --byzantine 1 --fault garbage`, where 15 of
/// 1,500 payments counted as `failed` with no refusal counted): validator 0 signs garbage and
/// validator 1 refuses for overload. The two honest votes and the overloaded validator would make
/// the quorum, so nothing is lost: the payment is `Overloaded` (resend it), not `NoQuorum`.
/// Before the fix any fault turned an overload refusal into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overload_refusal_beside_a_garbage_vote_is_reported_as_overload_not_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = [(1, always_overloaded())];
    let faults = [(0, Fault::Garbage)];
    let (net, _) = start_with_policies(dir.path(), &faults, 1, Scheme::Bls, &policies, 8).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Mutex::new(RootCache::default());
    match certify(&client, &spend(&net, 0, 1), &cache).await {
        Err(CertifyError::Overloaded {
            valid,
            overloaded,
            refused_by_validators,
            ..
        }) => assert_eq!((valid, overloaded, refused_by_validators), (2, 1, 1)),
        other => panic!("expected an overload refusal, got {other:?}"),
    }
}

/// One frame from `reader`, when nothing is expected after it before the test reads again (the
/// frame reader's buffer is dropped with it).
async fn read_frame<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<bytes::Bytes, FrameError> {
    FrameReader::new(reader).next().await
}

/// `count` offers, one payment each, of `net`'s payers from `*next` on (each spends its coin).
fn offers(net: &Net, next: &mut usize, count: usize) -> Vec<Offer> {
    let payers = net.payers.len();
    let first = *next;
    *next = (first + count).min(payers);
    (first..*next)
        .map(|payer| vec![spend(net, payer, (payer + 1) % payers)])
        .collect()
}

/// The certified rate of a closed loop: `workers` tasks each certify one payment of `pool` after
/// another (a refused one goes back to the pool) for `duration`. A closed loop cannot overload
/// the committee beyond `workers` payments at once, so this is its capacity however the client
/// behaves under overload.
async fn closed_loop_goodput(
    client: &Arc<CommitteeClient>,
    cache: &Arc<Mutex<RootCache>>,
    pool: Vec<Offer>,
    workers: usize,
    duration: std::time::Duration,
) -> f64 {
    let pool: Vec<PaymentRequest> = pool.into_iter().flatten().collect();
    let pool = Arc::new(Mutex::new(pool));
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (client, cache, pool) = (client.clone(), cache.clone(), pool.clone());
        tasks.push(tokio::spawn(async move {
            let mut certified = 0u64;
            while start.elapsed() < duration {
                let Some(request) = pool.lock().expect("pool").pop() else {
                    break;
                };
                match certify(&client, &request, &cache).await {
                    Ok(_) => certified += 1,
                    Err(CertifyError::Overloaded { retry_after, .. }) => {
                        pool.lock().expect("pool").push(request);
                        tokio::time::sleep(retry_after).await;
                    }
                    Err(other) => panic!("a payment failed: {other}"),
                }
            }
            certified
        }));
    }
    let mut certified = 0;
    for task in tasks {
        certified += task.await.expect("worker");
    }
    certified as f64 / start.elapsed().as_secs_f64()
}

/// Issue 31, payments (the client's adaptive window): a committee offered 20 times its capacity
/// certifies at least 4/5 of its goodput at 1x. Measured in this test, on this machine: a closed
/// loop of 64 payments at a time for 1 s gives the capacity C (at most 4,000/s, so the payers
/// suffice on a fast machine); then an open loop of 2 s at C and one of 2 s at 20 × C, the
/// same committee and client. With no cap in the client (every payment sent, the validators'
/// admission alone refusing) this fails: 442/s at 20x where 1x gave 3,030/s (closed loop
/// 3,128/s) in one run on the 2-core VM, and the next run used up its pool on refusals. Ratios
/// of runs in one test, a generous margin: not a timing test.
///
/// A round is one 1x run and one 20x run; up to [`OVERLOAD_ROUNDS_MAX`] rounds, and the test
/// passes on the first round that holds. A shared machine's hypervisor can take 40% of the
/// cores for seconds: one round's 20x then ran on a slower machine than its 1x (ratios 0.99 to
/// 1.59 on the 2-core VM, and one failure under ~40% steal). A collapse fails every round
/// (0.15 without the client's cap); failures and unanswered payments fail any round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_twenty_times_its_capacity_a_committee_certifies_four_fifths_of_its_goodput_at_capacity(
) {
    const CAPACITY_MAX: u64 = 4_000;
    // The closed loop's pool, then per round 2.2 s at capacity and 5 s' worth at 20x.
    const PAYERS: u32 = 8_000 + (OVERLOAD_ROUNDS_MAX as u32) * 29_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    let (net, _) = start_with_policies(dir.path(), &[], 1, scheme, &[], PAYERS).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let mut next = 0;
    let phase = |rate_per_s: u64, seconds: u64| OpenLoop {
        rate_per_s,
        duration: std::time::Duration::from_secs(seconds),
        drain: std::time::Duration::from_secs(10),
    };
    let pool = offers(&net, &mut next, 8_000);
    let second = std::time::Duration::from_secs(1);
    let closed = closed_loop_goodput(&client, &cache, pool, 64, second).await;
    let capacity = (closed as u64).clamp(100, CAPACITY_MAX);
    let mut rounds = Vec::new();
    for _ in 0..OVERLOAD_ROUNDS_MAX {
        let at_capacity = phase(capacity, 2);
        let pool = offers(&net, &mut next, (2 * capacity + capacity / 5) as usize);
        let one_x = run_open_loop(&client, &cache, at_capacity, pool, |_, _| {}).await;
        let overload = phase(20 * capacity, 2);
        let pool = offers(&net, &mut next, 5 * capacity as usize);
        let twenty_x = run_open_loop(&client, &cache, overload, pool, |_, _| {}).await;
        let (goodput_1x, goodput_20x) = (
            one_x.goodput_per_s(&at_capacity),
            twenty_x.goodput_per_s(&overload),
        );
        let figures = format!(
            "closed loop {closed:.0}/s, capacity {capacity}/s; 1x: {goodput_1x:.0}/s, p99 {} us; 20x: {goodput_20x:.0}/s, p99 {} \
             us, refused {:?}, not offered {:?}, windows {:?}",
            p99_us(&one_x),
            p99_us(&twenty_x),
            twenty_x.refused,
            twenty_x.not_offered,
            twenty_x.windows,
        );
        eprintln!("round {}: {figures}", rounds.len() + 1);
        for report in [&one_x, &twenty_x] {
            assert_eq!((report.failed, report.unanswered), (0, 0), "{figures}");
        }
        assert!(
            !twenty_x.not_offered.contains_key("presigned_exhausted"),
            "the pool ran out, so the goodput is the pool's: {figures}"
        );
        let holds = goodput_20x >= 0.8 * goodput_1x && twenty_x.refused.values().sum::<u64>() > 0;
        rounds.push(figures);
        if holds {
            return;
        }
    }
    panic!(
        "in no round did 20x certify 4/5 of 1x while refusing: {:#?}",
        rounds
    );
}

/// Rounds of the overload test above, at most.
const OVERLOAD_ROUNDS_MAX: usize = 3;

/// The 99th percentile latency of a run's certified payments, in microseconds.
fn p99_us(report: &LoadReport) -> u64 {
    let latencies = &report.certified_latencies_us;
    latencies
        .get(latencies.len() * 99 / 100)
        .copied()
        .unwrap_or(0)
}

/// Issue 31, trigger: `walras payments bench` at 400,000/s over 5 s did not end within 60 s on
/// 16 cores (it signed and made coins for all 2,000,000 payments before the clock, and its send
/// loop had no end but the last slot). The open loop at 5,000,000/s over 1 s with 2,000 offers
/// ends within the load, its grace, its drain and a margin; every slot is accounted for
/// (offered, or not offered with a reason), every sent request has its outcome, and most sent
/// requests were not refused at once (trigger of the second defect: the loop spawned tasks
/// faster than they ran, and its hold-back check saw none of them in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_at_millions_a_second_ends_on_time_and_accounts_for_every_slot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scheme = Scheme::Merkle {
        batch_leaves_max: 128,
    };
    let (net, _) = start_with_policies(dir.path(), &[], 1, scheme, &[], 2_000).await;
    let client = CommitteeClient::new(net.committee.clone(), net.addresses.clone());
    let cache = Arc::new(Mutex::new(RootCache::default()));
    let load = OpenLoop {
        rate_per_s: 5_000_000,
        duration: std::time::Duration::from_secs(1),
        drain: std::time::Duration::from_secs(5),
    };
    let pool = offers(&net, &mut 0, 2_000);
    let started = std::time::Instant::now();
    let mut outcomes = 0u64;
    let report = run_open_loop(&client, &cache, load, pool, |_, _| outcomes += 1).await;
    let took = started.elapsed();
    let bound = load.duration + LATE_GRACE + load.drain + std::time::Duration::from_secs(3);
    assert!(took < bound, "took {took:?}, bound {bound:?}: {report:?}");
    let not_offered: u64 = report.not_offered.values().sum();
    let held_back_at_once = report.offered - report.sent;
    assert_eq!(
        report.sent + held_back_at_once + not_offered,
        load.slots(),
        "{report:?}"
    );
    let certified = report.certified_latencies_us.len() as u64;
    let refused_after_sending = report.refused.values().sum::<u64>() - held_back_at_once;
    assert_eq!(outcomes, report.sent - report.unanswered);
    assert_eq!(
        certified + refused_after_sending + report.failed + report.unanswered,
        report.sent,
        "{report:?}"
    );
    assert!(certified > 0, "{report:?}");
    assert!(certified <= 2_000, "one certificate per coin: {report:?}");
    // The loop's hold-back check sees what it already sent (a broadcast counts its requests in
    // flight before their tasks run). Before, at this rate most requests passed the check on
    // stale counts and were then held back inside `certify` and resent: 245,115 resent of
    // 270,440 handed to the client for 10,583 certified in the 400,000/s bench.
    assert!(
        report.resent * 2 <= report.sent,
        "most requests were refused after passing the hold-back check: {report:?}"
    );
}
