//! The one error type functions return.

use std::fmt;

/// An error from a function or from the host's state API.
///
/// Any `std::error::Error` converts into it with `?`, so handlers can use
/// serde, parsing and state calls freely. When a handler returns an error
/// the host fails the pipeline with this message.
pub struct Error {
    message: String,
}

impl Error {
    /// An error with the given message.
    pub fn msg(message: impl fmt::Display) -> Self {
        Self { message: message.to_string() }
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Self::msg(error)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
