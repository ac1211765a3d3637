//! What the host keeps for its users between runs: uploaded functions
//! (and, with the HTTP API, deployed pipelines).

mod functions;

pub use functions::{FunctionStore, FunctionVersion, RegistryError};
