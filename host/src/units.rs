//! Sizes as people write and read them (`64MiB`, `1.5 GiB`), and
//! durations in whole milliseconds. Depends on nothing else of the crate.

/// Whole milliseconds of `duration`, saturated at `u64::MAX`.
pub fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Bytes in the largest binary unit they reach: exact when they divide
/// evenly (`64 MiB`), else to one decimal (`1.5 MiB`); below 1 KiB, bytes.
pub fn format_bytes(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift {
            return if bytes.is_multiple_of(1 << shift) {
                format!("{} {unit}", bytes >> shift)
            } else {
                format!("{:.1} {unit}", bytes as f64 / (1u64 << shift) as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// Parse a size such as `64MiB`, `512 KiB`, `1GiB` or `1048576` (bytes).
pub fn parse_bytes(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" | "K" | "KB" => 10,
        "MiB" | "M" | "MB" => 20,
        "GiB" | "G" | "GB" => 30,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_bytes("64MiB"), Some(64 << 20));
        assert_eq!(parse_bytes("512 KiB"), Some(512 << 10));
        assert_eq!(parse_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("12 parsecs"), None);
        assert_eq!(parse_bytes("MiB"), None);
        assert_eq!(parse_bytes("99999999999999999999GiB"), None);
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(1000), "1000 bytes");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }
}
