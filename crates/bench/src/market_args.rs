//! Options of the `market` offer model, shared by `walras gen offers` and `walras bench clearing`.

use walras_sim::market::{SPREAD_PPM_MAX, SPREAD_PPM_MIN, VALUATION_DECADES_MAX};
use walras_sim::{MarketShape, PairChoice};

/// The `market` model's shape on the command line.
#[derive(clap::Args, Debug, Clone)]
pub struct MarketArgs {
    /// market model: standard deviation of limit prices around the rate, as a percentage
    /// (`0.1%`) or a fraction (`0.001`); 0.01%..=10%
    #[arg(long, default_value = "1%", value_parser = spread_ppm)]
    pub spread: u32,
    /// market model: how pairs are chosen, uniform or power-law (thin assets)
    #[arg(long, default_value = "uniform")]
    pub pairs: PairChoice,
    /// market model: valuations spread over 10^-D..=10^D (0..=6)
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=VALUATION_DECADES_MAX as i64))]
    pub valuation_decades: u8,
}

impl MarketArgs {
    pub fn shape(&self) -> MarketShape {
        MarketShape {
            spread_ppm: self.spread,
            pairs: self.pairs,
            valuation_decades: self.valuation_decades,
        }
    }
}

/// A spread as a percentage (`0.1%`) or a plain fraction (`0.001`), in parts per million.
pub fn spread_ppm(text: &str) -> Result<u32, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(number) => (number, 1e4),
        None => (text, 1e6),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a spread: write 0.1% or 0.001"))?;
    let ppm = (value * scale).round();
    if !ppm.is_finite() || ppm < SPREAD_PPM_MIN as f64 || ppm > SPREAD_PPM_MAX as f64 {
        return Err(format!(
            "spread '{text}' is outside {}%..={}%",
            SPREAD_PPM_MIN as f64 / 1e4,
            SPREAD_PPM_MAX as f64 / 1e4
        ));
    }
    Ok(ppm as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_parse_as_percentages_or_fractions_and_refuse_the_rest() {
        assert_eq!(spread_ppm("1%"), Ok(10_000));
        assert_eq!(spread_ppm("0.05%"), Ok(500));
        assert_eq!(spread_ppm("0.001"), Ok(1_000));
        for bad in ["", "%", "abc", "-1%", "50%", "0.0001%", "NaN", "inf%"] {
            assert!(spread_ppm(bad).is_err(), "{bad}");
        }
    }
}
