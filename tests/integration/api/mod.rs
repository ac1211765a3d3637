//! The HTTP API of a real `weir serve`, as a client or a tenant meets it:
//! functions and pipelines deployed, upgraded and deleted over HTTP,
//! graphs deployed from stored functions, who may call what (tokens,
//! roles, hosts, origins), what a deployed spec may touch on the host
//! (grants), credentials in a spec never shown (secrets), the operator's
//! limits on what a deploy may start and what readers may hold open
//! (reads), and the API fuzzed from its own OpenAPI document. Every test
//! here starts `weir serve` and talks to it over HTTP only (`pipelines`
//! also needs the Kafka broker).
//!
//! Run the area alone with `cargo test -p weir-cli --test integration
//! api::`.

mod access;
mod functions;
mod fuzz;
mod grants;
mod graph_pipelines;
mod limits;
mod pipelines;
mod reads;
mod secrets;
