//! Exact money amounts: integer cents parsed from decimal text, never
//! through floating point, so sums do not drift.

use std::fmt;

use crate::Error;

/// An amount of money in integer cents.
///
/// ```
/// use weir_sdk::Cents;
/// let total = Cents::parse("0.10").unwrap() + Cents::parse("0.20").unwrap();
/// assert_eq!(total.to_string(), "0.30");
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Cents(pub i64);

impl Cents {
    /// Parse a decimal amount such as `20`, `7.5` or `-12.25` (at most two
    /// decimals). Surrounding quotes are ignored, so the raw text of a JSON
    /// number or string both work.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let text = text.trim().trim_matches('"');
        let bad =
            || Error::msg(format!("amount {text:?} is not a decimal with at most two decimals"));
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() || fraction.len() > 2 {
            return Err(bad());
        }
        // Digit by digit: no allocation, overflow checked (this runs per event).
        let cents = whole
            .bytes()
            .chain(fraction.bytes())
            .chain(std::iter::repeat_n(b'0', 2 - fraction.len()))
            .try_fold(0i64, |cents, digit| {
                let digit = digit.is_ascii_digit().then(|| i64::from(digit - b'0'))?;
                cents.checked_mul(10)?.checked_add(digit)
            })
            .ok_or_else(bad)?;
        Ok(Self(if negative { -cents } else { cents }))
    }

    /// The sum, or an error on overflow.
    pub fn checked_add(self, other: Self) -> Result<Self, Error> {
        self.0.checked_add(other.0).map(Self).ok_or_else(|| Error::msg("amount overflows"))
    }

    /// The amount as JSON number text with two decimals, e.g. `50.00`.
    #[cfg(feature = "json")]
    pub fn to_json_number(self) -> Box<serde_json::value::RawValue> {
        let mut text = [0u8; 24];
        let text = self.write_decimal(&mut text);
        serde_json::value::RawValue::from_string(text.to_owned()).expect("a decimal is valid JSON")
    }

    /// Write the amount with two decimals at the end of `buffer` (room for
    /// any `i64`), without the formatting machinery: this runs per event.
    fn write_decimal(self, buffer: &mut [u8; 24]) -> &str {
        let mut at = buffer.len();
        let mut put = |byte: u8| {
            at -= 1;
            buffer[at] = byte;
        };
        let mut abs = self.0.unsigned_abs();
        for _ in 0..2 {
            put(b'0' + (abs % 10) as u8);
            abs /= 10;
        }
        put(b'.');
        loop {
            put(b'0' + (abs % 10) as u8);
            abs /= 10;
            if abs == 0 {
                break;
            }
        }
        if self.0 < 0 {
            put(b'-');
        }
        std::str::from_utf8(&buffer[at..]).expect("ASCII digits")
    }
}

impl std::ops::Add for Cents {
    type Output = Cents;

    /// Panics on overflow in debug builds; use [`Cents::checked_add`] for
    /// untrusted totals.
    fn add(self, other: Self) -> Self {
        Self(self.0 + other.0)
    }
}

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.write_decimal(&mut [0u8; 24]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_amounts_exactly() {
        assert_eq!(Cents::parse("20.00").unwrap(), Cents(2000));
        assert_eq!(Cents::parse("7.5").unwrap(), Cents(750));
        assert_eq!(Cents::parse("\"12\"").unwrap(), Cents(1200));
        assert_eq!(Cents::parse("-0.05").unwrap(), Cents(-5));
        assert_eq!(Cents(-5).to_string(), "-0.05");
        assert_eq!(Cents(5000).to_string(), "50.00");
        assert_eq!(Cents(7).to_string(), "0.07");
        assert_eq!(Cents(i64::MIN).to_string(), "-92233720368547758.08");
        assert_eq!(Cents::parse("92233720368547758.07").unwrap(), Cents(i64::MAX));
        assert_eq!(Cents::parse("3.1").unwrap(), Cents(310));
        for bad in ["1.234", "abc", "", "1e3", "--1", ".", "99999999999999999999"] {
            assert!(Cents::parse(bad).is_err(), "{bad} should be rejected");
        }
        assert!(Cents(i64::MAX).checked_add(Cents(1)).is_err());
    }
}
