//! `weir schema types`: the types of a schema's JSON events, in Rust,
//! Python or TypeScript, for function authors (see
//! `weir_host::formats::types`).

use std::path::PathBuf;

use anyhow::Context as _;
use weir_host::formats::types::{generate, Language};
use weir_host::formats::{Format, SchemaRegistryConfig};

/// `weir schema` subcommands.
#[derive(clap::Subcommand)]
pub enum SchemaCommand {
    /// Print types describing the JSON events of a schema (what a source
    /// of that schema hands to functions): Rust structs with serde,
    /// Python TypedDicts, TypeScript interfaces. The schema is a file
    /// (.avsc, .proto, .json) or a registry subject's version.
    Types(TypesArgs),
}

/// What `weir schema types` takes.
#[derive(clap::Args)]
pub struct TypesArgs {
    /// The schema's file; or give --registry and --subject.
    file: Option<PathBuf>,
    /// The language: rust, python or typescript.
    #[arg(long)]
    lang: String,
    /// The schema's format: avro, protobuf or json-schema (default: from
    /// the file's extension, or the registry's schema type).
    #[arg(long)]
    format: Option<String>,
    /// A schema registry's base URL to read the schema from.
    #[arg(long, requires = "subject")]
    registry: Option<String>,
    /// The registry subject (e.g. `orders-value`).
    #[arg(long, requires = "registry")]
    subject: Option<String>,
    /// The subject's version.
    #[arg(long, default_value = "latest")]
    version: String,
    /// Protobuf: the message to type (default: the schema's first).
    #[arg(long)]
    record: Option<String>,
}

/// Dispatch a `weir schema` subcommand.
pub fn execute(command: SchemaCommand) -> anyhow::Result<()> {
    match command {
        SchemaCommand::Types(args) => types(&args),
    }
}

fn types(args: &TypesArgs) -> anyhow::Result<()> {
    let language = Language::parse(&args.lang)
        .with_context(|| format!("--lang {}: rust, python or typescript", args.lang))?;
    let named = args
        .format
        .as_deref()
        .map(|name| {
            serde_json::from_value::<Format>(serde_json::Value::String(name.into()))
                .ok()
                .filter(|f| f.uses_registry())
                .with_context(|| format!("--format {name}: avro, protobuf or json-schema"))
        })
        .transpose()?;
    let (format, schema) = match (&args.file, &args.registry, &args.subject) {
        (Some(file), None, None) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let by_extension = match file.extension().and_then(|e| e.to_str()) {
                Some("avsc") => Some(Format::Avro),
                Some("proto") => Some(Format::Protobuf),
                Some("json") => Some(Format::JsonSchema),
                _ => None,
            };
            let format = named.or(by_extension).with_context(|| {
                format!("{}: give --format (avro, protobuf or json-schema)", file.display())
            })?;
            (format, text)
        }
        (None, Some(url), Some(subject)) => {
            let registry =
                SchemaRegistryConfig { url: url.clone(), properties: Default::default() };
            let (held, text) =
                registry.subject_schema(subject, &args.version).map_err(anyhow::Error::msg)?;
            (named.unwrap_or(held), text)
        }
        _ => anyhow::bail!("give a schema file, or --registry URL with --subject NAME"),
    };
    let code = generate(format, &schema, args.record.as_deref(), language)
        .map_err(|e| anyhow::anyhow!("{} schema: {e}", format.name()))?;
    print!("{code}");
    Ok(())
}
