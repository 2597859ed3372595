//! A fast feasibility test for the clearing LP, used by tâtonnement's periodic convergence check
//! (SPEEDEX appendix C.3) where running the simplex every time would cost too much.
//!
//! The LP asks for pair flows `lower ≤ y ≤ upper` with, per asset A,
//! `inflow(A) − outflow(A) ≤ ε · inflow(A)` (inflow: value of A the auctioneer pays out; outflow:
//! value of A it receives). Replacing `ε · inflow(A)` by the smaller `ε · Σ lower bounds into A`
//! gives a circulation problem: every asset may pass up to that much net inflow to an extra node T,
//! and T may feed any asset without limit. A circulation with lower bounds exists iff a max-flow
//! saturates the lower-bound demands (the standard reduction), computed here with Dinic's
//! algorithm on integer capacities. Flows are scaled to integers and rounded to nearest, so the
//! answer is "feasible up to about 2^-40 of the largest flow"; the exact settlement re-checks.

use crate::lp::PairFlowBounds;

/// Integer scale of the largest flow.
const SCALE: f64 = (1u64 << 40) as f64;

/// Whether the LP with these bounds is (up to rounding) feasible.
pub(crate) fn circulation_feasible(assets: usize, pairs: &[PairFlowBounds], epsilon: f64) -> bool {
    infeasible_cut(assets, pairs, epsilon).is_none()
}

/// `None` when the LP with these bounds is (up to rounding) feasible; otherwise the assets of a
/// minimum cut that proves it is not: a set `S` whose mandatory payouts (lower bounds of pairs
/// buying an asset of `S` with one outside it) exceed what it can receive (upper bounds of pairs
/// selling `S` for the rest, plus commission). `S` is over-demanded at these valuations: raising
/// its valuations together is what repairs the cut (see [`crate::cut`]).
pub(crate) fn infeasible_cut(
    assets: usize,
    pairs: &[PairFlowBounds],
    epsilon: f64,
) -> Option<Vec<bool>> {
    let largest = pairs.iter().map(|pair| pair.upper).fold(0.0f64, f64::max);
    if largest <= 0.0 {
        return None; // nothing can trade: zero flow is feasible
    }
    let factor = SCALE / largest;
    let to_int = |value: f64| (value * factor).round().max(0.0) as i64;
    let hub = assets; // node T
    let source = assets + 1;
    let sink = assets + 2;
    let mut network = Network::new(assets + 3);
    let mut excess = vec![0i64; assets + 1];
    let mut lower_into = vec![0i64; assets];
    let mut total_upper: i64 = 0;
    for pair in pairs {
        let lower = to_int(pair.lower);
        let upper = to_int(pair.upper).max(lower);
        network.add_edge(pair.sell, pair.buy, upper - lower);
        excess[pair.buy] += lower;
        excess[pair.sell] -= lower;
        lower_into[pair.buy] += lower;
        total_upper += upper;
    }
    for (asset, lower) in lower_into.iter().enumerate() {
        let commission_slack = (epsilon * *lower as f64).floor() as i64;
        network.add_edge(asset, hub, commission_slack);
        network.add_edge(hub, asset, total_upper);
    }
    let mut required = 0i64;
    for (node, value) in excess.iter().enumerate() {
        if *value > 0 {
            network.add_edge(source, node, *value);
            required += value;
        } else if *value < 0 {
            network.add_edge(node, sink, -value);
        }
    }
    if network.max_flow(source, sink) >= required {
        return None;
    }
    // After a maximum flow the nodes still reachable from the source form a minimum cut.
    let reachable = network.reachable_from(source);
    Some(reachable[..assets].to_vec())
}

/// Dinic's max-flow on an adjacency list of paired edges (edge i and i^1 are reverses).
struct Network {
    head: Vec<usize>,
    next: Vec<usize>,
    to: Vec<usize>,
    capacity: Vec<i64>,
    level: Vec<i32>,
    cursor: Vec<usize>,
}

const NONE: usize = usize::MAX;

impl Network {
    fn new(nodes: usize) -> Network {
        Network {
            head: vec![NONE; nodes],
            next: Vec::new(),
            to: Vec::new(),
            capacity: Vec::new(),
            level: vec![0; nodes],
            cursor: vec![0; nodes],
        }
    }

    fn add_edge(&mut self, from: usize, to: usize, capacity: i64) {
        for (a, b, cap) in [(from, to, capacity), (to, from, 0)] {
            self.to.push(b);
            self.capacity.push(cap);
            self.next.push(self.head[a]);
            self.head[a] = self.to.len() - 1;
        }
    }

    fn max_flow(&mut self, source: usize, sink: usize) -> i64 {
        let mut total = 0i64;
        while self.build_levels(source, sink) {
            self.cursor.copy_from_slice(&self.head);
            loop {
                let pushed = self.augment(source, sink, i64::MAX);
                if pushed == 0 {
                    break;
                }
                total += pushed;
            }
        }
        total
    }

    /// Nodes reachable from `source` through edges with residual capacity.
    fn reachable_from(&mut self, source: usize) -> Vec<bool> {
        let sink = NONE; // never reached: build every level
        self.build_levels(source, sink);
        self.level.iter().map(|level| *level >= 0).collect()
    }

    fn build_levels(&mut self, source: usize, sink: usize) -> bool {
        self.level.fill(-1);
        self.level[source] = 0;
        let mut queue = std::collections::VecDeque::from([source]);
        while let Some(node) = queue.pop_front() {
            let mut edge = self.head[node];
            while edge != NONE {
                let target = self.to[edge];
                if self.capacity[edge] > 0 && self.level[target] < 0 {
                    self.level[target] = self.level[node] + 1;
                    queue.push_back(target);
                }
                edge = self.next[edge];
            }
        }
        sink != NONE && self.level[sink] >= 0
    }

    /// One blocking-flow augmentation by depth-first search; iterative over path length would be
    /// needless here: paths are at most a few nodes long (assets + 3 nodes in all).
    fn augment(&mut self, node: usize, sink: usize, limit: i64) -> i64 {
        if node == sink {
            return limit;
        }
        while self.cursor[node] != NONE {
            let edge = self.cursor[node];
            let target = self.to[edge];
            if self.capacity[edge] > 0 && self.level[target] == self.level[node] + 1 {
                let pushed = self.augment(target, sink, limit.min(self.capacity[edge]));
                if pushed > 0 {
                    self.capacity[edge] -= pushed;
                    self.capacity[edge ^ 1] += pushed;
                    return pushed;
                }
            }
            self.cursor[node] = self.next[edge];
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lp;
    use crate::lp::tests::pair;

    #[test]
    fn agrees_with_the_lp_on_small_cases() {
        let cases: Vec<(usize, Vec<PairFlowBounds>, f64)> = vec![
            (2, vec![pair(0, 1, 0.0, 10.0), pair(1, 0, 0.0, 4.0)], 0.0),
            (2, vec![pair(0, 1, 5.0, 10.0), pair(1, 0, 0.0, 4.0)], 0.0),
            (2, vec![pair(0, 1, 4.0, 10.0), pair(1, 0, 3.0, 4.0)], 0.0),
            (
                3,
                vec![
                    pair(0, 1, 3.0, 9.0),
                    pair(1, 2, 0.0, 2.0),
                    pair(2, 0, 0.0, 7.0),
                ],
                0.0,
            ),
            (
                3,
                vec![
                    pair(0, 1, 2.0, 9.0),
                    pair(1, 2, 2.0, 2.0),
                    pair(2, 0, 0.0, 7.0),
                ],
                0.0,
            ),
            // commission: 4.02 in, 4 out, ε·4.02 = 0.0402 >= 0.02
            (2, vec![pair(0, 1, 4.02, 10.0), pair(1, 0, 0.0, 4.0)], 0.01),
            (2, vec![pair(0, 1, 4.5, 10.0), pair(1, 0, 0.0, 4.0)], 0.01),
        ];
        for (assets, pairs, epsilon) in cases {
            let by_lp = lp::solve(assets, &pairs, epsilon).is_ok();
            let by_flow = circulation_feasible(assets, &pairs, epsilon);
            assert_eq!(by_flow, by_lp, "{pairs:?} ε={epsilon}");
        }
    }

    #[test]
    fn nothing_to_trade_is_feasible() {
        assert!(circulation_feasible(3, &[], 0.0));
        assert!(circulation_feasible(2, &[pair(0, 1, 0.0, 0.0)], 0.0));
    }
}
