//! An open loop of pre-signed payments at a fixed rate through a [`CommitteeClient`]: the core
//! of `walras payments bench`, here so that the overload tests drive the very loop the bench
//! measures with.
//!
//! Each slot of the schedule offers one [`Offer`] (a payment, and with it any double spends
//! sent at the same instant) without waiting for earlier ones. An offer the client would hold
//! back (fewer than a quorum of validators can take it: [`CommitteeClient::held_back`]) is
//! counted and dropped without spending a task on it, so at 20x capacity the load generator does
//! not starve the committee of cores. A request refused for overload (held back in
//! [`certify`](crate::certify) or refused by validators) changed nothing, so it goes back to the pool and a
//! later slot resends it unchanged, as a wallet would: the pool is spent only on certified or
//! failed payments, and a bounded one lasts any overload. The loop ends on time whatever the
//! rate: it stops offering
//! at the end of the load (plus [`LATE_GRACE`] when it fell behind) and waits at most `drain`
//! for the last answers, so an overloaded run ends with its report (issue 31: 400,000/s over
//! 5 s did not end within 60 s when the bench pre-signed all 2,000,000 payments first).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use walras_payments::{Certificate, PaymentRequest, RootCache};

use crate::client::{broadcast_payment, certify_replies, CertifyError, CommitteeClient};

/// How long past the end of the load the loop may still offer payments it was late with; the
/// slots left after it are counted `generator_behind`, not offered.
pub const LATE_GRACE: Duration = Duration::from_secs(1);
/// How often the loop samples the client's windows for their mean.
const WINDOW_SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// One slot's payments: the first is the offered payment; any others (a Byzantine client's double
/// spends of its coin) go out at the same instant, or are held back with it.
pub type Offer = Vec<PaymentRequest>;

/// The schedule.
#[derive(Clone, Copy, Debug)]
pub struct OpenLoop {
    /// Offers per second (each slot one offer).
    pub rate_per_s: u64,
    /// How long offers are made.
    pub duration: Duration,
    /// How long the last answers are waited for after the last offer.
    pub drain: Duration,
}

impl OpenLoop {
    /// The slots of the schedule: `rate × duration`.
    pub fn slots(&self) -> u64 {
        let slots = u128::from(self.rate_per_s) * self.duration.as_micros() / 1_000_000;
        u64::try_from(slots).unwrap_or(u64::MAX)
    }

    /// When slot `slot` is due, after the start.
    fn due(&self, slot: u64) -> Duration {
        let nanos = u128::from(slot) * 1_000_000_000 / u128::from(self.rate_per_s.max(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// One connection's window over the load.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowReport {
    pub validator: u16,
    /// `false`: a fixed cap held (`limit` is that cap throughout).
    pub adaptive: bool,
    /// The window when the load ended.
    pub final_limit: usize,
    /// The window's mean over the load, sampled every 10 ms.
    pub mean_limit: f64,
    /// The least window sampled.
    pub min_limit: usize,
    /// The least latency the window remembered at the end, in microseconds.
    pub min_latency_us: Option<u64>,
}

/// What an open loop did. Each slot is held back at once (one request, counted in `refused`
/// as `held_back_by_client`), sends an offer (its requests counted in `sent`), or is counted in
/// `not_offered`.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Requests offered: those sent and the slots held back at once.
    pub offered: u64,
    /// Of the sent requests, those resent after an overload refusal.
    pub resent: u64,
    /// Requests handed to [`certify`](crate::certify).
    pub sent: u64,
    /// Latency of each certified request, in microseconds, ascending.
    pub certified_latencies_us: Vec<u64>,
    /// Overload refusals by reason (`held_back_by_client`, `validator_overloaded`): nothing
    /// lost, the payment may be resent.
    pub refused: BTreeMap<&'static str, u64>,
    /// Slots not offered, by reason: `presigned_exhausted` (no offer left, new or refused),
    /// `generator_behind` (slots still unsent [`LATE_GRACE`] after the end of the load).
    pub not_offered: BTreeMap<&'static str, u64>,
    /// Requests that failed (no quorum for a reason other than overload).
    pub failed: u64,
    /// Sent requests with no answer within the drain.
    pub unanswered: u64,
    /// From the start to the last certificate.
    pub last_certified: Duration,
    /// From the start to the last offer.
    pub offering: Duration,
    /// Each connection's window, in validator order.
    pub windows: Vec<WindowReport>,
}

impl LoadReport {
    /// Certified requests per second over the load (or until the last certificate, if later).
    pub fn goodput_per_s(&self, load: &OpenLoop) -> f64 {
        let seconds = self.last_certified.max(load.duration).as_secs_f64();
        if seconds == 0.0 {
            return 0.0;
        }
        self.certified_latencies_us.len() as f64 / seconds
    }
}

type Finished = (
    PaymentRequest,
    Result<Vec<Certificate>, CertifyError>,
    Duration,
);

/// Runs `load` with `offers` (in slot order) through `client`; `on_result` sees each answered
/// request's outcome (certificates to check, conflicts to count).
pub async fn run_open_loop(
    client: &Arc<CommitteeClient>,
    cache: &Arc<Mutex<RootCache>>,
    load: OpenLoop,
    offers: Vec<Offer>,
    mut on_result: impl FnMut(&PaymentRequest, &Result<Vec<Certificate>, CertifyError>),
) -> LoadReport {
    let mut report = LoadReport::default();
    let mut windows = WindowSampler::new(client);
    let (done, mut finished) = tokio::sync::mpsc::unbounded_channel::<Finished>();
    let (refused_back, mut refused_requests) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let late_end = start + load.duration + LATE_GRACE;
    let slots = load.slots();
    let mut offers = offers.into_iter();
    for slot in 0..slots {
        let due = start + load.due(slot);
        let now = Instant::now();
        if now > late_end {
            report.not_offered.insert("generator_behind", slots - slot);
            break;
        }
        // Every 10 ms, not every slot: at 400,000/s the locks would cost more than the slot.
        windows.sample_if_due(client, now);
        if due > now {
            tokio::time::sleep_until(due.into()).await;
        } else if slot % 256 == 0 {
            // Behind schedule the loop never waits: let the certify tasks on this worker run.
            tokio::task::yield_now().await;
        }
        if client.held_back().is_some() {
            // Checked before an offer is taken: a slot held back spends nothing of the pool.
            report.offered += 1;
            *report.refused.entry("held_back_by_client").or_default() += 1;
            continue;
        }
        let offer = match refused_requests.try_recv() {
            Ok(request) => {
                report.resent += 1;
                vec![request]
            }
            Err(_) => match offers.next() {
                Some(offer) => offer,
                None => {
                    *report.not_offered.entry("presigned_exhausted").or_default() += 1;
                    continue;
                }
            },
        };
        report.offered += offer.len() as u64;
        for request in offer {
            report.sent += 1;
            spawn_certify(client, cache, request, &done, &refused_back);
        }
    }
    drop(done);
    report.offering = start.elapsed();
    windows.sample(client);
    report.windows = windows.report(client);
    collect(
        &mut report,
        &mut finished,
        start,
        load.drain,
        &mut on_result,
    )
    .await;
    report.certified_latencies_us.sort_unstable();
    report
}

/// Sends `request` now and waits for its quorum in a task: its outcome goes to `done`, and the
/// request itself back to `refused_back` if it was refused for overload (to be resent unchanged
/// by a later slot). Sent before the task is spawned, so the next slot's
/// [`CommitteeClient::held_back`] counts it in flight (at 400,000/s the loop otherwise spawned
/// many tasks between two of them running, and most found the windows full).
fn spawn_certify(
    client: &Arc<CommitteeClient>,
    cache: &Arc<Mutex<RootCache>>,
    request: PaymentRequest,
    done: &tokio::sync::mpsc::UnboundedSender<Finished>,
    refused_back: &tokio::sync::mpsc::UnboundedSender<PaymentRequest>,
) {
    let client = client.clone();
    let cache = cache.clone();
    let done = done.clone();
    let refused_back = refused_back.clone();
    let sent = Instant::now();
    let replies = broadcast_payment(&client, &request);
    tokio::spawn(async move {
        let result = certify_replies(&client, &request, replies, &cache).await;
        if matches!(result, Err(CertifyError::Overloaded { .. })) {
            let _ = refused_back.send(request.clone());
        }
        let _ = done.send((request, result, sent.elapsed()));
    });
}

/// Takes the answers until every sent request has one or the drain has passed.
async fn collect(
    report: &mut LoadReport,
    finished: &mut tokio::sync::mpsc::UnboundedReceiver<Finished>,
    start: Instant,
    drain: Duration,
    on_result: &mut impl FnMut(&PaymentRequest, &Result<Vec<Certificate>, CertifyError>),
) {
    let drain_end = Instant::now() + drain;
    let mut answered = 0u64;
    while answered < report.sent {
        let remaining = drain_end.saturating_duration_since(Instant::now());
        let Ok(Some((request, result, latency))) =
            tokio::time::timeout(remaining, finished.recv()).await
        else {
            break;
        };
        answered += 1;
        on_result(&request, &result);
        match result {
            Ok(_) => {
                report
                    .certified_latencies_us
                    .push(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
                report.last_certified = report.last_certified.max(start.elapsed());
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
                *report.refused.entry(reason).or_default() += 1;
            }
            Err(CertifyError::NoQuorum { .. }) => report.failed += 1,
        }
    }
    report.unanswered = report.sent - answered;
}

/// The windows' running sums between samples.
struct WindowSampler {
    next: Instant,
    samples: u64,
    sums: Vec<u64>,
    mins: Vec<usize>,
}

impl WindowSampler {
    fn new(client: &CommitteeClient) -> WindowSampler {
        let validators = client.committee().validators.len();
        WindowSampler {
            next: Instant::now(),
            samples: 0,
            sums: vec![0; validators],
            mins: vec![usize::MAX; validators],
        }
    }

    fn sample_if_due(&mut self, client: &CommitteeClient, now: Instant) {
        if now >= self.next {
            self.next = now + WINDOW_SAMPLE_EVERY;
            self.sample(client);
        }
    }

    fn sample(&mut self, client: &CommitteeClient) {
        self.samples += 1;
        for (window, (sum, min)) in client
            .windows()
            .iter()
            .zip(self.sums.iter_mut().zip(self.mins.iter_mut()))
        {
            *sum += window.limit as u64;
            *min = (*min).min(window.limit);
        }
    }

    fn report(&self, client: &CommitteeClient) -> Vec<WindowReport> {
        client
            .windows()
            .into_iter()
            .zip(self.sums.iter().zip(&self.mins))
            .map(|(window, (sum, min))| WindowReport {
                validator: window.validator,
                adaptive: window.adaptive,
                final_limit: window.limit,
                mean_limit: *sum as f64 / self.samples.max(1) as f64,
                min_limit: (*min).min(window.limit),
                min_latency_us: window.min_latency_us,
            })
            .collect()
    }
}
