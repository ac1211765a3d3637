//! Names a user gives things: pipelines, functions, side outputs, operator
//! uids, transactional id prefixes. One rule for all of them, so a name is
//! always safe as a file name, a metric label and a URL segment.
//!
//! This module depends on nothing else of the crate; everything that checks
//! a name uses [`is_valid_name`] and says what is wrong with [`NAME_RULE`].

/// The rule every name follows, as error messages state it.
pub const NAME_RULE: &str = "1 to 63 of a-z, 0-9 and -";

/// Whether `name` follows [`NAME_RULE`].
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_one_rule() {
        assert!(is_valid_name("orders-2"));
        assert!(is_valid_name(&"a".repeat(63)));
        for bad in ["", "Orders", "a_b", "a/b", "..", "ü", &"a".repeat(64)] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }
}
