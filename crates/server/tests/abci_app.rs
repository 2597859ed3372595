//! The ABCI++ application driven directly, as CometBFT would drive it, with no CometBFT and
//! no clock (a mock consensus): PrepareProposal → ProcessProposal → FinalizeBlock → Commit.
//!
//! Checks that ProcessProposal rejects, with no change to the state, every proposal whose
//! clearing violates conservation (more sold than the offers hold) or a limit price
//! (valuations under which the traded offers' limits are not met), and proposals that are
//! not Walras blocks; that it accepts the honest proposal; that FinalizeBlock's app hash is
//! the stored block's state root; that Info reports what Commit stored, also after a
//! restart; and that CheckTx refuses malformed, tag-shaped, badly signed and replayed
//! transactions with their codes.

use bytes::Bytes;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{
    response_process_proposal::ProposalStatus, CheckTxType, RequestCheckTx, RequestFinalizeBlock,
    RequestInfo, RequestInitChain, RequestPrepareProposal, RequestProcessProposal, RequestQuery,
};
use walras_api::proposal;
use walras_api::wire::DevGenesisJson;
use walras_devnet::{dev_genesis, dev_keypair};
use walras_engine::BlockHeader;
use walras_server::cometbft::app::code;
use walras_server::{abci_app, NodeConfig};
use walras_testkit::TempDir;
use walras_types::{AccountId, AssetId, Operation, Price, SignedTransaction, Transaction};

const DEV: DevGenesisJson = DevGenesisJson {
    seed: 5,
    accounts: 100,
    assets: 3,
};

fn config(data: &std::path::Path) -> NodeConfig {
    walras_testkit::dev_node_config(data, DEV)
}

fn sign(source: u64, sequence: u64, operation: Operation) -> SignedTransaction {
    let transaction = Transaction {
        source: AccountId(source),
        sequence,
        operation,
    };
    let signature = dev_keypair(&DEV, transaction.source).sign(&transaction.encode());
    SignedTransaction {
        transaction,
        signature: *signature.as_bytes(),
    }
}

/// Two accounts holding different assets, each offering to sell what it holds for what the
/// other holds at a limit of 0.5: they cross at any valuation ratio in (0.5, 2).
fn crossing_offers() -> Vec<SignedTransaction> {
    let genesis = dev_genesis(&DEV, 1).unwrap();
    let holder = |asset: u16, except: Option<u64>| {
        genesis
            .accounts
            .iter()
            .find(|account| {
                Some(account.id.0) != except
                    && account
                        .balances
                        .iter()
                        .any(|(held, amount)| held.0 == asset && *amount >= 1_000_000)
            })
            .map(|account| account.id.0)
            .expect("a dev account holds the asset")
    };
    let seller_of_0 = holder(0, None);
    let seller_of_1 = holder(1, Some(seller_of_0));
    let offer = |source: u64, sell: u16, buy: u16| {
        sign(
            source,
            1,
            Operation::CreateOffer {
                sell: AssetId(sell),
                buy: AssetId(buy),
                amount: 1_000_000,
                min_price: Price::parse_limit("0.5").unwrap(),
            },
        )
    };
    vec![offer(seller_of_0, 0, 1), offer(seller_of_1, 1, 0)]
}

/// InitChain at height 1, as CometBFT starts a new chain.
fn init_chain(app: &impl Application) {
    app.init_chain(RequestInitChain {
        initial_height: 1,
        ..RequestInitChain::default()
    });
}

/// PrepareProposal of `txs` at `height` with a 1 MiB byte budget: the proposal's txs.
fn prepare(app: &impl Application, txs: Vec<Bytes>, height: i64) -> Vec<Bytes> {
    app.prepare_proposal(RequestPrepareProposal {
        txs,
        max_tx_bytes: 1 << 20,
        height,
        ..RequestPrepareProposal::default()
    })
    .txs
}

fn encoded(transactions: &[SignedTransaction]) -> Vec<Bytes> {
    transactions
        .iter()
        .map(|signed| Bytes::from(signed.encode()))
        .collect()
}

fn process(app: &impl Application, txs: Vec<Bytes>, height: i64) -> ProposalStatus {
    let response = app.process_proposal(RequestProcessProposal {
        txs,
        height,
        ..RequestProcessProposal::default()
    });
    ProposalStatus::try_from(response.status).unwrap()
}

/// The proposal's txs with its header changed by `change`.
fn tampered(txs: &[Bytes], change: impl Fn(&mut BlockHeader)) -> Vec<Bytes> {
    let mut header =
        BlockHeader::decode(txs[0].strip_prefix(proposal::HEADER_TAG).unwrap()).unwrap();
    change(&mut header);
    proposal::encode(&header, &txs[1..])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn check_tx(app: &impl Application, tx: Vec<u8>) -> u32 {
    app.check_tx(RequestCheckTx {
        tx: Bytes::from(tx),
        r#type: CheckTxType::New as i32,
    })
    .code
}

#[test]
fn process_proposal_rejects_clearings_that_break_conservation_or_limit_prices() {
    let dir = TempDir::new("abci");
    let app = abci_app(&config(dir.path())).unwrap();
    init_chain(&app);
    let offers = crossing_offers();
    let prepared = prepare(&app, encoded(&offers), 1);
    assert_eq!(prepared.len(), 1 + offers.len(), "header + transactions");
    let header =
        BlockHeader::decode(prepared[0].strip_prefix(proposal::HEADER_TAG).unwrap()).unwrap();
    assert_eq!(header.trades.len(), 2, "the two offers trade: {header:?}");

    let info_before = app.info(RequestInfo::default());
    // Conservation: a pair claims to sell more than its offers hold.
    let oversold = tampered(&prepared, |header| header.trades[0].sold += 10_000_000);
    assert_eq!(process(&app, oversold, 1), ProposalStatus::Reject);
    // Limit prices: the sold asset made nearly worthless, so trading at p_sell/p_buy is far
    // below the offers' limit of 0.5.
    let below_limit = tampered(&prepared, |header| {
        let sell = header.trades[0].sell.0 as usize;
        header.valuations[sell] = 1;
    });
    assert_eq!(process(&app, below_limit, 1), ProposalStatus::Reject);
    // Not a Walras block: no header, a header for another height, an undecodable entry.
    assert_eq!(
        process(&app, prepared[1..].to_vec(), 1),
        ProposalStatus::Reject
    );
    assert_eq!(process(&app, prepared.clone(), 2), ProposalStatus::Reject);
    let mut garbage = prepared.clone();
    garbage.push(Bytes::from_static(b"\x01 not a transaction"));
    assert_eq!(process(&app, garbage, 1), ProposalStatus::Reject);
    assert_eq!(process(&app, Vec::new(), 1), ProposalStatus::Reject);
    // A rejected proposal changes nothing.
    assert_eq!(app.info(RequestInfo::default()), info_before);

    // The honest proposal is accepted, executes, and commits.
    assert_eq!(process(&app, prepared.clone(), 1), ProposalStatus::Accept);
    let finalized = app.finalize_block(RequestFinalizeBlock {
        txs: prepared.clone(),
        height: 1,
        ..RequestFinalizeBlock::default()
    });
    assert_eq!(finalized.tx_results.len(), prepared.len());
    assert!(finalized
        .tx_results
        .iter()
        .all(|result| result.code == code::OK));
    assert_eq!(finalized.app_hash.len(), 32);
    app.commit();
    let info = app.info(RequestInfo::default());
    assert_eq!(info.last_block_height, 1);
    assert_eq!(info.last_block_app_hash, finalized.app_hash);

    // Query serves the committed state.
    let queried = app.query(RequestQuery {
        path: format!("/accounts/{}", offers[0].transaction.source.0),
        ..RequestQuery::default()
    });
    assert_eq!(queried.code, code::OK, "{}", queried.log);
    let account: serde_json::Value = serde_json::from_slice(&queried.value).unwrap();
    assert_eq!(account["last_sequence"], 1);
    assert_eq!(queried.height, 1);
    let status = app.query(RequestQuery {
        path: "/status".into(),
        ..RequestQuery::default()
    });
    let status: serde_json::Value = serde_json::from_slice(&status.value).unwrap();
    assert_eq!(status["height"], 1);
    assert_eq!(
        status["state_root"].as_str().unwrap(),
        hex(&finalized.app_hash)
    );
    for bad in ["/nothing", "/accounts/x", "/accounts/99999"] {
        let answer = app.query(RequestQuery {
            path: bad.into(),
            ..RequestQuery::default()
        });
        assert_ne!(answer.code, code::OK, "{bad}");
        assert!(!answer.log.is_empty());
    }

    // CheckTx against the committed state.
    assert_eq!(check_tx(&app, offers[0].encode()), code::REPLAYED);
    assert_eq!(check_tx(&app, b"\x01\x02".to_vec()), code::MALFORMED);
    assert_eq!(
        check_tx(&app, prepared[0].to_vec()),
        code::MALFORMED,
        "a header is no transaction"
    );
    let mut forged = sign(
        offers[0].transaction.source.0,
        2,
        offers[0].transaction.operation,
    );
    forged.signature[0] ^= 1;
    assert_eq!(check_tx(&app, forged.encode()), code::BAD_SIGNATURE);
    let unknown = sign(10_000, 1, offers[0].transaction.operation);
    assert_eq!(check_tx(&app, unknown.encode()), code::UNKNOWN_ACCOUNT);
    let far = sign(
        offers[0].transaction.source.0,
        500,
        offers[0].transaction.operation,
    );
    assert_eq!(check_tx(&app, far.encode()), code::SEQUENCE_OUT_OF_WINDOW);
    let next = sign(
        offers[0].transaction.source.0,
        2,
        offers[0].transaction.operation,
    );
    assert_eq!(check_tx(&app, next.encode()), code::OK);

    // A restart recovers what Commit stored, and Info says so (the handshake's input).
    drop(app);
    let reopened = abci_app(&config(dir.path())).unwrap();
    assert_eq!(reopened.info(RequestInfo::default()), info);
}

/// Trigger: ABCI calls CometBFT never makes in that order, as any local process reaching the
/// ABCI port could send them: a `Commit` with no `FinalizeBlock` before it (5 bytes on the
/// wire; it used to exit the process), a `FinalizeBlock` for a height other than the next, one
/// of bytes that are no Walras block, and a second `FinalizeBlock` before the first's
/// `Commit`. Each is refused with nothing changed, and the honest sequence still commits.
#[test]
fn out_of_protocol_commit_and_finalize_block_are_refused_without_stopping_the_node() {
    let dir = TempDir::new("abci-out-of-protocol");
    let app = abci_app(&config(dir.path())).unwrap();
    init_chain(&app);
    let info_before = app.info(RequestInfo::default());
    app.commit();
    assert_eq!(app.info(RequestInfo::default()), info_before);

    let offers = crossing_offers();
    let prepared = prepare(&app, encoded(&offers), 1);
    let finalize = |txs: Vec<Bytes>, height: i64| {
        app.finalize_block(RequestFinalizeBlock {
            txs,
            height,
            ..RequestFinalizeBlock::default()
        })
    };
    assert!(
        finalize(prepared.clone(), 5).app_hash.is_empty(),
        "wrong height"
    );
    assert!(
        finalize(vec![Bytes::from_static(b"junk")], 1)
            .app_hash
            .is_empty(),
        "no block"
    );
    app.commit();
    assert_eq!(app.info(RequestInfo::default()), info_before);

    let finalized = finalize(prepared.clone(), 1);
    assert_eq!(finalized.app_hash.len(), 32);
    let empty_next = prepare(&app, Vec::new(), 2);
    assert!(
        finalize(empty_next, 2).app_hash.is_empty(),
        "a second FinalizeBlock before the first's Commit"
    );
    app.commit();
    let info = app.info(RequestInfo::default());
    assert_eq!(info.last_block_height, 1);
    assert_eq!(info.last_block_app_hash, finalized.app_hash);
    app.commit();
    assert_eq!(
        app.info(RequestInfo::default()),
        info,
        "a second Commit changes nothing"
    );
}

/// Trigger: CheckTx of a payment whose signature's R carries the point of order 2 (the strict
/// rule refused it; a cofactorless batch check accepted it half the time). Under ZIP-215 it is
/// accepted (a deliberate change: it was refused as badly signed before), as by every other
/// path; the same signature with a non-canonical `s` (`s + ℓ`) is refused as badly signed.
#[test]
fn check_tx_accepts_an_order_2_signature_and_refuses_a_non_canonical_s() {
    let dir = TempDir::new("abci-order-2");
    let app = abci_app(&config(dir.path())).unwrap();
    let honest = crossing_offers().remove(0);
    let transaction = honest.transaction;
    let pair = dev_keypair(&DEV, transaction.source);
    let order_2 = walras_crypto::testing::sign_with_order_2_nonce(&pair, &transaction.encode());
    let crafted = SignedTransaction {
        transaction,
        signature: *order_2.as_bytes(),
    };
    let non_canonical = SignedTransaction {
        transaction,
        signature: *walras_crypto::testing::with_s_plus_group_order(&order_2).as_bytes(),
    };
    assert_eq!(check_tx(&app, non_canonical.encode()), code::BAD_SIGNATURE);
    assert_eq!(check_tx(&app, crafted.encode()), code::OK);
    assert_eq!(check_tx(&app, honest.encode()), code::OK);
}

/// An application whose CheckTx limits are the test's: CometBFT's pending set held to twice
/// `mempool_capacity` (no rate measured yet), blocks of at most `max_block_txs`, and
/// `commit_bound` for what may wait.
fn app_with_limits(
    dir: &TempDir,
    mempool_capacity: usize,
    max_block_txs: usize,
    commit_bound: std::time::Duration,
) -> walras_server::cometbft::WalrasApp {
    let mut config = config(dir.path());
    config.mempool_capacity = mempool_capacity;
    config.max_block_txs = max_block_txs;
    config.commit_bound = commit_bound;
    abci_app(&config).unwrap()
}

fn recheck_tx(app: &impl Application, tx: Vec<u8>) -> u32 {
    app.check_tx(RequestCheckTx {
        tx: Bytes::from(tx),
        r#type: CheckTxType::Recheck as i32,
    })
    .code
}

fn payment(source: u64, sequence: u64) -> SignedTransaction {
    sign(
        source,
        sequence,
        Operation::Payment {
            to: AccountId(source + 1),
            asset: AssetId(0),
            amount: 1,
        },
    )
}

/// Trigger (issue 31): in CometBFT mode, 200,000 transactions were admitted and never
/// committed within the run: CheckTx admitted whatever CometBFT's 200,000-slot mempool would
/// hold, whatever the network could commit, and nothing left it but a block. Now CheckTx holds
/// CometBFT's pending set to twice what commits within the commit bound (the nodes' HTTP
/// admission sheds at once the limit; CheckTx is the backstop; here the capacity, 3, so 6: no
/// rate is measured yet) and refuses the rest `OVERLOADED` before looking at the signature (a
/// forged transaction over the limit is not answered `BAD_SIGNATURE`); a recheck after a block
/// drops what has pended longer than the bound allows (`EXPIRED`), which makes room again.
#[test]
fn check_tx_refuses_what_cannot_commit_in_time_before_its_signature_and_rechecks_expire_the_old() {
    let dir = TempDir::new("abci-overload");
    let app = app_with_limits(&dir, 3, 3, std::time::Duration::from_millis(200));
    let admitted: Vec<SignedTransaction> = (1..=6).map(|source| payment(source, 1)).collect();
    for signed in &admitted {
        assert_eq!(check_tx(&app, signed.encode()), code::OK);
    }
    let mut forged = payment(10, 1);
    forged.signature[0] ^= 1;
    assert_eq!(check_tx(&app, forged.encode()), code::OVERLOADED);
    // A transaction CheckTx already holds is not refused for the load it is part of.
    assert_eq!(recheck_tx(&app, admitted[0].encode()), code::OK);
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(recheck_tx(&app, admitted[0].encode()), code::EXPIRED);
    // Its slot is free: the forged transaction is now looked at, and refused for its signature.
    assert_eq!(check_tx(&app, forged.encode()), code::BAD_SIGNATURE);
    assert_eq!(check_tx(&app, payment(11, 1).encode()), code::OK);
    assert_eq!(check_tx(&app, payment(12, 1).encode()), code::OVERLOADED);
}

fn bundle(transactions: &[SignedTransaction]) -> Vec<u8> {
    proposal::encode_bundle(transactions).to_vec()
}

/// A bundle (many transactions in one CometBFT transaction, what a node's forwarder sends) is
/// admitted as its transactions would be one by one: it counts as its transactions against
/// the pending set's limit (twice the capacity of 5 here: CheckTx is the backstop), a bundle with one forged, replayed or unknown member is refused
/// whole with that member's code and takes no room, and a recheck keeps a bundle while one of
/// its members can still commit.
#[test]
fn a_bundle_is_admitted_as_its_transactions_one_by_one_and_refused_whole_for_one_bad_member() {
    let dir = TempDir::new("abci-bundle-check");
    let app = app_with_limits(&dir, 5, 10, std::time::Duration::from_secs(600));
    let mut forged = payment(4, 1);
    forged.signature[0] ^= 1;
    assert_eq!(
        check_tx(&app, bundle(&[payment(1, 1), forged, payment(5, 1)])),
        code::BAD_SIGNATURE
    );
    let unknown = payment(10_000, 1);
    assert_eq!(
        check_tx(&app, bundle(&[payment(1, 1), unknown])),
        code::UNKNOWN_ACCOUNT
    );
    // The refused bundles took no room: eight plus two fill the ten slots.
    let eight: Vec<SignedTransaction> = (1..=3).chain(11..=15).map(|s| payment(s, 1)).collect();
    assert_eq!(check_tx(&app, bundle(&eight)), code::OK);
    assert_eq!(
        check_tx(&app, bundle(&[payment(6, 1), payment(7, 1), payment(8, 1)])),
        code::OVERLOADED,
        "three more do not fit in the two slots left"
    );
    assert_eq!(
        check_tx(&app, bundle(&[payment(6, 1), payment(7, 1)])),
        code::OK
    );
    // What the pending set holds already is not counted again.
    assert_eq!(
        check_tx(&app, bundle(&[payment(1, 1), payment(6, 1)])),
        code::OK
    );
    assert_eq!(check_tx(&app, payment(9, 1).encode()), code::OVERLOADED);
    assert_eq!(
        recheck_tx(&app, bundle(&[payment(1, 1), payment(2, 1)])),
        code::OK
    );
    assert_eq!(check_tx(&app, BUNDLE_OF_NOTHING.to_vec()), code::MALFORMED);
}

/// A peer's bundle is judged by the verdicts its signatures get one by one, though CheckTx now
/// checks them together (in batches on the engine's threads, where each was checked alone, at
/// about twice the cost, in the ABCI connection's thread): a member whose `R` carries the
/// point of order 2 is accepted, the same signature with a non-canonical `s` gets the whole
/// bundle refused `BAD_SIGNATURE`, and no accepted verdict is checked twice: the refused
/// bundle's other members and then the proposal's check find theirs in the record. Once they
/// committed, the same transactions gossiped again are replays, refused before any signature
/// check (the rule's cheaper checks come first on this path too).
#[test]
fn a_peer_s_bundle_is_checked_together_with_the_verdicts_each_signature_gets_alone() {
    let dir = TempDir::new("abci-bundle-batch");
    let app = app_with_limits(&dir, 100, 100, std::time::Duration::from_secs(600));
    init_chain(&app);
    let mut members: Vec<SignedTransaction> = (1..=40).map(|source| payment(source, 1)).collect();
    let transaction = members[20].transaction;
    let pair = dev_keypair(&DEV, transaction.source);
    let order_2 = walras_crypto::testing::sign_with_order_2_nonce(&pair, &transaction.encode());
    let non_canonical = walras_crypto::testing::with_s_plus_group_order(&order_2);
    members[20].signature = *non_canonical.as_bytes();
    assert_eq!(check_tx(&app, bundle(&members)), code::BAD_SIGNATURE);
    members[20].signature = *order_2.as_bytes();
    assert_eq!(
        app.signature_checks_saved(),
        0,
        "the first bundle's were all verified"
    );
    assert_eq!(check_tx(&app, bundle(&members)), code::OK);
    assert_eq!(
        app.signature_checks_saved(),
        39,
        "the refused bundle's 39 accepted signatures are not verified again"
    );
    let proposal = prepare(&app, vec![Bytes::from(bundle(&members))], 1);
    assert_eq!(process(&app, proposal.clone(), 1), ProposalStatus::Accept);
    assert!(
        app.signature_checks_saved() >= 39 + 40,
        "the proposal's check found the bundle's verdicts: {} saved",
        app.signature_checks_saved()
    );
    // Cheapest first: once the block commits, the same transactions gossiped again are
    // refused as replays before any signature is looked at (not even in the record).
    let finalized = app.finalize_block(RequestFinalizeBlock {
        txs: proposal,
        height: 1,
        ..RequestFinalizeBlock::default()
    });
    assert!(!finalized.app_hash.is_empty(), "block 1 executes");
    app.commit();
    let saved = app.signature_checks_saved();
    assert_eq!(check_tx(&app, bundle(&members[..30])), code::REPLAYED);
    assert_eq!(
        app.signature_checks_saved(),
        saved,
        "a replayed bundle cost no signature check"
    );
}

/// Just the bundle tag: a bundle of no transactions, malformed.
const BUNDLE_OF_NOTHING: &[u8] = proposal::BUNDLE_TAG;

/// A proposal carrying its transactions in bundles executes the same Walras block as one
/// carrying them one per CometBFT transaction: the same app hash; FinalizeBlock answers one
/// result per CometBFT transaction (header, then each entry), with a bundle whose members were
/// all dropped `DROPPED` and one partly dropped OK, each dropped member named.
///
/// Trigger: the same transaction in two bundles (a client that sent it to two nodes), or
/// twice in one, made a block with one sequence number used twice, and the engine drops every
/// such transaction: PrepareProposal now takes each transaction once.
#[test]
fn a_proposal_of_bundles_executes_the_same_block_as_one_of_single_transactions() {
    let offers = crossing_offers();
    let finalize = |name: &str, entries: Vec<Bytes>| {
        let dir = TempDir::new(name);
        let app = abci_app(&config(dir.path())).unwrap();
        init_chain(&app);
        let prepared = prepare(&app, entries, 1);
        assert_eq!(process(&app, prepared.clone(), 1), ProposalStatus::Accept);
        let finalized = app.finalize_block(RequestFinalizeBlock {
            txs: prepared.clone(),
            height: 1,
            ..RequestFinalizeBlock::default()
        });
        assert_eq!(finalized.tx_results.len(), prepared.len());
        app.commit();
        (prepared, finalized, dir)
    };
    let (_, singles, _a) = finalize("abci-singles", encoded(&offers));
    assert!(singles
        .tx_results
        .iter()
        .all(|result| result.code == code::OK));

    let reversed: Vec<SignedTransaction> = offers.iter().rev().copied().collect();
    let (prepared, twice, _b) = finalize(
        "abci-bundles-twice",
        vec![Bytes::from(bundle(&offers)), Bytes::from(bundle(&reversed))],
    );
    assert_eq!(
        prepared[1..],
        [Bytes::from(bundle(&offers))],
        "each transaction once"
    );
    assert_eq!(twice.app_hash, singles.app_hash);

    let (prepared, overlap, _c) = finalize(
        "abci-bundles-overlap",
        vec![
            Bytes::from(offers[0].encode()),
            Bytes::from(bundle(&reversed)),
        ],
    );
    assert_eq!(
        prepared[1..],
        encoded(&offers)[..],
        "the rest of the bundle, re-encoded"
    );
    assert_eq!(overlap.app_hash, singles.app_hash);

    // One transaction twice in one bundle (a faulty peer's gossip): proposed once.
    let doubled = [offers[0], offers[1], offers[0]];
    let (prepared, within, _e) =
        finalize("abci-bundle-doubled", vec![Bytes::from(bundle(&doubled))]);
    assert_eq!(
        prepared[1..],
        [Bytes::from(bundle(&offers))],
        "the bundle re-encoded without the copy"
    );
    assert_eq!(within.app_hash, singles.app_hash);

    let strangers = [payment(10_000, 1), payment(10_001, 1)];
    let (_, mixed, _d) = finalize(
        "abci-bundles-dropped",
        vec![
            Bytes::from(bundle(&[offers[0], strangers[0]])),
            Bytes::from(bundle(
                &strangers[1..]
                    .iter()
                    .chain(&offers[1..])
                    .copied()
                    .collect::<Vec<_>>(),
            )),
            Bytes::from(bundle(&[payment(10_002, 1), payment(10_003, 1)])),
        ],
    );
    assert_eq!(
        mixed.app_hash, singles.app_hash,
        "the same trades, strangers dropped"
    );
    let partly = &mixed.tx_results[1];
    assert_eq!(partly.code, code::OK, "{partly:?}");
    assert!(
        partly.log.starts_with("1 of 2 dropped: 1: "),
        "{}",
        partly.log
    );
    assert!(mixed.tx_results[2].log.starts_with("1 of 2 dropped: 0: "));
    let all = &mixed.tx_results[3];
    assert_eq!(all.code, code::DROPPED, "{all:?}");
    assert!(all.log.starts_with("2 of 2 dropped: 0: "), "{}", all.log);
}

/// A validator verifies each signature once: what CheckTx accepted is found in the node's
/// record when the proposal holding it is checked. Trigger: ProcessProposal verified every
/// signature of the block again, although CheckTx had verified each gossiped one (a 2-core
/// localnet at 3x committed 4.0-4.6k tx/s; with one check, 6.1-6.2k).
#[test]
fn a_signature_check_tx_accepted_is_not_verified_again_for_the_proposal() {
    let dir = TempDir::new("abci-verified-once");
    let app = abci_app(&config(dir.path())).unwrap();
    init_chain(&app);
    let offers = crossing_offers();
    assert_eq!(check_tx(&app, bundle(&offers)), code::OK);
    let saved_before = app.signature_checks_saved();
    let prepared = prepare(&app, vec![Bytes::from(bundle(&offers))], 1);
    let after_prepare = app.signature_checks_saved();
    assert_eq!(process(&app, prepared, 1), ProposalStatus::Accept);
    assert_eq!(
        app.signature_checks_saved(),
        after_prepare + offers.len() as u64,
        "ProcessProposal found every signature CheckTx accepted (prepare found {})",
        after_prepare - saved_before
    );
}
