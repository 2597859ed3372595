//! Network latency for the simulator: per participant and direction, a piecewise-constant one-way
//! latency on a fixed time grid, precomputed from the seed (so every scheme sees the same network).
//!
//! Synthetic model: per-participant base offset, a bounded random walk, random spikes (the base and
//! walk multiplied by a factor up to `spike_factor_max` for `spike_duration_us`), and scripted steps
//! and spikes added on top. Trace model: a CSV with header `time_us,participant,down_us,up_us`; each
//! row sets both one-way latencies of that participant from `time_us` on (rows sorted by time per
//! participant; before the first row the first row's values hold).

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::SimError;

/// Added to the latency of one participant (or all when `participant` is `None`).
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptedEvent {
    /// From `at_us` on, both directions get `add_us` more.
    Step {
        participant: Option<u32>,
        at_us: u64,
        add_us: u64,
    },
    /// During [`at_us`, `at_us + duration_us`), both directions get `add_us` more.
    Spike {
        participant: Option<u32>,
        at_us: u64,
        duration_us: u64,
        add_us: u64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticLatency {
    /// One-way base latency, drawn per participant uniformly from [min, max].
    pub base_min_us: u64,
    pub base_max_us: u64,
    /// Grid step of the piecewise-constant latency.
    pub step_us: u64,
    /// Random walk: each step moves by −1, 0 or +1 of `walk_step_ns`, kept within [0, walk_max_us].
    pub walk_step_ns: u64,
    pub walk_max_us: u64,
    /// Chance per grid step (per million) that a spike starts.
    pub spike_per_million: u32,
    /// Spike multiplies (base + walk) by a factor drawn from [2, spike_factor_max] (1 = no spikes).
    pub spike_factor_max: u64,
    pub spike_duration_us: u64,
    pub scripted: Vec<ScriptedEvent>,
}

impl Default for SyntheticLatency {
    fn default() -> Self {
        Self {
            base_min_us: 10,
            base_max_us: 30,
            step_us: 20,
            walk_step_ns: 500,
            walk_max_us: 10,
            spike_per_million: 200,
            spike_factor_max: 10,
            spike_duration_us: 200,
            scripted: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TraceRow {
    pub time_us: u64,
    pub participant: u32,
    pub down_us: u64,
    pub up_us: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LatencyModel {
    Synthetic(SyntheticLatency),
    Trace(Vec<TraceRow>),
}

/// Parse the trace CSV (`time_us,participant,down_us,up_us`).
pub fn parse_trace_csv(text: &str) -> Result<Vec<TraceRow>, SimError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.trim() == "time_us,participant,down_us,up_us" => {}
        _ => {
            return Err(SimError::Trace {
                line: 1,
                reason: "header must be time_us,participant,down_us,up_us".into(),
            })
        }
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |reason: &str| SimError::Trace {
            line: i + 1,
            reason: reason.into(),
        };
        if fields.len() != 4 {
            return Err(bad("expected 4 fields"));
        }
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| bad("fields must be non-negative integers"))
        };
        let participant =
            u32::try_from(num(fields[1])?).map_err(|_| bad("participant too large"))?;
        rows.push(TraceRow {
            time_us: num(fields[0])?,
            participant,
            down_us: num(fields[2])?,
            up_us: num(fields[3])?,
        });
    }
    Ok(rows)
}

/// One direction of one participant's link: piecewise-constant raw latency by segment, seen
/// through the FIFO envelope. Links never reorder packets, so the latency of a packet sent at t is
/// max(raw(t), latest arrival of any earlier send − t); with that envelope t + latency(t) never
/// decreases, and Theorem 3's bound computed on it is a true lower bound for every scheme.
#[derive(Clone, Debug)]
struct Channel {
    /// (segment start ns, raw latency ns), sorted by start, first start 0.
    segments: Vec<(u64, u64)>,
    /// For segment i: the latest arrival of any packet sent in segments before i.
    arrival_before_ns: Vec<u64>,
}

impl Channel {
    fn new(mut segments: Vec<(u64, u64)>) -> Self {
        if segments.first().is_none_or(|&(start, _)| start > 0) {
            let first = segments.first().map_or(0, |&(_, l)| l);
            segments.insert(0, (0, first));
        }
        let mut arrival_before_ns = Vec::with_capacity(segments.len());
        let mut latest = 0u64;
        for i in 0..segments.len() {
            arrival_before_ns.push(latest);
            // A send just before the next segment starts arrives at (next start + latency).
            if let Some(&(next_start, _)) = segments.get(i + 1) {
                latest = latest.max(next_start + segments[i].1);
            }
        }
        Self {
            segments,
            arrival_before_ns,
        }
    }

    fn at(&self, t_ns: u64) -> u64 {
        let i = self
            .segments
            .partition_point(|&(start, _)| start <= t_ns)
            .saturating_sub(1);
        let raw = self.segments.get(i).map_or(0, |&(_, l)| l);
        let before = self.arrival_before_ns.get(i).copied().unwrap_or(0);
        raw.max(before.saturating_sub(t_ns))
    }

    fn max(&self) -> u64 {
        self.segments.iter().map(|&(_, l)| l).max().unwrap_or(0)
    }
}

/// Precomputed one-way latencies per participant and direction, in ns.
#[derive(Clone, Debug)]
pub struct Network {
    down: Vec<Channel>,
    up: Vec<Channel>,
}

impl Network {
    pub fn build(
        model: &LatencyModel,
        participants: u32,
        horizon_ns: u64,
        seed: u64,
    ) -> Result<Self, SimError> {
        match model {
            LatencyModel::Synthetic(s) => Ok(Self::synthetic(s, participants, horizon_ns, seed)),
            LatencyModel::Trace(rows) => Self::trace(rows, participants, horizon_ns),
        }
    }

    fn synthetic(s: &SyntheticLatency, participants: u32, horizon_ns: u64, seed: u64) -> Self {
        let step_ns = s.step_us.max(1) * 1_000;
        let steps = (horizon_ns / step_ns + 2) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_7477_6f72_6b00);
        let mut down = Vec::new();
        let mut up = Vec::new();
        for p in 0..participants {
            let span = s.base_max_us.saturating_sub(s.base_min_us) * 1_000;
            let base_ns = s.base_min_us * 1_000
                + if span > 0 {
                    rng.next_u64() % (span + 1)
                } else {
                    0
                };
            for out in [&mut down, &mut up] {
                let mut channel = Vec::with_capacity(steps);
                let mut walk_ns = 0u64;
                let mut spike_left = 0u64;
                let mut spike_factor = 1u64;
                for k in 0..steps {
                    let r = rng.next_u64();
                    walk_ns = match r % 3 {
                        0 => walk_ns.saturating_sub(s.walk_step_ns),
                        1 => (walk_ns + s.walk_step_ns).min(s.walk_max_us * 1_000),
                        _ => walk_ns,
                    };
                    if spike_left == 0
                        && s.spike_factor_max >= 2
                        && (r >> 32) % 1_000_000 < u64::from(s.spike_per_million)
                    {
                        spike_factor = 2 + rng.next_u64() % (s.spike_factor_max - 1);
                        spike_left = (s.spike_duration_us * 1_000).div_ceil(step_ns).max(1);
                    }
                    let factor = if spike_left > 0 {
                        spike_left -= 1;
                        spike_factor
                    } else {
                        1
                    };
                    let t_us = k as u64 * step_ns / 1_000;
                    let scripted_ns: u64 = s
                        .scripted
                        .iter()
                        .map(|e| scripted_add_us(e, p, t_us) * 1_000)
                        .sum();
                    let latency_ns = (base_ns + walk_ns) * factor + scripted_ns;
                    if channel.last().is_none_or(|&(_, l)| l != latency_ns) {
                        channel.push((k as u64 * step_ns, latency_ns));
                    }
                }
                out.push(Channel::new(channel));
            }
        }
        Self { down, up }
    }

    fn trace(rows: &[TraceRow], participants: u32, horizon_ns: u64) -> Result<Self, SimError> {
        let _ = horizon_ns;
        let mut down = Vec::new();
        let mut up = Vec::new();
        for p in 0..participants {
            let mine: Vec<&TraceRow> = rows.iter().filter(|r| r.participant == p).collect();
            if mine.is_empty() {
                return Err(SimError::Trace {
                    line: 0,
                    reason: format!("no rows for participant {p}"),
                });
            }
            if mine.windows(2).any(|w| w[0].time_us > w[1].time_us) {
                return Err(SimError::Trace {
                    line: 0,
                    reason: format!("rows of participant {p} are not sorted by time"),
                });
            }
            down.push(Channel::new(
                mine.iter()
                    .map(|r| (r.time_us * 1_000, r.down_us * 1_000))
                    .collect(),
            ));
            up.push(Channel::new(
                mine.iter()
                    .map(|r| (r.time_us * 1_000, r.up_us * 1_000))
                    .collect(),
            ));
        }
        Ok(Self { down, up })
    }

    /// One-way exchange → participant latency for a packet sent at `t_ns`.
    pub fn down_ns(&self, p: u32, t_ns: u64) -> u64 {
        self.down[p as usize].at(t_ns)
    }

    /// One-way participant → exchange latency for a packet sent at `t_ns`.
    pub fn up_ns(&self, p: u32, t_ns: u64) -> u64 {
        self.up[p as usize].at(t_ns)
    }

    /// Largest one-way latency anywhere on the grid (what CloudEx's thresholds must cover).
    pub fn max_one_way_ns(&self) -> u64 {
        self.down
            .iter()
            .chain(self.up.iter())
            .map(Channel::max)
            .max()
            .unwrap_or(0)
    }
}

fn scripted_add_us(e: &ScriptedEvent, p: u32, t_us: u64) -> u64 {
    match *e {
        ScriptedEvent::Step {
            participant,
            at_us,
            add_us,
        } if participant.is_none_or(|q| q == p) && t_us >= at_us => add_us,
        ScriptedEvent::Spike {
            participant,
            at_us,
            duration_us,
            add_us,
        } if participant.is_none_or(|q| q == p) && t_us >= at_us && t_us < at_us + duration_us => {
            add_us
        }
        _ => 0,
    }
}
