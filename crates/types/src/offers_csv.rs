//! The offers and fills CSV formats of the command-line contract.
//!
//! Offers: header `offer_id,account,sell,buy,amount,min_price`; assets are 0..N-1, `amount` a
//! positive integer, `min_price` a positive decimal (units of `buy` per unit of `sell`).
//! Fills: header `offer_id,sold,bought`, one row per offer that traded.
//!
//! The reader checks every row and reports the first problem with its line number (the header is
//! line 1); it never panics on any input. A UTF-8 byte-order mark before the header (as some
//! spreadsheets write) is accepted; a NUL byte or text that is not UTF-8 is refused as not a
//! text CSV. Messages quote at most [`QUOTED_BYTES_MAX`] bytes of the input, so a huge line
//! does not flood the terminal.

use crate::{AccountId, AssetId, Offer, OfferId, Price, PriceError, MAX_AMOUNT};
use std::collections::HashMap;
use std::io::{self, BufRead, Write};

pub const OFFERS_HEADER: &str = "offer_id,account,sell,buy,amount,min_price";
pub const FILLS_HEADER: &str = "offer_id,sold,bought";
/// The most bytes of input an error message quotes; longer text is cut with an ellipsis.
pub const QUOTED_BYTES_MAX: usize = 200;
/// The UTF-8 byte-order mark.
const BYTE_ORDER_MARK: char = '\u{feff}';

/// A problem in an offers CSV, naming the line.
///
/// `Io` deliberately reports no `source()`: its message already quotes the I/O error, and the
/// hand-written `Error` impl this replaces had none, so error chains print the same text.
#[derive(Debug, thiserror::Error)]
pub enum OffersCsvError {
    #[error("reading offers: {0}")]
    Io(io::Error),
    /// The line is not UTF-8 text.
    #[error("line {line}: not UTF-8 text: the offers file must be a UTF-8 CSV")]
    NotText { line: usize },
    /// The line holds a NUL byte (a binary file, or UTF-16 text).
    #[error(
        "line {line}: contains a NUL byte: the offers file must be a UTF-8 CSV (a binary or UTF-16 file?)"
    )]
    NulByte { line: usize },
    #[error("offers file is empty: expected header '{}'", OFFERS_HEADER)]
    Empty,
    #[error("line 1: expected header '{}', found '{found}'", OFFERS_HEADER)]
    Header { found: String },
    #[error("line {line}: expected 6 comma-separated fields, found {found}")]
    FieldCount { line: usize, found: usize },
    #[error("line {line}: {column} '{text}' {reason}")]
    Field {
        line: usize,
        column: &'static str,
        text: String,
        reason: String,
    },
    #[error("line {line}: {column} asset {asset} is unknown (assets are 0..{})", .assets - 1)]
    UnknownAsset {
        line: usize,
        column: &'static str,
        asset: u64,
        assets: usize,
    },
    #[error("line {line}: offer sells and buys the same asset {asset}")]
    SameAsset { line: usize, asset: u16 },
    #[error("line {line}: amount '{text}' {reason}")]
    Amount {
        line: usize,
        text: String,
        reason: &'static str,
    },
    #[error("line {line}: min_price {error}")]
    Price { line: usize, error: PriceError },
    #[error("line {line}: offer_id {offer_id} was already used on line {first_line}")]
    DuplicateOfferId {
        line: usize,
        offer_id: u64,
        first_line: usize,
    },
    #[error("line {line}: offers of asset {asset} add up to more than the issuance cap 2^63-1")]
    AssetTotalTooLarge { line: usize, asset: u16 },
}

/// Reads and validates an offers CSV for an exchange of `assets` assets. Records are split by
/// the `csv` crate (quoted fields, `\r\n` endings, a record's line number); fields are trimmed;
/// blank lines are skipped.
pub fn read_offers(input: impl BufRead, assets: usize) -> Result<Vec<Offer>, OffersCsvError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(LineEnds {
            inner: input,
            read: 0,
            ends: Vec::new(),
        });
    let mut record = csv::ByteRecord::new();
    if !read_record(&mut reader, &mut record)? {
        return Err(OffersCsvError::Empty);
    }
    let header = text_fields(&record, 1)?.join(",");
    let header = header.strip_prefix(BYTE_ORDER_MARK).unwrap_or(&header);
    if header.trim() != OFFERS_HEADER {
        return Err(OffersCsvError::Header {
            found: quoted(header),
        });
    }
    let mut offers = Vec::new();
    let mut first_line_of_id: HashMap<u64, usize> = HashMap::new();
    let mut total_per_asset = vec![0u64; assets];
    while read_record(&mut reader, &mut record)? {
        let line_number = reader.get_ref().line_ending_at(reader.position().byte());
        let fields = text_fields(&record, line_number)?;
        if fields.iter().all(|field| field.is_empty()) {
            continue;
        }
        let offer = parse_row(&fields, line_number, assets)?;
        if let Some(&first_line) = first_line_of_id.get(&offer.id.0) {
            return Err(OffersCsvError::DuplicateOfferId {
                line: line_number,
                offer_id: offer.id.0,
                first_line,
            });
        }
        first_line_of_id.insert(offer.id.0, line_number);
        let total = &mut total_per_asset[offer.sell.0 as usize];
        *total = total
            .checked_add(offer.amount)
            .filter(|sum| *sum <= MAX_AMOUNT)
            .ok_or(OffersCsvError::AssetTotalTooLarge {
                line: line_number,
                asset: offer.sell.0,
            })?;
        offers.push(offer);
    }
    Ok(offers)
}

/// The input, passed through, noting where each line ends: a record's byte offset then gives
/// its line number (the csv reader's own line count leaves out the blank lines it skips).
struct LineEnds<R> {
    inner: R,
    read: u64,
    /// Byte offsets of the `\n`s read so far.
    ends: Vec<u64>,
}

impl<R: io::Read> io::Read for LineEnds<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buf)?;
        for (at, byte) in buf[..count].iter().enumerate() {
            if *byte == b'\n' {
                self.ends.push(self.read + at as u64);
            }
        }
        self.read += count as u64;
        Ok(count)
    }
}

impl<R> LineEnds<R> {
    /// The 1-based line of a record the reader stopped after at byte `after` (just past its
    /// `\n`, or the end of the input): the line its last byte is on. (Where the record starts
    /// is no help: the reader's start position is before the blank lines it skipped.)
    fn line_ending_at(&self, after: u64) -> usize {
        let last = after.saturating_sub(1);
        1 + self.ends.partition_point(|end| *end < last)
    }
}

/// The next record into `record`; false at the end of the input.
fn read_record<R: io::Read>(
    reader: &mut csv::Reader<R>,
    record: &mut csv::ByteRecord,
) -> Result<bool, OffersCsvError> {
    reader
        .read_byte_record(record)
        .map_err(|error| match error.into_kind() {
            csv::ErrorKind::Io(error) => OffersCsvError::Io(error),
            other => OffersCsvError::Io(io::Error::other(format!("{other:?}"))),
        })
}

/// A record's fields as text: not UTF-8 and NUL bytes are errors naming the line.
fn text_fields(record: &csv::ByteRecord, line: usize) -> Result<Vec<&str>, OffersCsvError> {
    record
        .iter()
        .map(|field| {
            if field.contains(&0) {
                return Err(OffersCsvError::NulByte { line });
            }
            std::str::from_utf8(field).map_err(|_| OffersCsvError::NotText { line })
        })
        .collect()
}

/// `text` as an error message may quote it: at most [`QUOTED_BYTES_MAX`] bytes (cut at a
/// character boundary), then an ellipsis.
pub fn quoted(text: &str) -> String {
    if text.len() <= QUOTED_BYTES_MAX {
        return text.to_string();
    }
    let mut end = QUOTED_BYTES_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The price error with its quoted text cut to [`QUOTED_BYTES_MAX`] bytes.
fn quoted_price_error(error: PriceError) -> PriceError {
    match error {
        PriceError::Malformed(text) => PriceError::Malformed(quoted(&text)),
        PriceError::NotPositive(text) => PriceError::NotPositive(quoted(&text)),
        PriceError::TooManyDigits(text) => PriceError::TooManyDigits(quoted(&text)),
        PriceError::OutOfRange { text, min, max } => PriceError::OutOfRange {
            text: quoted(&text),
            min,
            max,
        },
    }
}

fn parse_row(fields: &[&str], line: usize, assets: usize) -> Result<Offer, OffersCsvError> {
    if fields.len() != 6 {
        return Err(OffersCsvError::FieldCount {
            line,
            found: fields.len(),
        });
    }
    let integer = |column: &'static str, text: &str| -> Result<u64, OffersCsvError> {
        text.parse::<u64>().map_err(|_| OffersCsvError::Field {
            line,
            column,
            text: quoted(text),
            reason: "is not a non-negative integer".to_string(),
        })
    };
    let asset = |column: &'static str, text: &str| -> Result<AssetId, OffersCsvError> {
        let asset = integer(column, text)?;
        if asset >= assets as u64 {
            return Err(OffersCsvError::UnknownAsset {
                line,
                column,
                asset,
                assets,
            });
        }
        Ok(AssetId(asset as u16))
    };
    let id = OfferId(integer("offer_id", fields[0])?);
    let account = AccountId(integer("account", fields[1])?);
    let sell = asset("sell", fields[2])?;
    let buy = asset("buy", fields[3])?;
    if sell == buy {
        return Err(OffersCsvError::SameAsset {
            line,
            asset: sell.0,
        });
    }
    let amount = parse_amount(fields[4], line)?;
    let min_price = Price::parse_limit(fields[5]).map_err(|error| OffersCsvError::Price {
        line,
        error: quoted_price_error(error),
    })?;
    Ok(Offer {
        id,
        account,
        sell,
        buy,
        amount,
        min_price,
    })
}

fn parse_amount(text: &str, line: usize) -> Result<u64, OffersCsvError> {
    let error = |reason| OffersCsvError::Amount {
        line,
        text: quoted(text),
        reason,
    };
    if text.starts_with('-') {
        return Err(error("must be positive"));
    }
    let amount: u64 = text.parse().map_err(|_| {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            error("exceeds the issuance cap 2^63-1")
        } else {
            error("is not an integer")
        }
    })?;
    if amount == 0 {
        return Err(error("must be positive"));
    }
    if amount > MAX_AMOUNT {
        return Err(error("exceeds the issuance cap 2^63-1"));
    }
    Ok(amount)
}

/// Writes offers in the contract's CSV format. Limit prices are written as the shortest decimal
/// that reads back to exactly the same [`Price`].
pub fn write_offers(out: impl Write, offers: &[Offer]) -> io::Result<()> {
    let mut writer = csv::Writer::from_writer(out);
    writer
        .write_record(OFFERS_HEADER.split(','))
        .map_err(io_error)?;
    for offer in offers {
        writer
            .write_record([
                offer.id.0.to_string(),
                offer.account.0.to_string(),
                offer.sell.0.to_string(),
                offer.buy.0.to_string(),
                offer.amount.to_string(),
                offer.min_price.to_exact_decimal(),
            ])
            .map_err(io_error)?;
    }
    writer.flush()
}

/// The writer's I/O error as itself (csv's own conversion wraps it as `ErrorKind::Other`, which
/// hides a closed pipe from the caller that stops quietly on one).
fn io_error(error: csv::Error) -> io::Error {
    match error.into_kind() {
        csv::ErrorKind::Io(error) => error,
        other => io::Error::other(format!("{other:?}")),
    }
}

/// One row of the fills CSV: how much an offer sold and how much it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillRow {
    pub offer_id: OfferId,
    pub sold: u64,
    pub bought: u64,
}

/// Writes fills in the contract's CSV format.
pub fn write_fills(out: impl Write, fills: impl IntoIterator<Item = FillRow>) -> io::Result<()> {
    let mut writer = csv::Writer::from_writer(out);
    writer
        .write_record(FILLS_HEADER.split(','))
        .map_err(io_error)?;
    for fill in fills {
        writer
            .write_record([
                fill.offer_id.0.to_string(),
                fill.sold.to_string(),
                fill.bought.to_string(),
            ])
            .map_err(io_error)?;
    }
    writer.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(text: &str, assets: usize) -> Result<Vec<Offer>, OffersCsvError> {
        read_offers(text.as_bytes(), assets)
    }

    fn error_text(text: &str, assets: usize) -> String {
        read(text, assets).unwrap_err().to_string()
    }

    const HEADER: &str = "offer_id,account,sell,buy,amount,min_price\n";

    #[test]
    fn reads_valid_rows_and_round_trips() {
        let text = format!("{HEADER}1,7,0,1,100,1.5\n2,8,1,0,50,0.000000001\n");
        let offers = read(&text, 2).unwrap();
        assert_eq!(offers.len(), 2);
        assert_eq!(offers[0].amount, 100);
        assert_eq!(offers[1].sell, AssetId(1));
        let mut written = Vec::new();
        write_offers(&mut written, &offers).unwrap();
        let again = read(std::str::from_utf8(&written).unwrap(), 2).unwrap();
        assert_eq!(again, offers);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            (
                format!("{HEADER}1,7,0,1,100,1.5\n2,7,0,x\n"),
                "line 3: expected 6",
            ),
            (
                format!("{HEADER}1,7,0,5,100,1.5\n"),
                "line 2: buy asset 5 is unknown",
            ),
            (
                format!("{HEADER}1,7,0,1,-3,1.5\n"),
                "line 2: amount '-3' must be positive",
            ),
            (
                format!("{HEADER}1,7,0,1,0,1.5\n"),
                "line 2: amount '0' must be positive",
            ),
            (
                format!("{HEADER}1,7,0,1,1.5,1.5\n"),
                "line 2: amount '1.5' is not an integer",
            ),
            (
                format!("{HEADER}1,7,0,1,9,0\n"),
                "line 2: min_price '0' must be positive",
            ),
            (
                format!("{HEADER}1,7,0,1,9,-1\n"),
                "line 2: min_price '-1' must be positive",
            ),
            (
                format!("{HEADER}1,7,0,1,9,abc\n"),
                "line 2: min_price 'abc' is not a decimal",
            ),
            (
                format!("{HEADER}1,7,0,1,9,1\n\n1,8,1,0,9,1\n"),
                "line 4: offer_id 1 was already",
            ),
            (
                format!("{HEADER}1,7,1,1,9,1\n"),
                "line 2: offer sells and buys the same",
            ),
            (
                format!("{HEADER}1,7,0,1,9223372036854775807,1\n2,7,0,1,1,1\n"),
                "line 3: offers of asset 0 add up",
            ),
            (
                format!("{HEADER}1,7,0,1,99999999999999999999,1\n"),
                "exceeds the issuance cap",
            ),
            ("offer,account\n".to_string(), "line 1: expected header"),
            (String::new(), "offers file is empty"),
        ];
        for (text, expected) in cases {
            let message = error_text(&text, 3);
            assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        }
    }

    /// Trigger: `1e300` as a limit price was refused as outside "0..=2^64", a range no
    /// other message names, while `1e13` said the limit range.
    #[test]
    fn a_huge_price_names_the_same_range_as_any_other_out_of_range_price() {
        let huge = error_text(&format!("{HEADER}1,7,0,1,9,1e300\n"), 2);
        let large = error_text(&format!("{HEADER}1,7,0,1,9,1e13\n"), 2);
        let range = |message: &str| message.split("range ").nth(1).map(str::to_string);
        assert!(range(&large).is_some(), "{large}");
        assert_eq!(range(&huge), range(&large), "{huge} vs {large}");
        assert!(!huge.contains("2^64"), "{huge}");
    }

    /// The `csv` reader: quoted fields and `\r\n` line endings are read as a spreadsheet
    /// writes them, and a bad row is still named by its line (blank lines counted).
    #[test]
    fn quoted_fields_and_crlf_lines_read_and_bad_rows_keep_their_line() {
        let text = "offer_id,account,sell,buy,amount,min_price\r\n\"1\",7,0,1,\" 100 \",\"1.5\"\r\n\r\n2,8,1,0,50,2\r\n";
        let offers = read(text, 2).unwrap();
        assert_eq!(offers.len(), 2);
        assert_eq!((offers[0].amount, offers[1].amount), (100, 50));
        let bad = format!("{text}3,9,0,1,\"1,5\",1\r\n");
        assert!(error_text(&bad, 2).starts_with("line 5: amount '1,5' is not an integer"));
    }

    /// Trigger: a header saved with a UTF-8 byte-order mark (spreadsheets do) was refused as
    /// "expected header ..., found '\u{feff}offer_id,...'", which looks identical.
    #[test]
    fn a_header_with_a_byte_order_mark_is_accepted() {
        let offers = read(&format!("\u{feff}{HEADER}1,7,0,1,100,1.5\n"), 2).unwrap();
        assert_eq!(offers.len(), 1);
    }

    /// Trigger: a NUL byte in a row (a binary or UTF-16 file) was reported as a bad field
    /// quoting invisible text.
    #[test]
    fn a_nul_byte_is_refused_as_not_a_text_csv() {
        let message = error_text(&format!("{HEADER}1,7,0,1,100,1.5\n2,7,0\x001,100,1.5\n"), 2);
        assert!(
            message.starts_with("line 3: contains a NUL byte"),
            "{message}"
        );
        let not_utf8 = read_offers(
            &b"offer_id,account,sell,buy,amount,min_price\n\xff\n"[..],
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(not_utf8.starts_with("line 2: not UTF-8 text"), "{not_utf8}");
    }

    /// Trigger: a 20 KB field (or header) was echoed whole in the error message.
    #[test]
    fn errors_quote_at_most_200_bytes_of_input() {
        let long = "9".repeat(20_000);
        let cases = [
            format!("{HEADER}{long}x,7,0,1,100,1.5\n"),
            format!("{HEADER}1,7,0,1,{long}x,1.5\n"),
            format!("{HEADER}1,7,0,1,100,{long}x\n"),
            format!("{HEADER}1,7,0,1,100,{long}\n"),
            format!("{long}\n"),
            format!("{HEADER}1,7,0,1,100,é{}\n", "é".repeat(10_000)),
        ];
        for text in cases {
            let message = error_text(&text, 2);
            assert!(
                message.len() < QUOTED_BYTES_MAX + 200,
                "{} bytes: {message:.300}",
                message.len()
            );
            assert!(message.contains('…'), "{message}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(body in "[0-9a-z,.\\-\\n ]{0,200}") {
            let _ = read(&format!("{HEADER}{body}"), 4);
        }
    }
    #[test]
    fn an_unknown_asset_names_the_last_known_one() {
        let error = OffersCsvError::UnknownAsset {
            line: 4,
            column: "sell",
            asset: 9,
            assets: 3,
        };
        assert_eq!(
            error.to_string(),
            "line 4: sell asset 9 is unknown (assets are 0..2)"
        );
        assert_eq!(
            OffersCsvError::Empty.to_string(),
            "offers file is empty: expected header 'offer_id,account,sell,buy,amount,min_price'"
        );
    }
}
