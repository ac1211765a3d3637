//! `weir token new`: a fresh API token and the tokens file line that
//! grants it (see `weir serve --tokens`).

use weir_host::api::access::{new_token, token_line, Role};

/// The token commands.
#[derive(clap::Subcommand)]
pub enum TokenCommand {
    /// Print a fresh random token and the line to add to the tokens file
    /// (which keeps only its hash).
    New(NewArgs),
}

/// What `weir token new` takes.
#[derive(clap::Args)]
pub struct NewArgs {
    /// What the token may do: read, deploy or admin.
    #[arg(long)]
    role: Role,
    /// A label for the line (who holds the token), e.g. `ci`.
    #[arg(long)]
    label: Option<String>,
}

/// Run a token command.
pub fn execute(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::New(args) => {
            if let Some(label) = &args.label {
                anyhow::ensure!(
                    !label.is_empty() && !label.contains(['\n', '\r', '#']),
                    "--label {label:?}: a label is one line without `#`"
                );
            }
            let token = new_token()?;
            println!("token: {token}");
            println!("line:  {}", token_line(args.role, &token, args.label.as_deref()));
            eprintln!(
                "Give the token to its holder; add the line to the tokens file of `weir serve \
                 --tokens FILE` (it is read again within a second, or at once on SIGHUP). The \
                 token is not shown again."
            );
            Ok(())
        }
    }
}
