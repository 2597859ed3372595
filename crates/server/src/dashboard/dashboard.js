// The Walras node dashboard: plain JavaScript, no framework, no build step.
//
// Data: one server-sent-event stream (`/v1/events`: `block`, `oracle` events) and gentle
// polling: `/v1/node` and `/v1/status` every 2 s, the selected pair's two books every 2 s, and
// only what `/v1/node` says is configured (oracle, payments, gateway). That is about three
// requests a second, well inside the node's per-client rate limit, and one event stream per
// page. When the stream is refused (gateway mode, or too many streams), the page polls the
// newest block once a second instead.
"use strict";

const BLOCKS_KEPT = 120;        // blocks in the charts and statistics
const TPS_WINDOW_MS = 10000;    // committed tx/s over this much wall time
const POLL_MS = 2000;
const SLOW_POLL_MS = 5000;
const BOOK_LEVELS = 60;
const RENDER_MS = 500;          // at most two redraws a second, however fast blocks come
const STREAM_RETRY_MS = 30000;  // a refused event stream is tried again this often
const TAPE_ROWS = 40;           // rows of the trade tape
const TAPE_FETCH_MS = 1000;     // a streamed block's trades are fetched at most this often

const state = {
  blocks: [],          // block records, oldest first
  lastHeight: 0,
  status: null,        // /v1/status
  node: null,          // /v1/node
  oracle: null,        // { ok: OraclePricesJson } | { error: text }
  books: null,         // { sell, buy, asks: BookJson, bids: BookJson }
  payments: null,      // { escrow, deposits: [...], scannedTo, error }
  gateway: null,       // { ok: json } | { error: text } | { missing: true }
  streaming: false,
  assets: null,        // /v1/assets: symbol and decimals per asset
  tape: [],            // trade tape rows, newest first: { height, timeMs, sell, buy, sold, rate }
  tapeHeight: 0,       // newest block whose trades are on the tape
  tapePending: 0,      // newest streamed block with trades, not fetched yet
  dirty: true,
};

// ---------- small helpers ----------

function $(id) { return document.getElementById(id); }

/** An element with attributes and children (strings become text nodes: never HTML). */
function el(tag, attrs, ...children) {
  const node = tag.startsWith("svg:")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    // Through the CSSOM: the page's Content-Security-Policy refuses inline style attributes.
    if (key === "style") node.style.cssText = String(value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fmt(value, digits = 2) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  const abs = Math.abs(value);
  if (abs !== 0 && (abs >= 1e6 || abs < 1e-3)) return value.toExponential(digits);
  return value.toFixed(digits);
}

/** A price with about five significant digits. */
function fmtPrice(value) {
  if (!Number.isFinite(value)) return "–";
  if (value === 0) return "0";
  const digits = Math.max(0, 4 - Math.floor(Math.log10(Math.abs(value))));
  return digits > 10 ? value.toExponential(4) : value.toFixed(digits);
}

/** An asset's symbol (from the genesis), or its number when the genesis names none. */
function assetName(asset) {
  const named = state.assets && state.assets.assets[asset];
  return named ? named.symbol : `asset ${asset}`;
}

/** An amount of base units of `asset` in tokens (10^decimals base units), for reading. */
function tokens(asset, amount) {
  const named = state.assets && state.assets.assets[asset];
  return named && named.decimals ? amount / 10 ** named.decimals : amount;
}

/** How long ago a wall-clock time (ms) was: "now", "12 s", "3 min", "2 h". */
function ago(ms) {
  if (!Number.isFinite(ms)) return null;
  const seconds = Math.max(0, (Date.now() - ms) / 1000);
  if (seconds < 2) return "now";
  if (seconds < 120) return `${Math.round(seconds)} s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

function dl(target, rows) {
  target.replaceChildren(...rows.flatMap(([term, value, id]) => [
    el("dt", {}, term), el("dd", id ? { id } : {}, value),
  ]));
}

/** GET a JSON endpoint: { status, body } (body null when not JSON); never throws. */
async function getJson(path) {
  try {
    const response = await fetch(path, { headers: { accept: "application/json" }, cache: "no-store" });
    let body = null;
    try { body = await response.json(); } catch (_) { body = null; }
    return { status: response.status, body };
  } catch (error) {
    return { status: 0, body: null, error: String(error) };
  }
}

function errorText(result) {
  if (result.status === 0) return "the node did not answer (" + (result.error || "network error") + ")";
  const error = result.body && result.body.error;
  return error ? `${error.code}: ${error.message}` : `HTTP ${result.status}`;
}

// ---------- blocks ----------

/** A block record from a `block` event. */
function recordFromEvent(event) {
  return {
    height: event.height,
    transactions: event.transactions,
    accepted: event.accepted,
    dropped: event.dropped,
    droppedByReason: event.dropped_by_reason || {},
    converged: event.converged,
    clearing: event.clearing,
    trades: event.trades,
    prices: displayPrices(event.prices),
    executeMs: event.execute_ms,
    persistMs: event.persist_ms,
    phases: event.phases || null,
    committedMs: event.committed_unix_ms,
    band: event.oracle_band || null,
    seenAt: true,       // committedMs is the node's commit time
  };
}

/**
 * A block's prices as numbers for the charts: the API sends decimal strings (exact to 12
 * digits), `null` for assets the block did not price (kept as null).
 */
function displayPrices(prices) {
  return (prices || []).map((price) => (price === null ? null : Number(price)));
}

/** A block record from `GET /v1/blocks/{h}` (the fallback when no event stream is open). */
function recordFromBlock(block) {
  const byReason = {};
  for (const dropped of block.dropped) byReason[dropped.reason] = (byReason[dropped.reason] || 0) + 1;
  return {
    height: block.height,
    transactions: block.transactions,
    accepted: block.accepted,
    dropped: block.dropped.length,
    droppedByReason: byReason,
    converged: null,
    clearing: block.clearing || null,
    trades: block.trades.length,
    prices: displayPrices(block.prices),
    executeMs: null,
    persistMs: null,
    phases: null,
    committedMs: Date.now(),   // when this page saw it: the block JSON has no commit time
    band: null,
    seenAt: false,
  };
}

/** Trade tape rows of one block (`GET /v1/blocks/{h}`): per traded pair, the volume sold and
 * the clearing rate (units of `buy` per unit of `sell`, from the block's valuations). */
function tapeRows(block, timeMs) {
  const valuation = (asset) => Number(block.valuations[asset]);
  return block.trades.map((t) => ({
    height: block.height, timeMs, sell: t.sell, buy: t.buy, sold: t.sold,
    rate: valuation(t.sell) / valuation(t.buy),
  })).sort((a, b) => b.sold - a.sold);
}

function addTape(rows, height) {
  if (height <= state.tapeHeight) return;
  state.tapeHeight = height;
  state.tape = rows.concat(state.tape).slice(0, TAPE_ROWS);
  state.dirty = true;
}

/** The newest streamed block with trades, fetched at most once a second (blocks in between
 * are left off the tape, which says so). */
async function pollTape() {
  const height = state.tapePending;
  if (!height || height <= state.tapeHeight) return;
  const result = await getJson(`/v1/blocks/${height}`);
  if (result.status !== 200 || !result.body) return;
  const record = state.blocks.find((b) => b.height === height);
  addTape(tapeRows(result.body, record && record.seenAt ? record.committedMs : null), height);
}

function addBlock(record) {
  if (record.height <= state.lastHeight) return;
  state.lastHeight = record.height;
  state.blocks.push(record);
  if (state.blocks.length > BLOCKS_KEPT) state.blocks.splice(0, state.blocks.length - BLOCKS_KEPT);
  state.dirty = true;
}

/**
 * The blocks committed before the page opened: the last BLOCKS_KEPT of them, fetched once,
 * 8 at a time, then merged with whatever the stream delivered meanwhile. Without them a page
 * opened on an idle node (after `walras demo`'s load, say) would wait for a block that never
 * comes.
 */
async function loadHistory(height) {
  const first = Math.max(1, height - BLOCKS_KEPT + 1);
  const heights = [];
  for (let h = first; h <= height; h++) heights.push(h);
  const records = [];
  const tape = [];
  for (let i = 0; i < heights.length; i += 8) {
    const answers = await Promise.all(heights.slice(i, i + 8).map((h) => getJson(`/v1/blocks/${h}`)));
    for (const answer of answers) {
      if (answer.status === 200 && answer.body) {
        records.push(recordFromBlock(answer.body));
        tape.unshift(...tapeRows(answer.body, null));
      }
    }
  }
  mergeBlocks(records);
  // History comes in height order; rows of newer streamed blocks stay in front.
  const older = tape.filter((row) => row.height < (state.tape.length ? state.tape[state.tape.length - 1].height : Infinity));
  state.tape = state.tape.concat(older).slice(0, TAPE_ROWS);
  if (!state.tapeHeight && tape.length) state.tapeHeight = tape[0].height;
}

/** Adds older block records, keeping heights unique and in order, the newest BLOCKS_KEPT. */
function mergeBlocks(records) {
  const byHeight = new Map();
  for (const record of records) byHeight.set(record.height, record);
  for (const record of state.blocks) byHeight.set(record.height, record);   // streamed win
  state.blocks = Array.from(byHeight.values()).sort((a, b) => a.height - b.height).slice(-BLOCKS_KEPT);
  if (state.blocks.length) state.lastHeight = Math.max(state.lastHeight, state.blocks[state.blocks.length - 1].height);
  state.dirty = true;
}

// ---------- the event stream ----------

let stream = null;

function openStream() {
  if (stream) stream.close();
  stream = new EventSource("/v1/events");
  stream.addEventListener("open", () => { state.streaming = true; setConn("live", "live"); });
  stream.addEventListener("block", (message) => {
    try {
      const event = JSON.parse(message.data);
      addBlock(recordFromEvent(event));
      if (event.trades > 0) state.tapePending = Math.max(state.tapePending, event.height);
    } catch (_) { /* a bad event is skipped */ }
  });
  stream.addEventListener("oracle", (message) => {
    try { state.oracle = { ok: JSON.parse(message.data) }; state.dirty = true; } catch (_) { /* skipped */ }
  });
  stream.addEventListener("lagged", () => setConn("live (skipped some blocks)", "live"));
  stream.addEventListener("error", () => {
    state.streaming = false;
    if (stream.readyState === EventSource.CLOSED) {
      // Refused (403 in gateway mode, 429/503 past the stream limits): poll instead.
      setConn("polling (event stream refused)", "down");
      stream = null;
      setTimeout(openStream, STREAM_RETRY_MS);
    } else {
      setConn("reconnecting…", "down");
    }
  });
}

function setConn(text, kind) {
  const pill = $("conn");
  pill.textContent = text;
  pill.className = "pill " + kind;
}

/** Without a stream: the newest block, at most once a second. */
async function pollNewestBlock() {
  if (state.streaming || !state.status || state.status.height <= state.lastHeight) return;
  const result = await getJson(`/v1/blocks/${state.status.height}`);
  if (result.status === 200 && result.body) {
    addBlock(recordFromBlock(result.body));
    addTape(tapeRows(result.body, null), result.body.height);
  }
}

// ---------- polling ----------

async function pollNode() {
  const [status, node] = await Promise.all([getJson("/v1/status"), getJson("/v1/node")]);
  if (status.status === 200) {
    const first = !state.status;
    state.status = status.body;
    if (first) {
      const names = await getJson("/v1/assets");
      if (names.status === 200 && names.body) state.assets = names.body;
      setUpPairs(state.status.assets);
      loadHistory(state.status.height);
    }
  } else if (!state.streaming) {
    setConn("node unreachable: " + errorText(status), "down");
  }
  state.node = node.status === 200 ? node.body : null;
  state.dirty = true;
}

function setUpPairs(assets) {
  const sell = $("pair-sell");
  const buy = $("pair-buy");
  const options = () => Array.from({ length: assets }, (_, i) => el("option", { value: i }, assetName(i)));
  sell.replaceChildren(...options());
  buy.replaceChildren(...options());
  sell.value = "0";
  buy.value = assets > 1 ? "1" : "0";
  const changed = () => { state.books = null; state.dirty = true; pollBooks(); };
  sell.addEventListener("change", changed);
  buy.addEventListener("change", changed);
}

async function pollBooks() {
  if (!state.status || state.status.assets < 2) return;
  const sell = Number($("pair-sell").value);
  const buy = Number($("pair-buy").value);
  if (sell === buy) {
    state.books = { sell, buy, error: "choose two different assets" };
    state.dirty = true;
    return;
  }
  const [asks, bids] = await Promise.all([
    getJson(`/v1/books/${sell}/${buy}?levels=${BOOK_LEVELS}`),
    getJson(`/v1/books/${buy}/${sell}?levels=${BOOK_LEVELS}`),
  ]);
  // The selection may have changed while waiting: keep only an answer for the current pair.
  if (Number($("pair-sell").value) !== sell || Number($("pair-buy").value) !== buy) return;
  if (asks.status !== 200 || bids.status !== 200) {
    state.books = { sell, buy, error: errorText(asks.status !== 200 ? asks : bids) };
  } else {
    state.books = { sell, buy, asks: asks.body, bids: bids.body };
  }
  state.dirty = true;
}

async function pollOracle() {
  // With an event stream the oracle's publications arrive as `oracle` events (at most one a
  // second); polling is only the fallback without one.
  if (!state.node || !state.node.oracle || state.streaming) return;
  const result = await getJson("/v1/oracle/prices");
  state.oracle = result.status === 200 ? { ok: result.body } : { error: errorText(result) };
  state.dirty = true;
}

async function pollPayments() {
  if (!state.node || !state.node.payments) return;
  const previous = state.payments || { deposits: [], scannedTo: null, count: 0 };
  const escrow = await getJson("/v1/payments/escrow");
  // Deposits: from 256 blocks back on the first ask, then only the new blocks.
  const after = previous.scannedTo !== null ? previous.scannedTo : Math.max(0, (state.status ? state.status.height : 0) - 256);
  const deposits = await getJson(`/v1/payments/deposits?after_height=${after}`);
  const next = { ...previous };
  next.escrow = escrow.status === 200 ? escrow.body : null;
  next.error = escrow.status === 200 ? null : errorText(escrow);
  if (deposits.status === 200) {
    next.scannedTo = deposits.body.scanned_to;
    next.count = previous.count + deposits.body.deposits.length;
    next.deposits = previous.deposits.concat(deposits.body.deposits).slice(-8);
  }
  state.payments = next;
  state.dirty = true;
}

async function pollGateway() {
  if (!state.node || state.node.block_source !== "gateway") return;
  const result = await getJson("/v1/gateway");
  if (result.status === 200) state.gateway = { ok: result.body };
  else if (result.status === 404 && result.body && result.body.error && result.body.error.code === "no_such_endpoint") state.gateway = { missing: true };
  else state.gateway = { error: errorText(result) };
  state.dirty = true;
}

// ---------- rendering ----------

function render() {
  if (!state.dirty) return;
  state.dirty = false;
  const latest = state.blocks[state.blocks.length - 1];
  const height = Math.max(state.lastHeight, state.status ? state.status.height : 0);
  $("height").textContent = state.status || latest ? String(height) : "–";
  $("header-tps").textContent = fmt(committedTps(), 1);
  if (state.node) {
    $("node-mode").textContent = `${state.node.consensus}, blocks from ${state.node.block_source}, v${state.node.version}`;
  }
  renderValuations();
  renderTape();
  renderDepth(latest);
  renderBlocks(latest);
  renderHealth(latest);
  renderOracle();
  renderPayments();
  renderGateway();
}

function committedTps() {
  if (state.blocks.length < 2) return null;
  const newest = state.blocks[state.blocks.length - 1].committedMs;
  const inWindow = state.blocks.filter((b) => b.committedMs > newest - TPS_WINDOW_MS);
  if (inWindow.length < 2) return null;
  const span = newest - inWindow[0].committedMs;
  if (span <= 0) return null;
  // The first block's transactions were collected before the window began: leave them out.
  const accepted = inWindow.slice(1).reduce((sum, b) => sum + b.accepted, 0);
  return accepted / (span / 1000);
}

/** The latest oracle deviation of each asset, from the newest block that carried a band check. */
function latestBand() {
  for (let i = state.blocks.length - 1; i >= 0; i--) if (state.blocks[i].band) return state.blocks[i].band;
  return null;
}

function renderValuations() {
  // Blocks that priced something: a block of payments only carries no prices.
  const blocks = state.blocks.filter((b) => b.prices.some(Number.isFinite));
  $("window-blocks").textContent = String(blocks.length);
  if (!blocks.length) return;
  const assets = blocks[blocks.length - 1].prices.length;
  const band = latestBand();
  const oracle = state.oracle && state.oracle.ok;
  $("oracle-note").textContent = band
    ? ` Oracle deviation in bp against ${assetName(band.reference_asset)} (band ${band.band_bps} bp).`
    : "";
  $("quote-asset").textContent = assetName(0);
  const container = $("valuations");
  const cards = [];
  for (let asset = 0; asset < assets; asset++) {
    const priced = blocks.filter((b) => Number.isFinite(b.prices[asset]));
    const series = priced.map((b) => b.prices[asset]);
    const current = series[series.length - 1];
    const deviation = band && band.assets.find((a) => a.asset === asset);
    const reference = oracle && oracle.prices.find((p) => p.asset === asset);
    let oracleText = "";
    if (reference && reference.price !== null) oracleText += `oracle ${fmtPrice(reference.price)} ${oracle.numeraire}`;
    if (deviation) oracleText += `${oracleText ? ", " : ""}${deviation.deviation_bps >= 0 ? "+" : ""}${fmt(deviation.deviation_bps, 1)} bp`;
    cards.push(el("div", { class: "multiple valuation", "data-asset": asset },
      el("div", { class: "label" }, el("span", { class: "asset" }, assetName(asset)), el("span", { class: "value" }, fmtPrice(current))),
      el("div", { class: "chart" }, sparkline(series), yAxis(series)),
      xAxis(priced),
      el("div", { class: "oracle" + (deviation && deviation.beyond_band ? " beyond" : "") }, oracleText)));
  }
  container.replaceChildren(...cards);
}

/** The value axis of a small multiple: its highest and lowest price. */
function yAxis(series) {
  if (!series.length) return el("div", { class: "yaxis" });
  return el("div", { class: "yaxis" },
    el("span", {}, fmtPrice(Math.max(...series))), el("span", {}, fmtPrice(Math.min(...series))));
}

/** The block axis of a small multiple: first and last block, and when they were committed
 * where the page knows it (blocks from its event stream; history carries no commit time). */
function xAxis(blocks) {
  if (!blocks.length) return el("div", { class: "xaxis" });
  const label = (b) => {
    const when = b.seenAt ? ago(b.committedMs) : null;
    return `#${b.height}${when ? ` · ${when}` : ""}`;
  };
  const first = blocks[0], last = blocks[blocks.length - 1];
  return el("div", { class: "xaxis" }, el("span", {}, label(first)), el("span", {}, label(last)));
}

function renderTape() {
  const body = $("tape").tBodies[0];
  if (!state.tape.length) {
    $("tape-note").textContent = "no trade yet in the blocks this page has seen";
    body.replaceChildren();
    return;
  }
  $("tape-note").textContent = `Per block and pair: the volume sold and the clearing rate (before the commission). Newest first, ${state.tape.length} rows.`;
  body.replaceChildren(...state.tape.map((row) => el("tr", { "data-height": row.height },
    el("td", {}, row.height),
    el("td", {}, row.timeMs ? ago(row.timeMs) : "–"),
    el("td", {}, `${assetName(row.sell)} → ${assetName(row.buy)}`),
    el("td", {}, fmtPrice(tokens(row.sell, row.sold))),
    el("td", {}, fmtPrice(row.rate)))));
}

function sparkline(series) {
  const width = 100, height = 30;
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });
  if (series.length < 2) return svg;
  let low = Math.min(...series), high = Math.max(...series);
  if (high - low < Math.abs(high) * 1e-9 || high === low) { low -= Math.abs(low) * 0.01 || 1; high += Math.abs(high) * 0.01 || 1; }
  const points = series.map((v, i) => {
    const x = (i / (series.length - 1)) * width;
    const y = height - 2 - ((v - low) / (high - low)) * (height - 4);
    return `${x.toFixed(2)},${y.toFixed(2)}`;
  });
  svg.append(el("svg:polyline", { class: "spark", points: points.join(" ") }));
  return svg;
}

function renderDepth(latest) {
  const target = $("depth");
  const note = $("depth-note");
  const books = state.books;
  if (!books) return;
  if (books.error) { target.replaceChildren(el("p", { class: "error" }, books.error)); note.textContent = ""; return; }
  const { sell, buy } = books;
  // Everything in units of `buy` per unit of `sell` (x) and amounts of `sell` (y).
  // Sellers of `sell` trade at a rate x >= their limit; sellers of `buy` (limit q in `sell`
  // per `buy`) buy `sell` at any x <= 1/q, their `buy` amount worth amount*q of `sell`.
  const asks = books.asks.levels.map((l) => ({ x: parseFloat(l.min_price), amount: l.amount }))
    .filter((l) => l.x > 0).sort((a, b) => a.x - b.x);
  const bids = books.bids.levels.map((l) => { const q = parseFloat(l.min_price); return { x: 1 / q, amount: l.amount * q }; })
    .filter((l) => Number.isFinite(l.x) && l.x > 0).sort((a, b) => b.x - a.x);
  const rate = latest && latest.prices[sell] > 0 && latest.prices[buy] > 0 ? latest.prices[sell] / latest.prices[buy] : null;
  const levels = asks.length + bids.length;
  const [sellName, buyName] = [assetName(sell), assetName(buy)];
  note.textContent = `${books.asks.offers} offers sell ${sellName} for ${buyName}, ${books.bids.offers} sell ${buyName} for ${sellName}` +
    ` (nearest ${BOOK_LEVELS} limit prices each). x: base units of ${buyName} per base unit of ${sellName}, log scale; y: cumulative amount of ${sellName} (base units).` +
    (rate ? ` Dashed: the last clearing rate ${fmtPrice(rate)}.` : "");
  const width = 400, height = 200, left = 6, right = 6, top = 14, bottom = 18;
  const svg = el("svg:svg", { class: "depth-chart", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none",
    "data-levels": levels, "data-sell": sell, "data-buy": buy, role: "img", "aria-label": `depth of ${sellName} against ${buyName}` });
  if (!levels) {
    target.replaceChildren(svg, el("p", { class: "muted" }, "no resting offers in either direction"));
    return;
  }
  const xs = asks.map((l) => l.x).concat(bids.map((l) => l.x));
  if (rate) xs.push(rate);
  let lo = Math.min(...xs), hi = Math.max(...xs);
  if (rate) { lo = Math.max(lo, rate / 10); hi = Math.min(hi, rate * 10); }
  if (hi <= lo) { lo /= 1.01; hi *= 1.01; }
  const logLo = Math.log(lo), logHi = Math.log(hi);
  const sx = (x) => left + ((Math.log(Math.min(Math.max(x, lo), hi)) - logLo) / (logHi - logLo)) * (width - left - right);
  const askTotal = asks.reduce((s, l) => s + l.amount, 0);
  const bidTotal = bids.reduce((s, l) => s + l.amount, 0);
  const yMax = Math.max(askTotal, bidTotal, 1);
  const sy = (y) => height - bottom - (y / yMax) * (height - top - bottom);
  const base = sy(0);
  // Asks: cumulative amount rises to the right.
  let cum = 0, d = `M${sx(asks.length ? asks[0].x : hi)},${base}`;
  for (const l of asks) { d += ` L${sx(l.x)},${sy(cum)}`; cum += l.amount; d += ` L${sx(l.x)},${sy(cum)}`; }
  if (asks.length) d += ` L${sx(hi)},${sy(cum)} L${sx(hi)},${base} Z`;
  const askPath = el("svg:path", { class: "depth-ask", d });
  // Bids: cumulative amount rises to the left.
  cum = 0; d = `M${sx(bids.length ? bids[0].x : lo)},${base}`;
  for (const l of bids) { d += ` L${sx(l.x)},${sy(cum)}`; cum += l.amount; d += ` L${sx(l.x)},${sy(cum)}`; }
  if (bids.length) d += ` L${sx(lo)},${sy(cum)} L${sx(lo)},${base} Z`;
  const bidPath = el("svg:path", { class: "depth-bid", d });
  svg.append(bidPath, askPath);
  // Axes: the baseline, the rate at both ends and the middle (log scale), half the maximum.
  svg.append(el("svg:line", { class: "axis-line", x1: left, x2: width - right, y1: base, y2: base }));
  svg.append(el("svg:text", { class: "axis", x: left, y: height - 4 }, fmtPrice(lo)));
  svg.append(el("svg:text", { class: "axis", x: width / 2, y: height - 4, "text-anchor": "middle" }, fmtPrice(Math.sqrt(lo * hi))));
  svg.append(el("svg:text", { class: "axis", x: width - right, y: height - 4, "text-anchor": "end" }, fmtPrice(hi)));
  svg.append(el("svg:text", { class: "axis", x: left, y: sy(yMax / 2) }, fmt(yMax / 2, 0)));
  // The rate's label sits beside its line, on the side with more room; the maximum's label
  // goes to the other corner, so the two never overlap.
  const rateShown = rate && rate >= lo && rate <= hi;
  const rateLeft = rateShown && sx(rate) < width / 2;
  svg.append(rateLeft
    ? el("svg:text", { class: "axis", x: width - right, y: 10, "text-anchor": "end" }, `max ${fmt(yMax, 0)}`)
    : el("svg:text", { class: "axis", x: left, y: 10 }, `max ${fmt(yMax, 0)}`));
  if (rateShown) {
    const x = sx(rate);
    svg.append(el("svg:line", { class: "depth-rate", x1: x, x2: x, y1: top - 4, y2: base, "data-rate": rate }));
    svg.append(el("svg:text", { class: "axis", x: rateLeft ? x + 3 : x - 3, y: 10, "text-anchor": rateLeft ? "start" : "end" }, `clearing ${fmtPrice(rate)}`));
  }
  const legend = el("div", { class: "legend" },
    el("span", { style: "color: var(--bid)" }, `■ buying ${sellName} (selling ${buyName}) `),
    el("span", { style: "color: var(--ask)" }, `■ selling ${sellName}`));
  target.replaceChildren(svg, legend);
}

function mean(values) {
  const finite = values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));
  return finite.length ? finite.reduce((s, v) => s + v, 0) / finite.length : null;
}

function renderBlocks(latest) {
  const blocks = state.blocks;
  if (!latest) {
    dl($("block-stats"), [["height", state.status ? String(state.status.height) : "–", "blocks-height"], ["blocks", "waiting for the next block…"]]);
    return;
  }
  const reasons = {};
  for (const b of blocks) for (const [reason, count] of Object.entries(b.droppedByReason)) reasons[reason] = (reasons[reason] || 0) + count;
  const reasonText = Object.keys(reasons).sort().map((r) => `${r} ${reasons[r]}`).join(", ") || "none";
  const withQuality = blocks.filter((b) => b.converged !== null);
  const converged = withQuality.filter((b) => b.converged).length;
  const cleared = blocks.filter((b) => b.clearing);
  const ratios = cleared.map((b) => b.clearing.unrealized_utility_ratio).filter((r) => r !== null);
  const infinite = cleared.length - ratios.length;
  const accepted = blocks.reduce((s, b) => s + b.accepted, 0);
  const dropped = blocks.reduce((s, b) => s + b.dropped, 0);
  dl($("block-stats"), [
    ["height", String(latest.height), "blocks-height"],
    ["last block", `${latest.transactions} txs: ${latest.accepted} accepted, ${latest.dropped} dropped, ${latest.trades} pairs traded`],
    [`last ${blocks.length} blocks`, `${accepted} accepted, ${dropped} dropped`],
    ["dropped by reason", reasonText],
    ["committed tx/s", `${fmt(committedTps(), 1)} (accepted, last ${TPS_WINDOW_MS / 1000} s)`],
    ["converged", withQuality.length ? `${converged} of ${withQuality.length} blocks` : "–"],
    ["iterations", cleared.length ? `${fmt(mean(cleared.map((b) => b.clearing.iterations)), 0)} mean, ${latest.clearing ? latest.clearing.iterations : "–"} last` : "not computed here (a follower checks the proposer's clearing)"],
    ["unrealized / realized", cleared.length ? `${fmt(100 * (mean(ratios) || 0), 4)}% mean${infinite ? `; ${infinite} blocks traded nothing though they could` : ""}` : "–"],
    ["clearing ms", fmt(mean(cleared.map((b) => b.clearing.millis)), 1) + " mean"],
    ["submit→commit latency", "measured by clients, not the node: `walras loadgen` and `walras demo` print p50/p99/p99.9"],
  ]);
  const phaseNames = ["signatures", "filter", "plan", "clearing", "apply", "commit"];
  const withPhases = blocks.filter((b) => b.phases);
  const phases = phaseNames.map((name) => [name, mean(withPhases.map((b) => b.phases[name]))]);
  phases.push(["store commit", mean(blocks.map((b) => b.persistMs))]);
  const top = Math.max(...phases.map(([, v]) => v || 0), 1e-9);
  $("phases").replaceChildren(...phases.map(([name, value]) => el("div", { class: "bar" },
    el("span", {}, name), el("div", { class: "fill", style: `width: ${(100 * (value || 0) / top).toFixed(1)}%` }), el("span", {}, fmt(value, 2)))));
  const rows = blocks.slice(-10).reverse().map((b) => el("tr", {},
    el("td", {}, b.height), el("td", {}, b.transactions), el("td", {}, b.accepted), el("td", {}, b.dropped),
    el("td", {}, b.trades), el("td", {}, b.converged === null ? "–" : b.converged ? "yes" : "no"),
    el("td", {}, b.clearing ? fmt(b.clearing.millis, 1) : "–"), el("td", {}, fmt(b.persistMs, 1))));
  $("block-table").tBodies[0].replaceChildren(...rows);
}

function renderHealth(latest) {
  const node = state.node;
  const status = state.status;
  const rows = [];
  if (status) {
    rows.push(["mempool", `${status.mempool_transactions} of ${status.mempool_capacity} transactions`]);
    rows.push(["state", `${status.accounts} accounts, ${status.open_offers} open offers`]);
  }
  rows.push(["store commit", `${fmt(latest ? latest.persistMs : null, 2)} ms last, ${fmt(node ? node.persist_ms_mean : null, 2)} ms mean since start`]);
  if (node) {
    rows.push(["event streams", `${node.event_streams} open of ${node.event_streams_max}`]);
    rows.push(["consensus", node.consensus]);
    if (node.cometbft) {
      const c = node.cometbft;
      rows.push(["CometBFT height", c.height === null ? "–" : `${c.height}${c.catching_up ? " (catching up)" : ""}`]);
      rows.push(["CometBFT peers", c.peers === null ? "–" : String(c.peers)]);
      if (c.error) rows.push(["CometBFT RPC", c.error]);
    } else {
      rows.push(["CometBFT", "not configured (solo node)"]);
    }
  } else {
    rows.push(["node", "GET /v1/node did not answer"]);
  }
  dl($("health"), rows);
}

function renderOracle() {
  const target = $("oracle");
  if (!state.node) return;
  if (!state.node.oracle) { target.className = "muted"; target.textContent = "not configured (start the node with --oracle-feed FILE or --oracle-venue)"; return; }
  if (!state.oracle) { target.className = "muted"; target.textContent = "waiting for the oracle's first publication…"; return; }
  if (state.oracle.error) { target.className = "error"; target.textContent = state.oracle.error; return; }
  const o = state.oracle.ok;
  target.className = "";
  const age = Date.now() - o.published_unix_ms;
  const prices = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "asset"), el("th", {}, `price (${o.numeraire})`), el("th", {}, "status"), el("th", {}, "venues"), el("th", {}, "dispersion bp"))),
    el("tbody", {}, o.prices.map((p) => el("tr", {}, el("td", {}, `${p.asset} ${p.symbol}`), el("td", {}, p.price === null ? "–" : fmtPrice(p.price)),
      el("td", {}, p.status), el("td", {}, p.venues_used.length), el("td", {}, fmt(p.dispersion_bps, 1))))));
  const venues = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "venue"), el("th", {}, "synced"), el("th", {}, "resyncing"), el("th", {}, "crossed"), el("th", {}, "stale"), el("th", {}, "thin"))),
    el("tbody", {}, o.venues.map((v) => el("tr", {}, el("td", {}, v.venue), el("td", {}, v.synced), el("td", {}, v.resyncing), el("td", {}, v.crossed), el("td", {}, v.stale), el("td", {}, v.thin)))));
  target.replaceChildren(el("p", { class: "note" }, `${o.source}; published ${fmt(age / 1000, 1)} s ago`),
    el("div", { class: "scroll" }, prices), el("h3", {}, "Book health per venue"), el("div", { class: "scroll" }, venues));
}

function renderPayments() {
  const target = $("payments");
  if (!state.node) return;
  if (!state.node.payments) { target.className = "muted"; target.textContent = "not configured (this exchange's genesis names no payments committee)"; return; }
  const p = state.payments;
  if (!p) { target.textContent = "…"; return; }
  target.className = "";
  const rows = [];
  if (p.error) rows.push(["escrow", p.error]);
  if (p.escrow) {
    rows.push(["committee", `chain ${p.escrow.chain_id}, epoch ${p.escrow.epoch}`]);
    rows.push(["in escrow", p.escrow.escrow.map((amount, asset) => amount ? `${assetName(asset)}: ${amount}` : null).filter(Boolean).join(", ") || "nothing"]);
    rows.push(["withdrawn outputs", String(p.escrow.withdrawn)]);
  }
  rows.push(["deposits seen", `${p.count} (blocks up to ${p.scannedTo === null ? "–" : p.scannedTo})`]);
  const list = el("dl", { class: "stats" });
  dl(list, rows);
  const recent = p.deposits.slice().reverse().map((d) => el("tr", {}, el("td", {}, d.height), el("td", {}, assetName(d.asset)), el("td", {}, d.amount), el("td", {}, d.output_id.slice(0, 12) + "…")));
  target.replaceChildren(list, recent.length ? el("div", { class: "scroll" }, el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "height"), el("th", {}, "asset"), el("th", {}, "amount"), el("th", {}, "output"))), el("tbody", {}, recent))) : "");
}

function renderGateway() {
  const target = $("gateway");
  if (!state.node) return;
  if (state.node.block_source !== "gateway") { target.className = "muted"; target.textContent = `not configured (blocks come from ${state.node.block_source === "cometbft" ? "CometBFT" : "the node's timer"})`; return; }
  const g = state.gateway;
  if (!g) { target.textContent = "…"; return; }
  if (g.missing) { target.className = "muted"; target.textContent = "not available: this node does not serve GET /v1/gateway"; return; }
  if (g.error) { target.className = "error"; target.textContent = g.error; return; }
  const j = g.ok;
  target.className = "";
  const list = el("dl", { class: "stats" });
  const value = (v) => v === null || v === undefined ? "–" : String(v);
  dl(list, [
    ["block source", value(j.block_source)],
    ["participants", `${value(j.participants_connected)} connected of ${value(j.participants_configured)}`],
    ["stragglers", Array.isArray(j.stragglers) ? (j.stragglers.join(", ") || "none") : value(j.stragglers)],
    ["late trades", value(j.late_trades_total)],
    ["queue full", value(j.queue_full_total)],
    ["last seal delay", j.last_seal_delay_us === null || j.last_seal_delay_us === undefined ? "–" : `${fmt(j.last_seal_delay_us / 1000, 2)} ms`],
    ["sealed height", value(j.sealed_height)],
  ]);
  target.replaceChildren(list);
}

// ---------- explain ----------

const EXPLAIN_FIELDS = [
  ["status", "status"], ["height", "block"], ["account", "account"], ["sell_asset", "sells asset"],
  ["buy_asset", "buys asset"], ["limit_price", "limit price"], ["clearing_rate", "clearing rate"],
  ["amount", "amount"], ["sold", "sold"], ["received", "received"], ["reason_code", "reason"],
  ["out_of_money_bp", "out of the money (bp)"], ["volume_ahead", "volume ahead in canonical order"],
];

async function explain(event) {
  event.preventDefault();
  const target = $("explain-result");
  const id = $("explain-id").value.trim();
  const account = $("explain-account").value.trim();
  if (!/^[0-9]+$/.test(id)) { target.replaceChildren(el("p", { class: "error" }, "an offer id is an unsigned integer")); return; }
  if (!/^[0-9]*$/.test(account)) { target.replaceChildren(el("p", { class: "error" }, "an account is an unsigned integer")); return; }
  target.replaceChildren(el("p", { class: "muted" }, `asking about offer ${id}…`));
  // Offer ids are per account (the creating transaction's sequence number): without the
  // account, an id several accounts used answers 409 with the accounts to choose from.
  const query = account === "" ? "" : `?account=${account}`;
  const result = await getJson(`/v1/offers/${id}/explain${query}`);
  if (result.status === 200 && result.body) {
    const body = result.body;
    const list = el("dl", { class: "stats" });
    dl(list, EXPLAIN_FIELDS.filter(([key]) => body[key] !== null && body[key] !== undefined).map(([key, label]) => [label, String(body[key])]));
    target.replaceChildren(el("p", { class: `summary status-${body.status}` }, body.summary), list);
  } else if (result.status === 404 && result.body && result.body.error && result.body.error.code === "no_such_endpoint") {
    target.replaceChildren(el("p", { class: "muted" }, "explain not available: this node does not serve GET /v1/offers/{id}/explain"));
  } else {
    target.replaceChildren(el("p", { class: "error" }, errorText(result)));
  }
}

// ---------- start ----------

function every(ms, task) {
  let running = false;
  const tick = async () => {
    if (running) return;   // never two of the same request in flight
    running = true;
    try { await task(); } finally { running = false; }
  };
  tick();
  setInterval(tick, ms);
}

function start() {
  $("explain-form").addEventListener("submit", explain);
  openStream();
  every(POLL_MS, pollNode);
  every(POLL_MS, pollBooks);
  every(1000, pollNewestBlock);
  every(TAPE_FETCH_MS, pollTape);
  every(POLL_MS, pollOracle);
  every(SLOW_POLL_MS, pollPayments);
  every(POLL_MS, pollGateway);
  setInterval(render, RENDER_MS);
}

document.addEventListener("DOMContentLoaded", start);
