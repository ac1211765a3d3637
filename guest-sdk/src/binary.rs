//! A compact binary order: what the host's generator source produces with
//! `encoding: binary`, for functions (and benchmarks) that should not pay
//! for JSON.
//!
//! ```
//! use weir_sdk::binary::Order;
//! let order = Order { order_id: 7, customer_id: 3, amount_cents: 1250 };
//! assert_eq!(Order::decode(&order.encode()).unwrap(), order);
//! ```

use crate::Error;

/// One order: 24 bytes, `order_id`, `customer_id` (u64) and `amount_cents`
/// (i64), little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    /// The order's id (1, 2, …).
    pub order_id: u64,
    /// The customer (1..=keys).
    pub customer_id: u64,
    /// The amount in cents.
    pub amount_cents: i64,
}

/// Bytes of an encoded [`Order`].
pub const ORDER_BYTES: usize = 24;

impl Order {
    /// Read an order; an error unless `bytes` is exactly [`ORDER_BYTES`] long.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let field =
            |i: usize| -> [u8; 8] { bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default() };
        if bytes.len() != ORDER_BYTES {
            return Err(Error::msg(format!(
                "a binary order is {ORDER_BYTES} bytes, not {}",
                bytes.len()
            )));
        }
        Ok(Self {
            order_id: u64::from_le_bytes(field(0)),
            customer_id: u64::from_le_bytes(field(1)),
            amount_cents: i64::from_le_bytes(field(2)),
        })
    }

    /// The order's bytes.
    #[inline]
    pub fn encode(&self) -> [u8; ORDER_BYTES] {
        let mut out = [0; ORDER_BYTES];
        out[..8].copy_from_slice(&self.order_id.to_le_bytes());
        out[8..16].copy_from_slice(&self.customer_id.to_le_bytes());
        out[16..].copy_from_slice(&self.amount_cents.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_lengths_are_errors() {
        assert!(Order::decode(&[0; 23]).is_err());
        assert!(Order::decode(&[0; 25]).is_err());
        let order = Order { order_id: u64::MAX, customer_id: 1, amount_cents: -5 };
        assert_eq!(Order::decode(&order.encode()).unwrap(), order);
    }
}
