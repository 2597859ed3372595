//! [`OfferExplanationJson`], the wire form of an [`OfferExplanation`].

use crate::tracer::{OfferExplanation, OfferStatus};
use walras_api::wire::OfferExplanationJson;

impl From<&OfferExplanation> for OfferExplanationJson {
    fn from(explanation: &OfferExplanation) -> OfferExplanationJson {
        let details = explanation.details;
        let latest = explanation.latest;
        let known = explanation.status != OfferStatus::Unknown;
        OfferExplanationJson {
            offer_id: explanation.offer.id.0,
            status: explanation.status.name().to_string(),
            height: explanation.height(),
            account: known.then_some(explanation.offer.account.0),
            sell_asset: details.map(|d| u32::from(d.sell.0)),
            buy_asset: details.map(|d| u32::from(d.buy.0)),
            limit_price: details.map(|d| d.key.min_price.to_exact_decimal()),
            clearing_rate: latest.map(|l| l.rate.to_exact_decimal()),
            amount: details.map(|d| d.amount.to_string()),
            sold: latest.map(|_| explanation.sold_total.to_string()),
            received: latest.map(|_| explanation.received_total.to_string()),
            reason_code: known.then(|| explanation.reason_code().to_string()),
            out_of_money_bp: latest.and_then(|l| l.out_of_money).map(|bp| bp.to_string()),
            volume_ahead: latest
                .filter(|l| l.limit <= l.rate)
                .map(|l| l.volume_ahead.to_string()),
            summary: explanation.summary(),
        }
    }
}
