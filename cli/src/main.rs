//! The `weir` command: parses arguments and hands each subcommand to its
//! module in [`commands`], which calls the library (`weir-host`, and
//! `weir-bench` for `weir bench`).

mod commands;

use std::process::ExitCode;

use clap::Parser as _;
use commands::{Cli, Command};

/// mimalloc: events, keys and batches are allocated on one thread and freed
/// on another (source → subtask → sink), which glibc's allocator handles
/// slowly (≈15 % of a benchmark's CPU went to its free lists). Built
/// without asking for transparent huge pages (`no_thp`, workspace
/// Cargo.toml): the kernel zeroing a fresh 2 MiB page ran at 0.4–2.3 GB/s
/// on the VM measured against 3 GB/s for 4 KiB pages, and was 28 % of the
/// CPU of a running sum over 10 M keys. The state cache's large tables ask
/// for huge pages themselves ([`weir_host::state::allow_advised_huge_pages`]).
///
/// It also replaces `malloc` for the C and C++ linked in (the `override`
/// feature): librdkafka allocates and frees each message, op and header
/// on its own threads, and in a worker of 12 units glibc's arenas spent
/// 22 % of the process's CPU (`_int_malloc`, `_int_free`,
/// `malloc_consolidate`); with mimalloc an event cost 13 % less CPU on a
/// worker, the same in one process, and RocksDB's peak RSS at 10 M keys
/// stayed where it was (541 against 562 MB).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // mimalloc turned huge pages off for the whole process as it started.
    weir_host::state::allow_advised_huge_pages();
    // Kept to the end: dropping it sends the spans still queued.
    let _telemetry = weir_host::telemetry::Telemetry::init();
    let result = match Cli::parse().command {
        Command::Run(args) => commands::run::run(args),
        #[cfg(feature = "bench")]
        Command::Bench(args) => commands::bench::bench(&args),
        Command::Savepoint(args) => commands::snapshots::savepoint(args),
        Command::Stop(args) => commands::snapshots::stop(args),
        Command::Serve(args) => commands::serve::serve(args),
        Command::Function { command } => commands::function::execute(command),
        Command::Pipeline { command } => commands::pipeline::execute(command),
        Command::Checkpoints { command } => commands::checkpoints::execute(command),
        Command::Token { command } => commands::token::execute(command),
        Command::Worker(args) => commands::worker::execute(args),
        Command::Cluster(args) => commands::cluster::execute(args),
        Command::Kafka { command } => commands::kafka::execute(command),
        Command::Schema { command } => commands::schema::execute(command),
        Command::Init(args) => commands::project::init(&args),
        Command::Build(args) => commands::project::build(&args),
        Command::Inspect(args) => commands::wasm::inspect(&args),
        Command::Componentize(args) => commands::wasm::componentize(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", commands::print::one_line(&error));
            ExitCode::FAILURE
        }
    }
}
