//! The HTTP API's JSON bodies: what the node sends and accepts under `/v1`, shared by the server
//! and the command-line client so the two cannot drift apart.
//!
//! Conventions: hashes, keys and signatures are lowercase hex; amounts are integers; limit prices
//! are decimal strings (exact: parsing rounds up, printing gives the shortest decimal that parses
//! back to the same price); valuations are the raw `u128` of the block header, with `prices` beside
//! them as decimal strings (units of asset 0, 12 significant digits; the exact price is the ratio of
//! two valuations). Every error is [`ApiError`] with a 4xx/5xx status.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error answer: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Error)]
pub struct ApiError {
    pub error: ErrorBody,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// Stable, machine-readable: `malformed`, `bad_signature`, `unknown_account`, `replayed`, ...
    pub code: String,
    /// For a person: what is wrong and what to do.
    pub message: String,
}

/// A transaction in JSON (`POST /v1/transactions` with `Content-Type: application/json`). The
/// signature covers the canonical binary encoding (`Transaction::encode`), not this JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Transaction)]
pub struct TransactionJson {
    pub source: u64,
    pub sequence: u64,
    pub operation: OperationJson,
    /// 64 bytes, hex.
    #[schema(pattern = "^[0-9a-fA-F]{128}$")]
    pub signature: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
#[schema(as = Operation)]
pub enum OperationJson {
    CreateAccount {
        new_account: u64,
        /// 32 bytes, hex.
        #[schema(pattern = "^[0-9a-fA-F]{64}$")]
        public_key: String,
    },
    CreateOffer {
        sell: u16,
        buy: u16,
        amount: u64,
        /// Decimal: units of `buy` per unit of `sell`.
        min_price: String,
    },
    CancelOffer {
        sell: u16,
        buy: u16,
        min_price: String,
        offer_id: u64,
    },
    Payment {
        to: u64,
        asset: u16,
        amount: u64,
    },
    /// Moves `amount` of `asset` into the payments escrow as an output owned by `owner`.
    DepositToPayments {
        asset: u16,
        amount: u64,
        /// The payments (ed25519) key that will own the output, 32 bytes, hex.
        #[schema(pattern = "^[0-9a-fA-F]{64}$")]
        owner: String,
    },
    /// Redeems a certified payments output for the source account.
    WithdrawFromPayments {
        /// 32 bytes, hex.
        #[schema(pattern = "^[0-9a-fA-F]{64}$")]
        output_id: String,
        asset: u16,
        amount: u64,
        /// 32 bytes, hex: must be the source account's key.
        #[schema(pattern = "^[0-9a-fA-F]{64}$")]
        owner: String,
        chain_id: u64,
        epoch: u64,
        /// The signer bitmap, 16 bytes big-endian, hex (bit i = validator i).
        #[schema(pattern = "^[0-9a-fA-F]{32}$")]
        signers: String,
        /// The BLS aggregate signature, 96 bytes, hex.
        #[schema(pattern = "^[0-9a-fA-F]{192}$")]
        aggregate: String,
    },
}

/// `202 Accepted` answer to a single submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SubmitResponse {
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    /// Always `pending`: admitted to the mempool, not yet in a block.
    #[schema(value_type = SubmitState)]
    pub status: String,
}

/// Answer to `POST /v1/transactions/batch` (body: `SignedTransaction::encode_list`, binary).
/// The batch as a whole is `200` when it decodes; each item says whether it was admitted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchSubmitResponse {
    pub admitted: u32,
    pub rejected: u32,
    /// One per transaction, in the order sent.
    pub results: Vec<BatchItemResult>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchItemResult {
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    /// Absent when admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// With `error`: the HTTP status a single submission refused for the same reason gets
    /// (503 `mempool_full`, 409 `replayed`, ...), so clients can count refusals by status and
    /// code without a table of codes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

/// `GET /v1/transactions/{hash}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = TransactionStatus)]
pub struct TransactionStatusJson {
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    /// `pending` (in the mempool or the block being built), `accepted` or `dropped`.
    #[schema(value_type = TransactionState)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u64>,
    /// Position in the block's transaction list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Why it was dropped (a `DropReason` name such as `account_overdraft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `GET /v1/accounts/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Account)]
pub struct AccountJson {
    pub id: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub public_key: String,
    /// Highest sequence number used by a committed transaction.
    pub last_sequence: u64,
    /// The lowest sequence number not used by a committed or pending transaction: what a client
    /// should sign next. A transaction must lie in `(last_sequence, last_sequence + 64]`.
    pub next_sequence: u64,
    pub balances: Vec<BalanceJson>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Balance)]
pub struct BalanceJson {
    pub asset: u16,
    pub amount: u64,
}

/// `GET /v1/accounts/{id}/offers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AccountOffers)]
pub struct AccountOffersJson {
    pub account: u64,
    pub offers: Vec<OfferJson>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Offer)]
pub struct OfferJson {
    pub offer_id: u64,
    pub sell: u16,
    pub buy: u16,
    /// Amount of `sell` still offered.
    pub amount: u64,
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub min_price: String,
}

/// `GET /v1/books/{sell}/{buy}?levels=N`: the resting offers selling `sell` for `buy`,
/// aggregated by limit price, lowest (most willing) first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Book)]
pub struct BookJson {
    pub sell: u16,
    pub buy: u16,
    pub offers: u64,
    /// Total amount of `sell` offered.
    pub amount: u64,
    pub levels: Vec<LevelJson>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Level)]
pub struct LevelJson {
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub min_price: String,
    pub amount: u64,
    pub offers: u32,
}

/// `GET /v1/blocks/{height}` (the encoded block: `GET /v1/blocks/{height}/raw`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Block)]
pub struct BlockJson {
    pub height: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub previous: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub transactions_root: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub state_root: String,
    pub transactions: u32,
    pub accepted: u32,
    pub dropped: Vec<DroppedJson>,
    /// The header's raw `u128` valuations, as JSON integers that may exceed 2^64 (read them
    /// as big integers, not as doubles).
    pub valuations: Vec<u128>,
    /// As in [`BlockEventJson::prices`].
    #[schema(required = true)]
    pub prices: Vec<Option<String>>,
    pub trades: Vec<TradeJson>,
    /// The proposer's clearing quality (not consensus data): present when this node proposed
    /// the block; absent on a follower and for blocks stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clearing: Option<ClearingQualityJson>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Dropped)]
pub struct DroppedJson {
    pub index: u32,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Trade)]
pub struct TradeJson {
    pub sell: u16,
    pub buy: u16,
    /// Amount of `sell` sold by the pair's offers.
    pub sold: u64,
    /// The last offer, in canonical order, that traded.
    pub last_offer_account: u64,
    pub last_offer_id: u64,
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub last_offer_min_price: String,
}

/// `GET /v1/blocks/{height}/fills`: what each offer sold and received in one block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = BlockFills)]
pub struct BlockFillsJson {
    pub height: u64,
    /// By pair (pair order), each pair's offers in canonical order (lowest limit first); only
    /// the given account's when `?account=` was given.
    pub fills: Vec<FillJson>,
}

/// One offer's trade in a block: the integer amounts its account gave and got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Fill)]
pub struct FillJson {
    pub account: u64,
    pub offer_id: u64,
    pub sell: u16,
    pub buy: u16,
    /// Amount of `sell` given.
    pub sold: u64,
    /// Amount of `buy` received.
    pub bought: u64,
    /// Amount of `sell` returned to the account as the offer closed: the rest its fill left
    /// when that rest could sell nothing at the block's rate and was worth at most 15 units of
    /// `buy` there (dust; docs/prices.md, "The rest rule"). 0 otherwise; absent from servers
    /// older than the rule.
    #[serde(default)]
    pub returned: u64,
    /// `bought / sold` (units of `buy` per unit of `sell`, after commission), 12 significant
    /// digits: at least the offer's limit price times (1 − ε).
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub rate: String,
}

/// `GET /v1/prices`: the market's last traded prices, and the latest block's clearing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Prices)]
pub struct PricesJson {
    /// Height of the latest block; 0 before the first block (then `valuations` is empty).
    pub height: u64,
    /// The latest block's clearing valuations, as in [`BlockJson::valuations`]: raw `u128` JSON
    /// integers that may exceed 2^64. Only those of assets that traded in that block (see
    /// `traded`) are prices; the others are where the price search started.
    pub valuations: Vec<u128>,
    /// Per asset, as in [`BlockEventJson::prices`], for the latest block.
    #[schema(required = true)]
    pub prices: Vec<Option<String>>,
    /// Per asset: whether an offer sold or bought it in the latest block.
    pub traded: Vec<bool>,
    /// Last traded prices, carried forward across blocks without trades.
    pub reference: ReferencePricesJson,
}

/// The market's last traded prices: per asset in units of asset 0, and per ordered pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = ReferencePrices)]
pub struct ReferencePricesJson {
    /// Every block after this height is reflected (0: since genesis; a node restarted from a
    /// checkpoint of the format before these prices starts at that checkpoint's height).
    pub since_height: u64,
    /// One entry per asset, in asset order.
    pub assets: Vec<AssetPriceJson>,
    /// One entry per ordered pair that traded, in pair order.
    pub pairs: Vec<PairPriceJson>,
}

/// One asset's last traded price in units of asset 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = AssetPrice)]
pub struct AssetPriceJson {
    pub asset: u16,
    /// The last block in which an offer sold or bought the asset; `null` if none.
    #[schema(required = true)]
    pub last_traded_height: Option<u64>,
    /// Units of asset 0 per unit of this asset, 12 significant digits, from the last block in
    /// which it traded in one connected group of traded pairs with asset 0 (only there are the
    /// two valuations on one scale); `null` if there was none: not traded is not a price.
    #[schema(required = true, pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub price: Option<String>,
    /// The same price exactly (the Q48.80 rate as a decimal that parses back to it).
    #[schema(required = true, pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub price_exact: Option<String>,
    /// The block that set `price`.
    #[schema(required = true)]
    pub price_height: Option<u64>,
}

/// One ordered pair's last clearing rate (before commission).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = PairPrice)]
pub struct PairPriceJson {
    pub sell: u16,
    pub buy: u16,
    /// Units of `buy` per unit of `sell`, 12 significant digits.
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub rate: String,
    /// The same rate exactly (Q48.80 as a decimal that parses back to it).
    #[schema(pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub rate_exact: String,
    /// The last block in which the pair traded.
    pub height: u64,
}

/// `GET /v1/assets`: what the genesis calls each asset. Display only: amounts and prices in every
/// other answer stay in base units (a price is units of asset 0 per unit of the asset).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Assets)]
pub struct AssetsJson {
    /// Whether the genesis names its assets; when it does not, symbols are `A0`, `A1`, ... and
    /// decimals 0.
    pub named: bool,
    /// The asset prices are quoted in (always 0).
    pub quote_asset: u16,
    /// One entry per asset, in asset order.
    pub assets: Vec<AssetJson>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Asset)]
pub struct AssetJson {
    pub asset: u16,
    pub symbol: String,
    /// One token is `10^decimals` base units.
    pub decimals: u8,
}

/// `GET /v1/status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Status)]
pub struct StatusJson {
    pub version: String,
    pub height: u64,
    /// Hash of the last committed block's header (all zeros before the first block).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub block_hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub state_root: String,
    pub assets: u16,
    pub accounts: u64,
    pub open_offers: u64,
    pub mempool_transactions: u64,
    pub mempool_capacity: u64,
    /// What the node commits an admitted transaction within, in milliseconds: admission
    /// refuses what it expects could not make it, and the producer drops what waited longer
    /// (see docs/node.md, "Admission under overload"). Absent from nodes without the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_bound_ms: Option<u64>,
    /// Present when the node was started on a generated development genesis, whose keys anyone
    /// can derive (see `walras_devnet::dev_keypair`): for tests and demos only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev_genesis: Option<DevGenesisJson>,
}

/// `GET /v1/gateway`: where the node's blocks come from and, with `--block-source gateway`, the
/// fair-access gateway's counters as of its last sealed batch (it sends them with each batch).
/// Every field but `block_source` is `null` in timer mode, and before the first sealed batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = GatewayStatus)]
pub struct GatewayStatusJson {
    /// `"timer"` (the node cuts blocks on its own timer) or `"gateway"`.
    #[schema(value_type = GatewayBlockSource)]
    pub block_source: String,
    /// Participants in the gateway's participants file.
    #[schema(required = true)]
    pub participants_configured: Option<u32>,
    /// Participants connected to the gateway.
    #[schema(required = true)]
    pub participants_connected: Option<u32>,
    /// Participants the gateway does not wait for now (round trip or silence too long).
    #[schema(required = true)]
    pub stragglers: Option<u32>,
    /// Trades that arrived below an already sealed boundary, since the gateway started.
    #[schema(required = true)]
    pub late_trades_total: Option<u64>,
    /// Trades refused because the gateway's ordering buffer was full, since it started.
    #[schema(required = true)]
    pub queue_full_total: Option<u64>,
    /// How long after block N's publication block N+1 was sealed, for the last sealed block, µs.
    #[schema(required = true)]
    pub last_seal_delay_us: Option<u64>,
    /// Height of the last block sealed by the gateway and committed here.
    #[schema(required = true)]
    pub sealed_height: Option<u64>,
}

/// The most accounts a development genesis may have (its keys come from a pool of 65,536).
pub const DEV_ACCOUNTS_MAX: u64 = 10_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = DevGenesis)]
pub struct DevGenesisJson {
    pub seed: u64,
    pub accounts: u64,
    pub assets: u16,
}

/// How well one block's clearing did (SPEEDEX §6.2 measures).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = ClearingQuality)]
pub struct ClearingQualityJson {
    pub iterations: u64,
    pub achieved_epsilon: f64,
    pub achieved_mu: f64,
    /// Unrealized over realized utility: what in-the-money offers left on the table; `null` when
    /// it is infinite (offers could trade and none did).
    #[schema(required = true)]
    pub unrealized_utility_ratio: Option<f64>,
    /// Price computation and settlement.
    pub millis: f64,
}

/// One server-sent event per committed block on `GET /v1/events` (event name `block`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = BlockEvent)]
pub struct BlockEventJson {
    pub height: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub state_root: String,
    pub transactions: u32,
    pub accepted: u32,
    pub dropped: u32,
    pub converged: bool,
    /// The clearing's quality when this node computed it (it proposed the block); `null` when it
    /// checked a clearing made elsewhere.
    #[schema(required = true)]
    pub clearing: Option<ClearingQualityJson>,
    pub trades: u32,
    /// Per asset: its price in units of asset 0 in this block, when it traded in this block in
    /// one connected group of traded pairs with asset 0; `null` otherwise (its valuation is
    /// where the price search started, not a price). Decimal strings, 12 significant digits
    /// (JSON doubles would lose digits in some readers); the exact price is `valuations[i] /
    /// valuations[0]` of the block.
    #[schema(required = true)]
    pub prices: Vec<Option<String>>,
    /// Execution (signatures to state root) in milliseconds.
    pub execute_ms: f64,
    /// Durable commit to the store in milliseconds.
    pub persist_ms: f64,
    /// Unix time of the commit in milliseconds.
    pub committed_unix_ms: u64,
    /// The advisory band check of this block's clearing against the node's oracle; absent when
    /// the node runs no oracle or it had no healthy reference. Never part of consensus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_band: Option<OracleBandJson>,
    /// Dropped transactions by `DropReason` name (`account_overdraft`, ...), in name order;
    /// absent when nothing was dropped.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub dropped_by_reason: std::collections::BTreeMap<String, u32>,
    /// Where this node's execution of the block spent its time; absent from nodes before it
    /// was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseTimingsJson>,
}

/// Time per phase of executing one block, in milliseconds (`execute_ms` is about their sum).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = PhaseTimings)]
pub struct PhaseTimingsJson {
    /// Signature checks (near zero where admission already checked them).
    pub signatures: f64,
    /// The block filter (admission rule and block-wide rules).
    pub filter: f64,
    /// Gathering new and cancelled offers and building the clearing's books.
    pub plan: f64,
    /// Price computation (tâtonnement, LP) and settlement.
    pub clearing: f64,
    /// Debits, locks, trades and credits (parallel per pair).
    pub apply: f64,
    /// Trie updates and the state root.
    pub commit: f64,
}

/// `GET /v1/node`: what this node runs and how it is doing, for operators and the dashboard
/// (which parts are configured, so it asks only for those).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = Node)]
pub struct NodeJson {
    pub version: String,
    /// `solo` or `cometbft`.
    #[schema(value_type = Consensus)]
    pub consensus: String,
    /// `timer` (the node cuts blocks), `gateway` (only the fair-access gateway's batches) or
    /// `cometbft` (replicated: CometBFT orders them).
    #[schema(value_type = BlockSource)]
    pub block_source: String,
    /// Whether a valuation oracle runs (`GET /v1/oracle/prices`).
    pub oracle: bool,
    /// Whether the genesis names a payments committee (`GET /v1/payments/*`).
    pub payments: bool,
    pub height: u64,
    pub mempool_transactions: u64,
    pub mempool_capacity: u64,
    /// Open `/v1/events` streams, and the most all clients together may hold.
    pub event_streams: u64,
    pub event_streams_max: u64,
    /// Blocks this process committed since it started, and their mean durable-commit time.
    pub blocks_committed: u64,
    #[schema(required = true)]
    pub persist_ms_mean: Option<f64>,
    /// Present in replicated mode: what this node's CometBFT says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cometbft: Option<CometbftJson>,
}

/// The node's CometBFT, from its RPC (`/status`, `/net_info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Cometbft)]
pub struct CometbftJson {
    /// The RPC address the node reads.
    pub rpc: String,
    /// CometBFT's latest block height; `null` when its RPC did not answer.
    #[schema(required = true)]
    pub height: Option<u64>,
    #[schema(required = true)]
    pub catching_up: Option<bool>,
    /// Connected peers; `null` when its RPC did not answer.
    #[schema(required = true)]
    pub peers: Option<u64>,
    /// Why the numbers are missing, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /v1/oracle/prices` and the `oracle` event: the node's oracle's latest publication,
/// one entry per exchange asset in its asset map. Advisory: nothing committed depends on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OraclePrices)]
pub struct OraclePricesJson {
    /// Unix time of the publication in milliseconds.
    pub published_unix_ms: u64,
    /// The currency prices are in (the asset map's numeraire).
    pub numeraire: String,
    /// Where the oracle's records come from (`feed FILE` or `venues ...`).
    pub source: String,
    /// By exchange asset id.
    pub prices: Vec<OraclePriceJson>,
    /// Book health per venue, by venue name.
    pub venues: Vec<OracleVenueJson>,
}

/// One exchange asset's oracle price.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OraclePrice)]
pub struct OraclePriceJson {
    /// Exchange asset id.
    pub asset: u16,
    /// The oracle's name for it.
    pub symbol: String,
    /// Exchange units per whole token (decimal string: it may exceed 2^53).
    #[schema(pattern = "^[0-9]+$")]
    pub units: String,
    /// Price of one whole token in the numeraire; `null` unless the oracle has one.
    #[schema(required = true)]
    pub price: Option<f64>,
    /// `ok`, `insufficient_venues` or `unavailable` (only `ok` prices are used by the node).
    #[schema(value_type = OraclePriceStatus)]
    pub status: String,
    /// Age of the oldest book used, in milliseconds of the oracle's clock.
    pub age_ms: f64,
    /// Weighted median absolute deviation of the venues used, in basis points.
    pub dispersion_bps: f64,
    pub venues_used: Vec<OracleVenueUsedJson>,
    pub venues_excluded: Vec<OracleVenueExcludedJson>,
    /// The valuation method (e.g. `notional-depth`).
    pub method: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OracleVenueUsed)]
pub struct OracleVenueUsedJson {
    pub venue: String,
    pub symbol: String,
    pub price: f64,
    pub weight: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OracleVenueExcluded)]
pub struct OracleVenueExcludedJson {
    pub venue: String,
    pub symbol: String,
    pub reason: String,
}

/// Books of one venue by health.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OracleVenue)]
pub struct OracleVenueJson {
    pub venue: String,
    pub synced: u64,
    pub resyncing: u64,
    pub crossed: u64,
    pub stale: u64,
    pub thin: u64,
}

/// The advisory band check of one block: each asset's clearing valuation ratio against the
/// oracle's price ratio, both relative to `reference_asset`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OracleBand)]
pub struct OracleBandJson {
    pub height: u64,
    /// The lowest-id asset with a healthy oracle price (its deviation is 0 by definition).
    pub reference_asset: u16,
    /// `--oracle-band-bps`: deviations beyond it are flagged (and sent as an `oracle_band` event).
    pub band_bps: f64,
    pub assets: Vec<OracleDeviationJson>,
}

/// `deviation_bps = (clearing ratio / oracle ratio − 1) × 10⁴`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = OracleDeviation)]
pub struct OracleDeviationJson {
    pub asset: u16,
    pub symbol: String,
    pub deviation_bps: f64,
    pub beyond_band: bool,
}

/// One committed deposit into the payments escrow: the payments output it created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Deposit)]
pub struct DepositJson {
    /// The block that committed it.
    pub height: u64,
    /// The deposit transaction's hash, hex.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub transaction: String,
    /// `deposit_output_id(transaction hash, 0)`, hex: the output's id in the payments lane.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub output_id: String,
    pub asset: u16,
    pub amount: u64,
    /// The payments key that owns the output, hex.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub owner: String,
}

/// `GET /v1/payments/deposits?after_height=H`: committed deposits of blocks `H+1 ..=
/// scanned_to`, in block order then transaction order. Ask again with `after_height =
/// scanned_to` for more; `scanned_to` never passes the committed tip.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Deposits)]
pub struct DepositsJson {
    pub scanned_to: u64,
    pub deposits: Vec<DepositJson>,
}

/// `GET /v1/payments/escrow`: the bridge's state at the exchange's current height.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = Escrow)]
pub struct EscrowJson {
    pub height: u64,
    /// The payments chain and committee epoch withdrawals are checked against.
    pub chain_id: u64,
    pub epoch: u64,
    /// Per asset (index = asset id): deposited and not withdrawn.
    pub escrow: Vec<u64>,
    /// How many payments outputs have been withdrawn.
    pub withdrawn: u64,
}

/// `GET /v1/offers/{id}/explain[?account=A]`: whether an offer traded, how much, at what rate,
/// and if not, why (see `walras_explain`). Amounts are decimal strings; prices are
/// exact decimals; fields that do not apply are `null`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = OfferExplanation)]
pub struct OfferExplanationJson {
    pub offer_id: u64,
    /// `traded`, `partly_traded`, `not_traded`, `dropped`, `cancelled`, `pending` or `unknown`.
    #[schema(value_type = OfferState)]
    pub status: String,
    /// The block explained: the latest the offer was live in; for a cancelled offer the block
    /// that cancelled it; for a dropped one the block that dropped it.
    #[schema(required = true)]
    pub height: Option<u64>,
    #[schema(required = true)]
    pub account: Option<u64>,
    #[schema(required = true)]
    pub sell_asset: Option<u32>,
    #[schema(required = true)]
    pub buy_asset: Option<u32>,
    #[schema(required = true, pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub limit_price: Option<String>,
    /// The pair's rate in the latest block the offer was live in (units of buy per sell).
    #[schema(required = true, pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub clearing_rate: Option<String>,
    /// The amount the offer was created with.
    #[schema(required = true, pattern = "^[0-9]+$")]
    pub amount: Option<String>,
    /// Sold and received over all its blocks.
    #[schema(required = true, pattern = "^[0-9]+$")]
    pub sold: Option<String>,
    #[schema(required = true, pattern = "^[0-9]+$")]
    pub received: Option<String>,
    /// The drop rule's name, `cancelled`, `pending`, `unknown_offer`, or the latest block's
    /// reason: `filled`, `partly_filled`, `rounded_below_limit` (it sold only the part whose
    /// rounded payout meets its limit), `out_of_the_money`, `at_the_money`, `volume_ran_out`.
    #[schema(required = true)]
    pub reason_code: Option<String>,
    /// How far the limit is above the rate, in basis points (two decimals, rounded down).
    #[schema(required = true, pattern = r"^[0-9]+\.[0-9]{2}$")]
    pub out_of_money_bp: Option<String>,
    /// In-the-money amount ahead of the offer in the canonical order, in the latest block.
    #[schema(required = true, pattern = "^[0-9]+$")]
    pub volume_ahead: Option<String>,
    pub summary: String,
}

// The names some string fields take, for the OpenAPI document only: the fields stay strings in
// Rust (the server writes them from its own enums' `name()`), and these list what they can be.

/// [`SubmitResponse::status`]: always `pending`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubmitState {
    Pending,
}

/// [`TransactionStatusJson::status`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransactionState {
    Pending,
    Accepted,
    Dropped,
}

/// [`GatewayStatusJson::block_source`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GatewayBlockSource {
    Timer,
    Gateway,
}

/// [`NodeJson::consensus`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Consensus {
    Solo,
    Cometbft,
}

/// [`NodeJson::block_source`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlockSource {
    Timer,
    Gateway,
    Cometbft,
}

/// [`OraclePriceJson::status`] (only `ok` prices are used by the node).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OraclePriceStatus {
    Ok,
    InsufficientVenues,
    Unavailable,
}

/// [`OfferExplanationJson::status`].
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OfferState {
    Traded,
    PartlyTraded,
    NotTraded,
    Dropped,
    Cancelled,
    Pending,
    Unknown,
}

/// Bytes in the canonical binary encoding (`walras_types::codec`): a transaction, a list of
/// transactions (u16 count, then each), a block, or the gateway link's frames.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct CanonicalBytes(#[allow(dead_code)] Vec<u8>);
