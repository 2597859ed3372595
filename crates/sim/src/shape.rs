//! What the `market` offer model generates (see [`crate::market`] for how): the shape of the
//! books, as plain data that the workload description carries.

/// Most decades valuations may spread on either side of 1.
pub const VALUATION_DECADES_MAX: u8 = 6;
/// Accepted noise widths, in parts per million of the rate: 0.01% ..= 10%.
pub const SPREAD_PPM_MIN: u32 = 100;
pub const SPREAD_PPM_MAX: u32 = 100_000;

/// How the `market` model picks each offer's pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PairChoice {
    /// Every ordered pair equally likely.
    #[default]
    Uniform,
    /// Assets weighted by a power law: a few deep markets, many thin assets.
    PowerLaw,
}

impl PairChoice {
    pub const ALL: [PairChoice; 2] = [PairChoice::Uniform, PairChoice::PowerLaw];

    pub fn name(self) -> &'static str {
        match self {
            PairChoice::Uniform => "uniform",
            PairChoice::PowerLaw => "power-law",
        }
    }
}

impl std::str::FromStr for PairChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<PairChoice, String> {
        PairChoice::ALL
            .into_iter()
            .find(|choice| choice.name() == text)
            .ok_or_else(|| format!("unknown pair choice '{text}' (expected uniform or power-law)"))
    }
}

/// The `market` model's shape; the other models ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MarketShape {
    /// Standard deviation of the log distance of a limit from the valuation ratio, in ppm.
    pub spread_ppm: u32,
    pub pairs: PairChoice,
    /// Valuations spread over `10^-d ..= 10^d`.
    pub valuation_decades: u8,
}

impl Default for MarketShape {
    fn default() -> MarketShape {
        MarketShape {
            spread_ppm: 10_000,
            pairs: PairChoice::Uniform,
            valuation_decades: 2,
        }
    }
}

/// Why an offer workload cannot be generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OfferParamsError {
    #[error("assets must be 2..={max}, got {0}", max = walras_types::MAX_ASSETS)]
    Assets(usize),
    #[error(
        "spread must be {min}%..={max}% (got {got}%)",
        min = SPREAD_PPM_MIN as f64 / 1e4,
        max = SPREAD_PPM_MAX as f64 / 1e4,
        got = *.0 as f64 / 1e4
    )]
    Spread(u32),
    #[error("valuation decades must be 0..={VALUATION_DECADES_MAX} (got {0})")]
    ValuationDecades(u8),
}

impl MarketShape {
    pub fn validate(&self) -> Result<(), OfferParamsError> {
        if !(SPREAD_PPM_MIN..=SPREAD_PPM_MAX).contains(&self.spread_ppm) {
            return Err(OfferParamsError::Spread(self.spread_ppm));
        }
        if self.valuation_decades > VALUATION_DECADES_MAX {
            return Err(OfferParamsError::ValuationDecades(self.valuation_decades));
        }
        Ok(())
    }
}
