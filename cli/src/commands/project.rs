//! `weir init` and `weir build`: start a function project and build it.

use std::path::PathBuf;

use weir_host::project::{self, ProjectLanguage};
use weir_host::units::format_bytes;

/// What `weir init` takes.
#[derive(clap::Args)]
pub struct InitArgs {
    /// The project's name (lowercase letters, digits and '-'); also its
    /// directory unless `--dir` says otherwise.
    name: String,
    /// The language of the function.
    #[arg(long, value_enum, default_value_t = ProjectLanguage::Rust)]
    lang: ProjectLanguage,
    /// Where to create the project (default: `./<name>`).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// What `weir build` takes.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Where to write the component (default: `<dir>/build/<name>.wasm`).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Write the project; print its files and what to do next.
pub fn init(args: &InitArgs) -> anyhow::Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    let created = project::init::init(&args.name, args.lang, &dir)?;
    println!("created {} ({}):", created.dir.display(), args.lang);
    for file in &created.files {
        println!("  {file}");
    }
    let test = match args.lang {
        ProjectLanguage::Rust => "cargo test",
        ProjectLanguage::Python => "python3 -m pytest",
        ProjectLanguage::Typescript => "npm install && npm test",
    };
    println!(
        "next:\n  cd {}\n  {test}\n  weir build\n  weir run pipeline.yaml --fresh",
        dir.display()
    );
    Ok(())
}

/// Build the project; print the component.
pub fn build(args: &BuildArgs) -> anyhow::Result<()> {
    let built = project::build::build(&args.dir, args.output.as_deref())?;
    println!("built {} ({}, {})", built.path.display(), built.language, format_bytes(built.bytes));
    Ok(())
}
