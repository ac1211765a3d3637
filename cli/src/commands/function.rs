//! `weir function …`: functions on a `weir serve`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

use super::print::{print_function_list, print_function_version};
use super::server::ServerArgs;

/// What `weir function` does.
#[derive(Subcommand)]
pub enum FunctionCommand {
    /// Upload a `.wasm` file as the next version of function NAME.
    Upload {
        /// The function's name (`[a-z0-9-]{1,63}`).
        name: String,
        /// A component, or a core module carrying a component type.
        wasm: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the functions and their versions.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Run a `weir function` command.
pub fn execute(command: FunctionCommand) -> anyhow::Result<()> {
    match command {
        FunctionCommand::Upload { name, wasm, server } => {
            let bytes =
                std::fs::read(&wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
            let version = server.client()?.upload_function(&name, bytes)?;
            server.print(&version, print_function_version)
        }
        FunctionCommand::List { server } => {
            let list = server.client()?.list_functions()?;
            server.print(&list, print_function_list)
        }
    }
}
