//! Developer tooling for Weir's repository, in tested code rather than in
//! shell: the services the tests run against and the runs `scripts/dev`
//! starts.
//!
//! * [`kafka`]: a real Apache Kafka broker (single-node KRaft) — jars from
//!   Maven once, started, stopped and killed; [`s3`]: an S3-compatible
//!   server (moto); [`schema_registry`]: a Confluent-compatible schema
//!   registry (Apicurio Registry, built once with Maven);
//!   [`python_tool`]: pinned PyPI tools in their own virtual environments
//!   (moto, schemathesis).
//! * [`process`]: how a service is started — detached for later runs, or
//!   owned, so the kernel kills it when its owner dies however it dies —
//!   waited for and stopped.
//! * [`test_run`]: `scripts/dev test`'s suites with the services they
//!   need, and [`summary`]: counting passed and failed tests across the
//!   runners' outputs.
//! * [`bench_flink`]: `scripts/dev bench-flink`'s side-by-side table;
//!   [`window_diff`]: `scripts/dev window-diff`, Weir's windows against
//!   Flink's, firing by firing (also an integration test).
//! * [`fault_proxy`]: a TCP proxy that stalls or cuts connections on
//!   command (storage and network faults against the real servers).
//! * [`kubernetes`]: `scripts/dev lint`'s offline validation of
//!   `deploy/kubernetes/` (kubeconform, schemas from the Kubernetes API's
//!   OpenAPI documents).
//!
//! The integration tests use [`kafka`], [`s3`], [`schema_registry`] and
//! [`python_tool`] directly; `scripts/dev` runs the `weir-dev` binary for
//! the rest.

pub mod bench_flink;
pub mod fault_proxy;
pub mod kafka;
pub mod kubernetes;
pub mod process;
pub mod python_tool;
pub mod s3;
pub mod schema_registry;
pub mod summary;
pub mod test_run;
pub mod window_diff;
