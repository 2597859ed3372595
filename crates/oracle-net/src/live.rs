//! The driver: connectors feed one [`LiveOracle`]; at each publication the books still waiting
//! for a snapshot are sent back to their connector (REST refetch or resubscribe), at most once
//! per `resync_after` per book.

use crate::connector::{self, Clock, Connector, ConnectorConfig, Endpoint, EndpointError};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use walras_oracle::{InstrumentKey, OracleConfig};
use walras_oracle::{LiveOracle, Publication};

#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub endpoints: Vec<Endpoint>,
    pub connector: ConnectorConfig,
    pub oracle: OracleConfig,
    pub publish_every: Duration,
    /// A book still resyncing this long after its last request gets another one.
    pub resync_after: Duration,
}

/// What a live run did, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveSummary {
    pub records: u64,
    pub parse_errors: u64,
    pub publications: u64,
    pub unhealthy_used: u64,
    pub resync_requests: u64,
    /// Per venue: connections made, disconnects, REST snapshots fetched.
    pub venues: BTreeMap<String, (u64, u64, u64)>,
}

/// Runs connectors for every endpoint and publishes every `publish_every` until `stop` turns
/// true; `on_publish` gets each publication. Endpoints are checked before anything starts.
pub async fn run_live(
    options: LiveOptions,
    mut on_publish: impl FnMut(&Publication, &LiveOracle),
    mut stop: watch::Receiver<bool>,
) -> Result<LiveSummary, EndpointError> {
    let mut protocols = Vec::new();
    for endpoint in &options.endpoints {
        protocols.push(endpoint.check_with(options.connector.tls.as_ref())?);
    }
    let http = connector::http_client(&options.connector)?;
    let clock = Clock::start();
    let (records_tx, mut records_rx) = mpsc::channel(65_536);
    let connectors: Vec<Connector> = options
        .endpoints
        .iter()
        .zip(protocols)
        .map(|(endpoint, protocol)| {
            connector::spawn(
                endpoint.clone(),
                protocol,
                options.connector.clone(),
                http.clone(),
                clock,
                records_tx.clone(),
                stop.clone(),
            )
        })
        .collect();
    drop(records_tx);
    let mut oracle = LiveOracle::new(options.oracle.clone());
    let mut summary = LiveSummary::default();
    let mut requested: BTreeMap<InstrumentKey, u64> = BTreeMap::new();
    let mut publish = tokio::time::interval(options.publish_every);
    let resync_after_ns = u64::try_from(options.resync_after.as_nanos()).unwrap_or(u64::MAX);
    loop {
        tokio::select! {
            record = records_rx.recv() => {
                let Some(record) = record else { break };
                // Refused records are counted by the oracle (parse_errors).
                let _ = oracle.ingest(&record);
            }
            _ = publish.tick() => {
                let now_ns = clock.now_ns();
                let publication = oracle.publish(now_ns);
                summary.publications += 1;
                summary.unhealthy_used += publication.unhealthy_used;
                let resyncing = oracle.resyncing(now_ns);
                requested.retain(|key, _| resyncing.contains(key));
                for key in resyncing {
                    // First sight of a resyncing book: give the venue's own recovery (a
                    // snapshot already on its way) one period before asking.
                    let Some(&at) = requested.get(&key) else {
                        requested.insert(key, now_ns);
                        continue;
                    };
                    if now_ns.saturating_sub(at) < resync_after_ns {
                        continue;
                    }
                    if let Some(c) = connectors.iter().find(|c| c.venue == key.venue) {
                        if c.resync.try_send(key.symbol.clone()).is_ok() {
                            summary.resync_requests += 1;
                        }
                    }
                    requested.insert(key, now_ns);
                }
                on_publish(&publication, &oracle);
            }
            _ = stop.changed() => break,
        }
    }
    for c in &connectors {
        use connector::ConnectorStats as S;
        summary.venues.insert(
            c.venue.clone(),
            (
                S::get(&c.stats.connects),
                S::get(&c.stats.disconnects),
                S::get(&c.stats.snapshots),
            ),
        );
    }
    for c in connectors {
        c.task.abort();
    }
    summary.records = oracle.records;
    summary.parse_errors = oracle.parse_errors;
    Ok(summary)
}
