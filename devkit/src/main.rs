//! `weir-dev`: what `scripts/dev` delegates to once the set-up and builds
//! are done. Usage:
//!
//! ```text
//! weir-dev kafka start [DIR] [NAME=VALUE...]   print the broker's bootstrap address
//! weir-dev kafka stop [DIR]
//! weir-dev s3 start [BUCKET...] | s3 stop       start prints the endpoint
//! weir-dev schema-registry start                print the registry API's URL
//! weir-dev schema-registry stop
//! weir-dev schemathesis                         print the path of `st`
//! weir-dev kubernetes-lint [DIR]                validate deploy/kubernetes (or DIR)
//! weir-dev test --functions DIR --weir PATH [--again-with DIR]
//! weir-dev bench-flink --functions DIR --weir PATH [KEYS...]
//! weir-dev window-diff --functions DIR --weir PATH [ORDERS [SEED]]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use weir_devkit::bench_flink::BenchFlink;
use weir_devkit::process::Lifetime;
use weir_devkit::test_run::TestRun;
use weir_devkit::window_diff::WindowDiff;
use weir_devkit::{kafka, kubernetes, python_tool, s3, schema_registry};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The repository this binary was built from.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("devkit/ has a parent").to_path_buf()
}

fn run(args: &[String]) -> Result<ExitCode> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["kafka", "start", rest @ ..] => {
            let (dir, configs) = match rest.first() {
                Some(dir) if !dir.contains('=') => (PathBuf::from(dir), &rest[1..]),
                _ => (kafka::default_dir(), rest),
            };
            let configs: Vec<String> = configs.iter().map(|c| c.to_string()).collect();
            println!("{}", kafka::start(&dir, &configs, Lifetime::Detached)?);
        }
        ["kafka", "stop"] => kafka::stop(&kafka::default_dir())?,
        ["kafka", "stop", dir] => kafka::stop(Path::new(dir))?,
        ["s3", "start", buckets @ ..] => {
            let endpoint = s3::start(Lifetime::Detached)?;
            for bucket in buckets {
                s3::create_bucket(&endpoint, bucket)?;
            }
            println!("{endpoint}");
        }
        ["s3", "stop"] => s3::stop()?,
        ["schema-registry", "start"] => println!("{}", schema_registry::start(Lifetime::Detached)?),
        ["schema-registry", "stop"] => schema_registry::stop()?,
        ["schemathesis"] => println!("{}", python_tool::SCHEMATHESIS.install()?.display()),
        ["kubernetes-lint"] => kubernetes::lint(&root().join("deploy/kubernetes"))?,
        ["kubernetes-lint", dir] => kubernetes::lint(Path::new(dir))?,
        ["test", rest @ ..] => {
            let mut flags = Flags::parse(rest, &["--functions", "--weir", "--again-with"])?;
            let run = TestRun {
                root: root(),
                functions: flags.required("--functions")?,
                weir: flags.required("--weir")?,
                again_with: flags.take("--again-with"),
            };
            flags.no_more()?;
            let (counts, passed) = run.run()?;
            println!("tests: {} passed, {} failed", counts.passed, counts.failed);
            return Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
        ["bench-flink", rest @ ..] => {
            let mut flags = Flags::parse(rest, &["--functions", "--weir"])?;
            let keys = flags
                .positional
                .drain(..)
                .map(|k| k.parse().with_context(|| format!("a key count, not {k}")))
                .collect::<Result<Vec<u64>>>()?;
            let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
            let pairs = env("WEIR_BENCH_PAIRS", "3");
            let bench = BenchFlink {
                root: root(),
                weir: flags.required("--weir")?,
                functions: flags.required("--functions")?,
                workloads: env("WEIR_BENCH_WORKLOADS", "sum").split_whitespace().map(str::to_owned).collect(),
                keys: if keys.is_empty() { vec![10_000, 1_000_000, 10_000_000] } else { keys },
                events: env("WEIR_BENCH_EVENTS", "10000000").parse().context("WEIR_BENCH_EVENTS")?,
                pairs: match pairs.parse() {
                    Ok(n) if n > 0 => n,
                    _ => bail!("WEIR_BENCH_PAIRS must be a positive number, not '{pairs}'"),
                },
            };
            flags.no_more()?;
            bench.run()?;
        }
        ["window-diff", rest @ ..] => {
            let mut flags = Flags::parse(rest, &["--functions", "--weir"])?;
            let mut numbers = flags.positional.drain(..).map(|n| {
                n.parse::<u64>().with_context(|| format!("a number, not {n}"))
            });
            let orders = numbers.next().transpose()?.unwrap_or(20_000);
            let seed = numbers.next().transpose()?.unwrap_or(1);
            if let Some(extra) = numbers.next() {
                bail!("unexpected argument {}", extra?);
            }
            drop(numbers);
            let diff = WindowDiff {
                root: root(),
                weir: flags.required("--weir")?,
                function: flags.required("--functions")?.join("windowed-revenue.wasm"),
                orders: usize::try_from(orders)?,
                seed,
                parallelisms: vec![1, 3],
            };
            flags.no_more()?;
            diff.run()?;
        }
        _ => bail!(
            "usage: weir-dev kafka start [DIR] [NAME=VALUE...] | kafka stop [DIR] | s3 start [BUCKET...] | s3 stop | \
             schema-registry start | schema-registry stop | schemathesis | kubernetes-lint [DIR] | \
             test --functions DIR --weir PATH [--again-with DIR] | \
             bench-flink --functions DIR --weir PATH [KEYS...] | \
             window-diff --functions DIR --weir PATH [ORDERS [SEED]]"
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `--name VALUE` flags (each at most once) and positional words.
struct Flags {
    values: Vec<(String, PathBuf)>,
    positional: Vec<String>,
}

impl Flags {
    fn parse(args: &[&str], known: &[&str]) -> Result<Flags> {
        let mut flags = Flags { values: Vec::new(), positional: Vec::new() };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            if arg.starts_with("--") {
                if !known.contains(arg) {
                    bail!("unknown flag {arg} (known: {})", known.join(", "));
                }
                let value = args.next().with_context(|| format!("{arg} needs a value"))?;
                flags.values.push((arg.to_string(), PathBuf::from(value)));
            } else {
                flags.positional.push(arg.to_string());
            }
        }
        Ok(flags)
    }

    fn take(&mut self, name: &str) -> Option<PathBuf> {
        let index = self.values.iter().position(|(flag, _)| flag == name)?;
        Some(self.values.remove(index).1)
    }

    fn required(&mut self, name: &str) -> Result<PathBuf> {
        self.take(name).with_context(|| format!("{name} is required"))
    }

    fn no_more(&self) -> Result<()> {
        if let Some((flag, _)) = self.values.first() {
            bail!("{flag} given twice");
        }
        if let Some(word) = self.positional.first() {
            bail!("unexpected argument {word}");
        }
        Ok(())
    }
}
