//! The clearing options `walras clear`, `walras bench clearing` and `walras bench warm-start`
//! share, and the one place their `ClearingParams` are built from.

use super::args;
use std::time::Duration;
use walras_clearing::{
    clear, Budget, Clearing, ClearingError, ClearingParams, OrderBooks, Resources, SupplyGrid,
    SystemClock,
};
use walras_types::Fraction;

/// Tâtonnement's targets and time limit on the command line.
#[derive(clap::Args, Debug, Clone)]
pub struct ClearingArgs {
    /// Commission ε charged on payouts (decimal or 2^-K)
    #[arg(long, default_value = "2^-15", value_parser = args::fraction)]
    pub epsilon: Fraction,
    /// Smoothing width μ: offers below (1-μ)·rate must trade in full (decimal or 2^-K)
    #[arg(long, default_value = "2^-10", value_parser = args::fraction)]
    pub mu: Fraction,
    /// Tâtonnement timeout in milliseconds
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub timeout_ms: u64,
}

impl ClearingArgs {
    /// The clearing parameters these options name; the rest default.
    pub fn params(&self) -> ClearingParams {
        ClearingParams {
            epsilon: self.epsilon,
            mu: self.mu,
            ..ClearingParams::default()
        }
    }

    /// Clears `books` with `params` under these options' timeout (from now, on the system
    /// clock; no iteration cap but tâtonnement's own), the race on a pool of `threads`.
    pub fn clear(
        &self,
        books: &OrderBooks,
        grid: Option<&SupplyGrid>,
        params: &ClearingParams,
        threads: usize,
    ) -> Result<Clearing, ClearingError> {
        let pool = walras_par::pool(threads);
        let clock = SystemClock;
        let timeout = Duration::from_millis(self.timeout_ms);
        let resources = Resources {
            budget: Budget::within(&clock, timeout, u64::MAX),
            clock: &clock,
            pool: Some(&pool),
        };
        clear(books, grid, params, resources)
    }
}
