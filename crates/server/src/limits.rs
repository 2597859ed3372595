//! Per-client limits: a rate limit per client IP address, and a max-min fair share of what
//! clients hold open (connections, event streams), per client and in all.
//!
//! The rate limit is the `governor` crate's keyed limiter (GCRA). With a replenish interval of
//! `t = 1 s / rate_per_s` and a burst of `b`, it admits exactly what a token bucket refilled at
//! `rate_per_s` up to `b` tokens would (the property test below checks this against such a
//! bucket, in integer nanoseconds), and its "not until" is that bucket's wait for one token.
//!
//! The slots stay hand-written: governor limits how *often* a client may do something, not how
//! many long-lived things it *holds* at once (a cell it grants is never given back), and tokio's
//! `Semaphore` has one pool, not a share per client, and cannot take a permit back.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::Quota;
use tokio_util::sync::CancellationToken;

/// The most clients tracked; beyond it, clients whose bucket is full again (a full bucket
/// carries no information; governor waits one replenish interval more to be sure) are
/// forgotten, bounding memory against many source addresses.
const CLIENTS_TRACKED_MAX: usize = 65_536;

/// `rate_per_s` requests per second per client IP, in bursts of up to `burst`.
pub struct RateLimiter<C: Clock = DefaultClock> {
    limiter: governor::RateLimiter<
        IpAddr,
        DefaultKeyedStateStore<IpAddr>,
        C,
        NoOpMiddleware<C::Instant>,
    >,
}

impl RateLimiter {
    /// `None` when `rate_per_s` is 0 (no limit); a `burst` of 0 counts as 1.
    pub fn new(rate_per_s: u32, burst: u32) -> Option<RateLimiter> {
        RateLimiter::with_clock(rate_per_s, burst, DefaultClock::default())
    }
}

impl<C: Clock> RateLimiter<C> {
    /// As [`RateLimiter::new`], reading time from `clock` (tests pass a fake one).
    pub fn with_clock(rate_per_s: u32, burst: u32, clock: C) -> Option<RateLimiter<C>> {
        let rate_per_s = NonZeroU32::new(rate_per_s)?;
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(rate_per_s).allow_burst(burst);
        Some(RateLimiter {
            limiter: governor::RateLimiter::new(quota, DefaultKeyedStateStore::default(), clock),
        })
    }

    /// Takes one request's worth for `client`; `Err(wait)` says how long until one is free.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        if self.limiter.len() >= CLIENTS_TRACKED_MAX {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&client)
            .map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
    }

    /// Clients whose state is not that of a fresh client (bounded by [`CLIENTS_TRACKED_MAX`]
    /// at the next check).
    #[cfg(test)]
    fn clients_tracked(&self) -> usize {
        self.limiter.len()
    }
}

/// Long-lived things clients hold (connections, event streams), per client IP and in all,
/// shared max-min fairly: a client may hold at most `per_client_max`, all together at most
/// `total_max`, and when every slot is taken a newcomer holding fewer than the heaviest client
/// minus one takes that client's newest slot (whose holder is told through
/// [`ClientSlot::evicted`] and closes it). So one address, or many addresses each at the
/// per-client cap, can fill the slots while nobody else wants one, but can never keep another
/// address out: a client's share under contention is what the others leave, down to one slot.
/// Who is evicted is a function of the held counts and addresses alone (the heaviest client,
/// the lowest address on a tie, its newest slot).
pub struct ClientSlots {
    per_client_max: usize,
    total_max: usize,
    held: Mutex<HeldSlots>,
}

#[derive(Default)]
struct HeldSlots {
    /// Only clients holding at least one slot (so memory is bounded by `total_max`), each slot
    /// by its number with the token that tells its holder it was evicted.
    per_client: BTreeMap<IpAddr, BTreeMap<u64, CancellationToken>>,
    total: usize,
    next_slot: u64,
}

/// Why a client may not take another slot.
#[derive(Debug, PartialEq, Eq)]
pub enum SlotRefusal {
    /// This client already holds its share.
    Client { open: usize, max: usize },
    /// Every slot is taken and no client holds more than one more than this one.
    Total { max: usize },
}

/// One held slot; given back when dropped.
pub struct ClientSlot {
    slots: Arc<ClientSlots>,
    client: IpAddr,
    number: u64,
    evicted: CancellationToken,
}

impl ClientSlot {
    /// Resolves when a newcomer took this slot: its holder should close what it holds.
    pub async fn evicted(&self) {
        self.evicted.cancelled().await
    }
}

impl ClientSlots {
    pub fn new(per_client_max: usize, total_max: usize) -> ClientSlots {
        ClientSlots {
            per_client_max,
            total_max,
            held: Mutex::new(HeldSlots::default()),
        }
    }

    /// Takes a slot for `client` (evicting the heaviest client's newest when all are taken and
    /// that is fair), or says which cap it would exceed.
    pub fn take(self: &Arc<Self>, client: IpAddr) -> Result<ClientSlot, SlotRefusal> {
        let mut held = self.lock();
        let open = held.per_client.get(&client).map_or(0, BTreeMap::len);
        if open >= self.per_client_max {
            return Err(SlotRefusal::Client {
                open,
                max: self.per_client_max,
            });
        }
        if held.total >= self.total_max && !held.evict_for(open) {
            return Err(SlotRefusal::Total {
                max: self.total_max,
            });
        }
        let number = held.next_slot;
        held.next_slot += 1;
        let evicted = CancellationToken::new();
        held.per_client
            .entry(client)
            .or_default()
            .insert(number, evicted.clone());
        held.total += 1;
        debug_assert!(held.total <= self.total_max.max(1));
        Ok(ClientSlot {
            slots: self.clone(),
            client,
            number,
            evicted,
        })
    }

    /// Slots held in all.
    pub fn total(&self) -> usize {
        self.lock().total
    }

    /// Slots `client` holds.
    pub fn held_by(&self, client: IpAddr) -> usize {
        self.lock().per_client.get(&client).map_or(0, BTreeMap::len)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeldSlots> {
        // The counts are updated together before the lock is released: a panic elsewhere
        // cannot leave them inconsistent.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl HeldSlots {
    /// Frees the newest slot of the client holding the most (the lowest address on a tie) if
    /// it holds at least two more than a newcomer holding `open`; says whether it did.
    fn evict_for(&mut self, open: usize) -> bool {
        let heaviest = self
            .per_client
            .iter()
            .map(|(client, slots)| (slots.len(), std::cmp::Reverse(*client)))
            .max();
        let Some((count, std::cmp::Reverse(victim))) = heaviest else {
            return false;
        };
        if count < open + 2 {
            return false;
        }
        let Some(slots) = self.per_client.get_mut(&victim) else {
            return false;
        };
        if let Some((_, token)) = slots.pop_last() {
            token.cancel();
            self.total -= 1;
        }
        if slots.is_empty() {
            self.per_client.remove(&victim);
        }
        true
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut held = self.slots.lock();
        let Some(slots) = held.per_client.get_mut(&self.client) else {
            return;
        };
        // An evicted slot was already given back when it was taken from this holder.
        if slots.remove(&self.number).is_none() {
            return;
        }
        if slots.is_empty() {
            held.per_client.remove(&self.client);
        }
        held.total -= 1;
    }
}

/// Scans of every open offer (`GET /v1/accounts/{id}/offers`) running at once: each takes
/// a core for O(open offers) (~30 ms at 1.2M open offers on the dev VM) and holds a share of
/// the books, which makes the next blocks copy the chunks they edit.
pub(crate) const OFFER_SCANS_MAX: usize = 2;
/// Offer scans waiting for their turn, at most; one more is answered `offers_busy`.
pub(crate) const OFFER_SCANS_WAITING_MAX: usize = 64;

/// Explanations waiting for their turn, at most; one more is answered `explain_busy`.
pub(crate) const EXPLAIN_WAITING_MAX: usize = 64;

/// The commission explanations pay out at, and the fair queue that runs them one at a time.
///
/// An explanation reads the block log, so they run one at a time; to keep that one turn from
/// going to whoever asks fastest, each client address may have one explanation waiting or
/// running (see [`FairTurns`]).
pub struct ExplainGate {
    epsilon: walras_types::Fraction,
    turns: FairTurns,
}

impl ExplainGate {
    pub fn new(epsilon: walras_types::Fraction) -> ExplainGate {
        ExplainGate {
            epsilon,
            turns: FairTurns::new(1, EXPLAIN_WAITING_MAX),
        }
    }

    /// The commission explanations pay out at (the engine's ε).
    pub fn epsilon(&self) -> walras_types::Fraction {
        self.epsilon
    }

    /// Takes `client`'s place in the queue, or says why it may not wait.
    pub fn enter(&self, client: IpAddr) -> Result<TurnTicket, TurnRefusal> {
        self.turns.enter(client)
    }
}

/// A fair queue for work that runs a few at a time (explanations, scans of every open offer).
///
/// Each client address may have one request waiting or running (a second is refused at once,
/// to that client only), at most `running_max` run, and the waiting ones (at most
/// `waiting_max`) are served first come, first served: every client waits for at most one
/// request per other client ahead of it, whatever rate the others send at.
pub struct FairTurns {
    running_max: usize,
    waiting_max: usize,
    turns: Arc<Mutex<Turns>>,
}

#[derive(Default)]
struct Turns {
    running: usize,
    /// Clients with a request waiting or running.
    clients: std::collections::BTreeSet<IpAddr>,
    waiting: std::collections::VecDeque<tokio::sync::oneshot::Sender<()>>,
}

/// Why a request may not wait for its turn.
#[derive(Debug, PartialEq, Eq)]
pub enum TurnRefusal {
    /// This client already has one waiting or running.
    ClientBusy,
    /// The queue's `waiting_max` are waiting.
    QueueFull,
}

/// A turn to run; the next waiting request gets it when this is dropped.
pub struct Turn {
    turns: Arc<Mutex<Turns>>,
    client: IpAddr,
}

/// A client's place in the queue: it holds the client's one place until dropped or turned into
/// a [`Turn`].
pub struct TurnTicket {
    turns: Arc<Mutex<Turns>>,
    /// `None` once the place has passed to a `Turn`.
    client: Option<IpAddr>,
    /// `None`: a turn was free at once; otherwise where it arrives.
    turn: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl FairTurns {
    /// A queue running at most `running_max` (at least one) requests at once, with at most
    /// `waiting_max` waiting.
    pub fn new(running_max: usize, waiting_max: usize) -> FairTurns {
        FairTurns {
            running_max: running_max.max(1),
            waiting_max,
            turns: Arc::new(Mutex::new(Turns::default())),
        }
    }

    /// Takes `client`'s place in the queue, or says why it may not wait.
    pub fn enter(&self, client: IpAddr) -> Result<TurnTicket, TurnRefusal> {
        let mut turns = lock_turns(&self.turns);
        if turns.clients.contains(&client) {
            return Err(TurnRefusal::ClientBusy);
        }
        let turn = if turns.running >= self.running_max {
            if turns.waiting.len() >= self.waiting_max {
                return Err(TurnRefusal::QueueFull);
            }
            let (send, receive) = tokio::sync::oneshot::channel();
            turns.waiting.push_back(send);
            Some(receive)
        } else {
            turns.running += 1;
            None
        };
        turns.clients.insert(client);
        debug_assert!(turns.running <= self.running_max);
        Ok(TurnTicket {
            turns: self.turns.clone(),
            client: Some(client),
            turn,
        })
    }

    /// Requests running now.
    pub fn running(&self) -> usize {
        lock_turns(&self.turns).running
    }
}

impl TurnTicket {
    /// Waits for the turn (at once when one was free).
    pub async fn turn(mut self) -> Turn {
        if let Some(receive) = self.turn.as_mut() {
            // The sender stays in the queue until it hands the turn over, so this ends only
            // with the turn. A request dropped while waiting drops the ticket with its
            // receiver still in place, and the ticket's drop passes on a turn it was given.
            let _ = receive.await;
        }
        // The place and the turn pass to the `Turn`: the ticket's drop leaves both.
        let client = self
            .client
            .take()
            .expect("a ticket holds its place until it turns");
        Turn {
            turns: self.turns.clone(),
            client,
        }
    }
}

impl Drop for TurnTicket {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        // Never turned into a `Turn` (the request was dropped): free the client's place, and
        // pass on the turn if it held one (at once, or handed over meanwhile).
        let mut turns = lock_turns(&self.turns);
        turns.clients.remove(&client);
        let held_turn = match self.turn.as_mut() {
            None => true,
            Some(receive) => receive.try_recv().is_ok(),
        };
        if held_turn {
            hand_over(&mut turns);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut turns = lock_turns(&self.turns);
        turns.clients.remove(&self.client);
        hand_over(&mut turns);
    }
}

/// Gives a released turn to the first waiter still waiting, or counts one fewer running.
fn hand_over(turns: &mut Turns) {
    while let Some(next) = turns.waiting.pop_front() {
        if next.send(()).is_ok() {
            return;
        }
    }
    turns.running -= 1;
}

fn lock_turns(turns: &Mutex<Turns>) -> std::sync::MutexGuard<'_, Turns> {
    // Each change leaves the queue consistent before the lock is released.
    turns
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    //! The event-stream caps (per client and in all, and a closed stream freeing its slot), and
    //! the rate limiter against a token bucket written out in integer nanoseconds: same admits,
    //! same waits, for any rate, burst and sequence of requests from a few clients.

    use super::*;
    use governor::clock::FakeRelativeClock;
    use proptest::prelude::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn one_client_cannot_hold_more_than_its_cap_and_a_closed_slot_is_freed() {
        let slots = Arc::new(ClientSlots::new(2, 3));
        let (a, b) = (ip(1), ip(2));
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert_eq!(
            slots.take(a).err(),
            Some(SlotRefusal::Client { open: 2, max: 2 })
        );
        let _third = slots.take(b).unwrap();
        drop(first);
        assert_eq!(slots.total(), 2);
        assert_eq!(slots.held_by(a), 1);
        assert!(slots.take(b).is_ok(), "a closed slot is free again");
    }

    /// Trigger: one client opened 2,500 connections; the node's whole cap of 1,024 went to it
    /// and another address was answered 503 `too_many_connections`.
    #[tokio::test]
    async fn a_client_holding_every_connection_cannot_keep_another_address_out() {
        let slots = Arc::new(ClientSlots::new(usize::MAX, 1_024));
        let (hog, other) = (ip(1), ip(2));
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..2_500 {
            match slots.take(hog) {
                Ok(slot) => held.push(slot),
                Err(refusal) => {
                    assert_eq!(refusal, SlotRefusal::Total { max: 1_024 });
                    refused += 1;
                }
            }
        }
        assert_eq!(
            (held.len(), refused),
            (1_024, 1_476),
            "alone, it may use them all"
        );
        let newcomer = slots
            .take(other)
            .expect("another address gets a connection");
        assert_eq!((slots.held_by(hog), slots.held_by(other)), (1_023, 1));
        let newest = held.pop().unwrap();
        tokio::time::timeout(Duration::from_secs(1), newest.evicted())
            .await
            .expect("the hog's newest connection is told to close");
        drop(newest);
        assert_eq!(
            slots.total(),
            1_024,
            "an evicted slot is not given back twice"
        );
        drop(newcomer);
        assert!(slots.take(hog).is_ok(), "the freed slot is the hog's again");
    }

    /// Trigger: 32 loopback addresses holding 8 event streams each took all 256.
    #[test]
    fn many_addresses_at_their_cap_cannot_keep_a_newcomer_out() {
        let slots = Arc::new(ClientSlots::new(8, 256));
        let held: Vec<ClientSlot> = (1..=32)
            .flat_map(|n| (0..8).map(move |_| ip(n)))
            .map(|client| slots.take(client).unwrap())
            .collect();
        assert_eq!(slots.total(), 256);
        let _newcomer = slots.take(ip(200)).expect("a newcomer gets a stream");
        assert_eq!(
            slots.held_by(ip(1)),
            7,
            "the lowest heaviest address gave one up"
        );
        assert_eq!(
            slots.take(ip(1)).err(),
            Some(SlotRefusal::Total { max: 256 }),
            "the evicted client cannot take it back: nobody holds two more than it"
        );
        drop(held);
        assert_eq!(slots.total(), 1);
    }

    #[test]
    fn a_client_gets_its_burst_then_the_rate_and_others_are_independent() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(10, 3, clock.clone()).unwrap();
        let (a, b) = (ip(1), ip(2));
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        assert_eq!(
            limiter.check(a),
            Err(Duration::from_millis(100)),
            "one request per 100 ms"
        );
        assert!(
            limiter.check(b).is_ok(),
            "another client has its own bucket"
        );
        clock.advance(Duration::from_millis(100));
        assert!(limiter.check(a).is_ok());
        assert!(limiter.check(a).is_err());
    }

    #[test]
    fn a_rate_of_zero_is_no_limit_and_a_burst_of_zero_is_one() {
        assert!(RateLimiter::new(0, 5).is_none());
        let limiter = RateLimiter::with_clock(1, 0, FakeRelativeClock::default()).unwrap();
        assert!(limiter.check(ip(1)).is_ok());
        assert_eq!(limiter.check(ip(1)), Err(Duration::from_secs(1)));
    }

    #[test]
    fn clients_back_to_a_full_bucket_are_forgotten_beyond_the_tracked_maximum() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(1_000, 1, clock.clone()).unwrap();
        for n in 0..CLIENTS_TRACKED_MAX as u32 {
            assert!(limiter.check(IpAddr::from(n.to_be_bytes())).is_ok());
        }
        assert_eq!(limiter.clients_tracked(), CLIENTS_TRACKED_MAX);
        // Every bucket is full again 1 ms later; governor forgets a client one replenish
        // interval after that (its test for "same as fresh" is conservative by one interval).
        clock.advance(Duration::from_millis(1));
        let busy = IpAddr::from([192, 168, 0, 1]);
        assert!(limiter.check(busy).is_ok());
        assert_eq!(limiter.clients_tracked(), CLIENTS_TRACKED_MAX + 1);
        clock.advance(Duration::from_millis(1));
        assert!(limiter.check(busy).is_ok());
        assert_eq!(
            limiter.clients_tracked(),
            1,
            "only the client seen in the last interval stays"
        );
        assert!(
            limiter.check(busy).is_err(),
            "a remembered client is still limited"
        );
    }

    fn gate() -> ExplainGate {
        ExplainGate::new(walras_types::Fraction::ZERO)
    }

    /// Trigger: one client asking for explanations at ~19 requests/s got 77% of everyone
    /// else's answered `503 explain_busy` (one permit, taken by whoever asked first).
    #[tokio::test]
    async fn a_client_asking_fast_cannot_crowd_others_out_of_explanations() {
        let gate = gate();
        let (hog, other) = (ip(1), ip(2));
        let hogs_turn = gate.enter(hog).unwrap().turn().await;
        assert_eq!(gate.enter(hog).err(), Some(TurnRefusal::ClientBusy));
        let waiting = gate.enter(other).expect("another client waits its turn");
        let others_turn = tokio::spawn(waiting.turn());
        drop(hogs_turn);
        let hogs_next = gate.enter(hog).expect("the hog may wait again");
        let others_turn = tokio::time::timeout(Duration::from_secs(1), others_turn)
            .await
            .expect("the other client is served before the hog's next request")
            .unwrap();
        let hogs_next = tokio::spawn(hogs_next.turn());
        tokio::task::yield_now().await;
        assert!(!hogs_next.is_finished(), "one explanation at a time");
        drop(others_turn);
        tokio::time::timeout(Duration::from_secs(1), hogs_next)
            .await
            .expect("then the hog")
            .unwrap();
    }

    #[tokio::test]
    async fn a_request_dropped_while_waiting_passes_its_turn_on_and_frees_its_place() {
        let gate = gate();
        let first = gate.enter(ip(1)).unwrap().turn().await;
        let gave_up = gate.enter(ip(2)).unwrap();
        let third = gate.enter(ip(3)).unwrap();
        let third = tokio::spawn(third.turn());
        drop(first);
        drop(gave_up);
        tokio::time::timeout(Duration::from_secs(1), third)
            .await
            .expect("the turn skips the client that left")
            .unwrap();
        assert!(gate.enter(ip(2)).is_ok(), "its place is free again");
        let unused = gate.enter(ip(4));
        drop(unused);
    }

    /// Trigger: the offer scans were bounded by one global semaphore of two permits, so one
    /// client with two requests in flight made every other client wait behind both. With two
    /// turns, a client holds at most one: the second client runs beside it at once, and a
    /// third waits for the first turn given back, not for the first client's next request.
    #[tokio::test]
    async fn with_two_turns_one_client_holds_one_and_another_runs_beside_it() {
        let scans = FairTurns::new(2, 8);
        let (hog, other, third) = (ip(1), ip(2), ip(3));
        let hogs_turn = scans.enter(hog).unwrap().turn().await;
        assert_eq!(scans.enter(hog).err(), Some(TurnRefusal::ClientBusy));
        let others_turn =
            tokio::time::timeout(Duration::from_secs(1), scans.enter(other).unwrap().turn())
                .await
                .expect("a second client runs at once beside the first");
        assert_eq!(scans.running(), 2);
        let thirds_turn = tokio::spawn(scans.enter(third).unwrap().turn());
        tokio::task::yield_now().await;
        assert!(!thirds_turn.is_finished(), "two run at once");
        drop(hogs_turn);
        let hogs_next = scans.enter(hog).expect("the hog may wait again");
        let thirds_turn = tokio::time::timeout(Duration::from_secs(1), thirds_turn)
            .await
            .expect("the third client gets the turn the hog gave back")
            .unwrap();
        let hogs_next = tokio::spawn(hogs_next.turn());
        tokio::task::yield_now().await;
        assert!(!hogs_next.is_finished(), "still two at once");
        drop(others_turn);
        let hogs_next = tokio::time::timeout(Duration::from_secs(1), hogs_next)
            .await
            .expect("then the hog")
            .unwrap();
        drop(thirds_turn);
        assert_eq!(scans.running(), 1, "the hog's second turn is the one left");
        drop(hogs_next);
        assert_eq!(scans.running(), 0);
    }

    #[test]
    fn explanations_waiting_are_bounded() {
        let gate = gate();
        let _running = gate.enter(ip(0)).unwrap();
        let waiting: Vec<TurnTicket> = (1..=EXPLAIN_WAITING_MAX as u32)
            .map(|n| gate.enter(IpAddr::from(n.to_be_bytes())).unwrap())
            .collect();
        assert_eq!(gate.enter(ip(250)).err(), Some(TurnRefusal::QueueFull));
        drop(waiting);
    }

    /// A token bucket in nanoseconds of credit: full is `burst * t`, a request costs `t`, and
    /// credit grows by one per nanosecond.
    struct Bucket {
        credit_ns: u64,
        at_ns: u64,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Under any sequence of takes and drops from a few clients: the caps hold, the counts
        /// add up, and a refusal for want of room only ever meets a client that no other
        /// client out-holds by two (max-min fairness).
        #[test]
        fn slots_keep_their_caps_and_refuse_only_when_the_share_is_fair(
            per_client_max in 1usize..6,
            total_max in 1usize..12,
            steps in proptest::collection::vec((0u8..5, any::<bool>()), 1..200),
        ) {
            let slots = Arc::new(ClientSlots::new(per_client_max, total_max));
            let mut held: Vec<ClientSlot> = Vec::new();
            for (client, take) in steps {
                if take {
                    let before: Vec<usize> = (0..5).map(|n| slots.held_by(ip(n))).collect();
                    match slots.take(ip(client)) {
                        Ok(slot) => held.push(slot),
                        Err(SlotRefusal::Client { open, max }) => {
                            prop_assert_eq!((open, max), (before[client as usize], per_client_max));
                        }
                        Err(SlotRefusal::Total { .. }) => {
                            let most = before.iter().copied().max().unwrap_or(0);
                            prop_assert!(most < before[client as usize] + 2);
                            prop_assert_eq!(slots.total(), total_max);
                        }
                    }
                } else if let Some(position) = held.iter().position(|s| s.client == ip(client)) {
                    held.swap_remove(position);
                }
                let counts: Vec<usize> = (0..5).map(|n| slots.held_by(ip(n))).collect();
                prop_assert!(slots.total() <= total_max);
                prop_assert_eq!(slots.total(), counts.iter().sum::<usize>());
                prop_assert!(counts.iter().all(|&count| count <= per_client_max));
            }
        }

        #[test]
        fn the_limiter_admits_and_waits_exactly_as_a_token_bucket(
            rate_per_s in 1u32..=1_000,
            burst in 0u32..=20,
            requests in proptest::collection::vec((0u8..3, 0u64..2_000_000_000), 1..200),
        ) {
            let clock = FakeRelativeClock::default();
            let limiter = RateLimiter::with_clock(rate_per_s, burst, clock.clone()).unwrap();
            let t_ns = 1_000_000_000 / u64::from(rate_per_s);
            let full_ns = t_ns * u64::from(burst.max(1));
            let mut buckets: BTreeMap<u8, Bucket> = BTreeMap::new();
            let mut now_ns = 0u64;
            for (client, gap_ns) in requests {
                // Gaps mostly shorter than one interval, so that clients run dry.
                let gap_ns = gap_ns % (2 * t_ns);
                clock.advance(Duration::from_nanos(gap_ns));
                now_ns += gap_ns;
                let bucket = buckets.entry(client).or_insert(Bucket { credit_ns: full_ns, at_ns: now_ns });
                bucket.credit_ns = (bucket.credit_ns + (now_ns - bucket.at_ns)).min(full_ns);
                bucket.at_ns = now_ns;
                let expected = if bucket.credit_ns >= t_ns {
                    bucket.credit_ns -= t_ns;
                    Ok(())
                } else {
                    Err(Duration::from_nanos(t_ns - bucket.credit_ns))
                };
                prop_assert_eq!(limiter.check(ip(client)), expected);
            }
        }
    }
}
