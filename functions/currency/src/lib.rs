//! Per-customer totals in US dollars, converting each amount with a rate
//! table read from the directory a pipeline grants with `resources:`.
//!
//! Input: JSON `{"customer":"c1","amount_cents":250,"currency":"EUR"}`
//! (`amount_cents` a whole number of hundredths of the currency, negative
//! for refunds). Key: the customer. State: a `ValueState<i64>` called
//! `"usd_total"` per customer, in US cents. Output, one per input event at
//! its timestamp: `{"customer":"c1","usd_cents":275,"usd_total":N}`.
//!
//! ## The rate table
//! The host preopens the pipeline's `resources:` directory read-only at
//! guest path `/resources`; the function reads `/resources/rates.txt`
//! through WASI 0.2 (`wasi:filesystem/preopens` and `wasi:filesystem/types`
//! @0.2.12, see `wit/world.wit`) on its first `process` call and keeps it
//! for the life of the instance. Each line is `CODE RATE`, meaning
//! 1.00 CODE = RATE/100 USD (`EUR 110`: one euro is 1.10 dollars); blank
//! lines and lines starting with `#` are ignored. USD is converted only if
//! the table lists it (`USD 100`). See [`Rates::parse`].
//!
//! ## Arithmetic
//! Integers only: `usd_cents = amount_cents * rate / 100`, rounded half
//! away from zero (`5` cents at `110` is 5.5 → `6`; `-5` → `-6`), see
//! [`to_usd_cents`]. Overflow is an error, never a wrapped total.
//!
//! ## Errors
//! No `/resources` preopen, a missing or unreadable `rates.txt`, a
//! malformed line (named by number), an unknown currency (named) and
//! overflow each fail the call with a message saying so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_sdk::{function, Context, Error, Event, KeyFunction, ProcessFunction, ValueState};

/// The guest path the host preopens the pipeline's resources at.
pub const RESOURCES_DIR: &str = "/resources";

/// The rate table's file name inside [`RESOURCES_DIR`].
pub const RATES_FILE: &str = "rates.txt";

/// Largest rate table read, in bytes.
pub const MAX_RATES_BYTES: u64 = 1 << 20;

/// The error when the pipeline grants no resources directory.
pub const NO_RESOURCES: &str =
    "no resources directory: grant one with `resources:` in the pipeline spec";

/// One input event.
#[derive(Deserialize)]
struct Payment {
    customer: String,
    amount_cents: i64,
    currency: String,
}

/// One output record.
#[derive(Serialize)]
struct Converted<'a> {
    customer: &'a str,
    usd_cents: i64,
    usd_total: i64,
}

/// Exchange rates to US dollars, in hundredths of a dollar per unit of
/// each currency.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rates {
    by_currency: BTreeMap<String, i64>,
}

impl Rates {
    /// Parse a rate table: one `CODE RATE` per line (separated by spaces
    /// or tabs), `RATE` a positive whole number of US cents per unit of
    /// `CODE`. Blank lines and lines whose first non-blank character is
    /// `#` are ignored. A line that is not two fields, a rate that is not
    /// a positive integer and a currency listed twice are errors naming
    /// the line (numbered from 1).
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut by_currency = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [code, rate] = fields[..] else {
                return Err(Error::msg(format!("{RATES_FILE} line {number}: expected `CODE RATE` (for example `EUR 110`), found {:?}", shown(line))));
            };
            let rate = rate
                .parse::<i64>()
                .ok()
                .filter(|rate| *rate > 0)
                .ok_or_else(|| Error::msg(format!("{RATES_FILE} line {number}: the rate of {} must be a positive whole number of US cents, found {:?}", shown(code), shown(rate))))?;
            if by_currency.insert(code.to_string(), rate).is_some() {
                return Err(Error::msg(format!(
                    "{RATES_FILE} line {number}: {} is listed twice",
                    shown(code)
                )));
            }
        }
        Ok(Self { by_currency })
    }

    /// US cents per unit of `currency`, if the table lists it.
    pub fn rate(&self, currency: &str) -> Option<i64> {
        self.by_currency.get(currency).copied()
    }

    /// `amount_cents` of `currency` in US cents (see [`to_usd_cents`]).
    pub fn to_usd(&self, currency: &str, amount_cents: i64) -> Result<i64, Error> {
        let rate = self.rate(currency).ok_or_else(|| {
            Error::msg(format!(
                "unknown currency {:?}: {RATES_FILE} has no rate for it",
                shown(currency)
            ))
        })?;
        to_usd_cents(amount_cents, rate).ok_or_else(|| {
            Error::msg(format!("{amount_cents} cents of {} overflow in US cents", shown(currency)))
        })
    }
}

/// `amount_cents * rate / 100`, rounded half away from zero; `None` if the
/// result does not fit an `i64`.
pub fn to_usd_cents(amount_cents: i64, rate: i64) -> Option<i64> {
    let product = i128::from(amount_cents) * i128::from(rate);
    let (quotient, remainder) = (product / 100, product % 100);
    let rounded = if remainder.abs() >= 50 { quotient + product.signum() } else { quotient };
    i64::try_from(rounded).ok()
}

/// `text` cut to 64 characters, for error messages about hostile input.
fn shown(text: &str) -> &str {
    text.char_indices().nth(64).map_or(text, |(end, _)| &text[..end])
}

/// The function: keyed by customer, keeping each customer's USD total.
pub struct Currency {
    usd_total: ValueState<i64>,
    /// The rate table, once read.
    rates: Option<Rates>,
}

impl Default for Currency {
    fn default() -> Self {
        Self { usd_total: ValueState::new("usd_total"), rates: None }
    }
}

#[function]
impl KeyFunction for Currency {
    fn key(&mut self, event: &Event) -> Result<Vec<u8>, Error> {
        let payment: Payment = event.json()?;
        Ok(payment.customer.into_bytes())
    }
}

#[function]
impl ProcessFunction for Currency {
    fn process(&mut self, _key: &[u8], events: &[Event], ctx: &mut Context) -> Result<(), Error> {
        let rates = match self.rates.take() {
            Some(rates) => rates,
            None => load_rates()?,
        };
        let rates = self.rates.insert(rates);
        let mut total = self.usd_total.get()?.unwrap_or(0);
        for event in events {
            let payment: Payment = event.json()?;
            let usd_cents = rates.to_usd(&payment.currency, payment.amount_cents)?;
            total = total.checked_add(usd_cents).ok_or_else(|| {
                Error::msg(format!("the US total of {} overflows", shown(&payment.customer)))
            })?;
            ctx.emit(Event::from_json(
                &Converted { customer: &payment.customer, usd_cents, usd_total: total },
                event.timestamp,
            )?);
        }
        self.usd_total.set(&total)
    }
}

/// Read and parse `/resources/rates.txt`.
fn load_rates() -> Result<Rates, Error> {
    let bytes = resources::read_rates_file()?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| Error::msg(format!("{RESOURCES_DIR}/{RATES_FILE} is not UTF-8: {e}")))?;
    Rates::parse(text)
}

/// Reading the rate table through WASI 0.2.
#[cfg(target_arch = "wasm32")]
mod resources {
    use super::{Error, MAX_RATES_BYTES, NO_RESOURCES, RATES_FILE, RESOURCES_DIR};

    /// Bindings to the WASI filesystem imports.
    #[allow(missing_docs, unsafe_code, clippy::all)]
    mod bindings {
        wit_bindgen::generate!({
            path: "wit",
            world: "weir-test:currency/resources",
            generate_all,
        });
    }

    use bindings::wasi::filesystem::preopens;
    use bindings::wasi::filesystem::types::{DescriptorFlags, ErrorCode, OpenFlags, PathFlags};

    /// How many bytes one `read` asks for.
    const CHUNK: u64 = 64 << 10;

    /// A WASI file system error code as text: its name and meaning.
    fn describe(code: ErrorCode) -> String {
        format!("{} ({})", code.name(), code.message().trim_end_matches('.'))
    }

    /// The bytes of `rates.txt` in the preopened `/resources` directory.
    pub(super) fn read_rates_file() -> Result<Vec<u8>, Error> {
        let directory = preopens::get_directories()
            .into_iter()
            .find_map(|(descriptor, path)| {
                (path.trim_end_matches('/') == RESOURCES_DIR).then_some(descriptor)
            })
            .ok_or_else(|| Error::msg(NO_RESOURCES))?;
        let path = format!("{RESOURCES_DIR}/{RATES_FILE}");
        let file = directory
            .open_at(PathFlags::empty(), RATES_FILE, OpenFlags::empty(), DescriptorFlags::READ)
            .map_err(|code| match code {
                ErrorCode::NoEntry => Error::msg(format!(
                    "missing {path}: put a {RATES_FILE} in the pipeline's resources directory"
                )),
                code => Error::msg(format!("cannot open {path}: {}", describe(code))),
            })?;
        let mut bytes = Vec::new();
        loop {
            let offset = bytes.len() as u64;
            let (chunk, end) = file
                .read(CHUNK, offset)
                .map_err(|code| Error::msg(format!("cannot read {path}: {}", describe(code))))?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > MAX_RATES_BYTES {
                return Err(Error::msg(format!("{path} is larger than {MAX_RATES_BYTES} bytes")));
            }
            if end || chunk.is_empty() {
                return Ok(bytes);
            }
        }
    }
}

/// Natively there are no preopens: the table must be given directly.
#[cfg(not(target_arch = "wasm32"))]
mod resources {
    use super::{Error, NO_RESOURCES};

    /// Always the "no resources directory" error.
    pub(super) fn read_rates_file() -> Result<Vec<u8>, Error> {
        Err(Error::msg(NO_RESOURCES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_sdk::testing::Harness;

    const TABLE: &str = "# rates to USD, in cents\nEUR 110\n\n  GBP\t127  \r\nJPY 1\nUSD 100\n";

    fn payment(customer: &str, amount_cents: i64, currency: &str) -> Event {
        Event::new(format!(r#"{{"customer":"{customer}","amount_cents":{amount_cents},"currency":"{currency}"}}"#).into_bytes(), 42)
    }

    fn harness() -> Harness<Currency> {
        let mut harness = Harness::<Currency>::new();
        harness.function().rates = Some(Rates::parse(TABLE).unwrap());
        harness
    }

    #[test]
    fn parses_rates_skipping_blanks_and_comments() {
        let rates = Rates::parse(TABLE).unwrap();
        assert_eq!(rates.rate("EUR"), Some(110));
        assert_eq!(rates.rate("GBP"), Some(127));
        assert_eq!(rates.rate("USD"), Some(100));
        assert_eq!(rates.rate("CHF"), None);
        assert_eq!(Rates::parse("").unwrap(), Rates::default());
    }

    #[test]
    fn malformed_lines_are_named() {
        let error = Rates::parse("EUR 110\nGBP\n").unwrap_err();
        assert!(error.message().starts_with("rates.txt line 2: expected `CODE RATE`"), "{error}");
        let error = Rates::parse("# x\nEUR 1.10\n").unwrap_err();
        assert!(
            error
                .message()
                .starts_with("rates.txt line 2: the rate of EUR must be a positive whole number"),
            "{error}"
        );
        assert!(Rates::parse("EUR 0").is_err());
        assert!(Rates::parse("EUR -5").is_err());
        assert!(Rates::parse("EUR 110 extra").is_err());
        let error = Rates::parse("EUR 110\nEUR 111").unwrap_err();
        assert_eq!(error.message(), "rates.txt line 2: EUR is listed twice");
    }

    #[test]
    fn converts_with_rounding_half_away_from_zero() {
        assert_eq!(to_usd_cents(250, 110), Some(275));
        assert_eq!(to_usd_cents(5, 110), Some(6));
        assert_eq!(to_usd_cents(-5, 110), Some(-6));
        assert_eq!(to_usd_cents(4, 110), Some(4));
        assert_eq!(to_usd_cents(-4, 110), Some(-4));
        assert_eq!(to_usd_cents(1, 149), Some(1));
        assert_eq!(to_usd_cents(1, 150), Some(2));
        assert_eq!(to_usd_cents(0, 110), Some(0));
        assert_eq!(to_usd_cents(i64::MAX, 100), Some(i64::MAX));
        assert_eq!(to_usd_cents(i64::MAX, 200), None);
    }

    #[test]
    fn unknown_currencies_are_named() {
        let error = Rates::parse(TABLE).unwrap().to_usd("CHF", 100).unwrap_err();
        assert_eq!(error.message(), r#"unknown currency "CHF": rates.txt has no rate for it"#);
    }

    #[test]
    fn keys_by_customer() {
        let mut harness = harness();
        assert_eq!(harness.key(&payment("c1", 250, "EUR")).unwrap(), b"c1");
        assert!(harness.key(&Event::new(b"{}".to_vec(), 0)).is_err());
    }

    #[test]
    fn keeps_a_usd_total_per_customer() {
        let mut harness = harness();
        let out = harness
            .process(b"c1", vec![payment("c1", 250, "EUR"), payment("c1", 1000, "GBP")])
            .unwrap();
        assert_eq!(out[0].value, br#"{"customer":"c1","usd_cents":275,"usd_total":275}"#);
        assert_eq!(out[1].value, br#"{"customer":"c1","usd_cents":1270,"usd_total":1545}"#);
        assert_eq!(out[1].timestamp, 42);
        harness.process(b"c2", vec![payment("c2", 300, "JPY")]).unwrap();
        harness.process(b"c1", vec![payment("c1", -100, "USD")]).unwrap();
        assert_eq!(harness.value::<i64>(b"c1", "usd_total"), Some(1445));
        assert_eq!(harness.value::<i64>(b"c2", "usd_total"), Some(3));
    }

    #[test]
    fn an_unknown_currency_fails_the_call() {
        let mut harness = harness();
        let error = harness.process(b"c1", vec![payment("c1", 1, "XXX")]).unwrap_err();
        assert!(error.message().contains(r#"unknown currency "XXX""#), "{error}");
    }

    #[test]
    fn without_a_resources_directory_the_call_fails() {
        let mut harness = Harness::<Currency>::new();
        let error = harness.process(b"c1", vec![payment("c1", 250, "EUR")]).unwrap_err();
        assert_eq!(error.message(), NO_RESOURCES);
    }
}
