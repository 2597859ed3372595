//! The entry point of the offer generators: one model per [`OfferModel`].

use crate::market::market;
use crate::offers::{
    cycles, skewed_volume, wide_valuations, GeneratedOffers, OfferModel, OfferWorkload,
};

/// Generates the workload's offers. Deterministic: the same workload gives the same offers (for
/// a given build and platform, see the crate docs).
///
/// # Panics
/// If the workload is invalid (see [`OfferWorkload::validate`]).
pub fn generate_offers(workload: &OfferWorkload) -> GeneratedOffers {
    if let Err(message) = workload.validate() {
        panic!("invalid offer workload: {message}");
    }
    match workload.model {
        OfferModel::Cycles => cycles(workload),
        OfferModel::SkewedVolume => skewed_volume(workload),
        OfferModel::WideValuations => wide_valuations(workload),
        OfferModel::Market => market(workload),
    }
}
