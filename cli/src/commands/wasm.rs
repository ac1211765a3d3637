//! `weir inspect` and `weir componentize`: work on a `.wasm` file alone.

use std::path::PathBuf;

use anyhow::Context as _;
use weir_host::runtime::{componentize as to_component, digest, new_engine, FunctionLoader};

/// What `weir inspect` takes.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// A component, or a core module carrying a component type.
    wasm: PathBuf,
}

/// What `weir componentize` takes.
#[derive(clap::Args)]
pub struct ComponentizeArgs {
    /// The core module (a component is copied unchanged).
    input: PathBuf,
    /// Where to write the component.
    output: PathBuf,
}

/// Load the file as a function; print its digest, worlds, imports, exports.
pub fn inspect(args: &InspectArgs) -> anyhow::Result<()> {
    let wasm = &args.wasm;
    let bytes = std::fs::read(wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
    let engine = new_engine(Default::default()).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let function = FunctionLoader::new(engine, None)?
        .load(&bytes)
        .with_context(|| wasm.display().to_string())?;
    println!("digest: sha256:{}", function.digest);
    println!(
        "worlds: {}",
        if function.worlds().is_empty() {
            "none".to_string()
        } else {
            function.worlds().join(", ")
        }
    );
    println!("language: {}", function.language);
    println!("imports: {}", function.imports.join(", "));
    println!("exports: {}", function.exports.join(", "));
    Ok(())
}

/// Write the file as a component; print where and its digest.
pub fn componentize(args: &ComponentizeArgs) -> anyhow::Result<()> {
    let (input, output) = (&args.input, &args.output);
    let bytes = std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
    let component = to_component(&bytes).with_context(|| input.display().to_string())?;
    std::fs::write(output, &component)
        .with_context(|| format!("cannot write {}", output.display()))?;
    println!("{} (sha256:{})", output.display(), digest(&component));
    Ok(())
}
