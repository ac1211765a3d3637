//! `weir kafka`: the Kafka chores around a pipeline without Kafka's own
//! tools — create the topics it reads and writes (`topic create`, `topic
//! list`), write a file of JSON lines to a topic keyed by a field
//! (`produce`), read what it wrote as a transactional reader must
//! (`consume --read-committed`). The work is done by
//! `weir_host::connectors::kafka::{admin, console}`, with the client
//! settings Weir's connectors use.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use weir_host::connectors::kafka::admin::{self, Created, TopicRequest};
use weir_host::connectors::kafka::check_properties;
use weir_host::connectors::kafka::console::{self, ReadOptions, ReadRecord};

/// Which brokers, and how to reach them.
#[derive(clap::Args)]
pub struct Brokers {
    /// The brokers, `host:port[,host:port…]`.
    #[arg(long, short = 'b', env = "WEIR_KAFKA_BOOTSTRAP", default_value = "localhost:9092")]
    bootstrap_servers: String,
    /// A client setting as librdkafka names it (`security.protocol=SASL_SSL`,
    /// `sasl.mechanism=PLAIN`, …), as a spec's `properties`; repeatable.
    #[arg(long = "property", short = 'X', value_name = "NAME=VALUE", value_parser = name_value)]
    properties: Vec<(String, String)>,
}

impl Brokers {
    /// The client settings, checked as a spec's `properties` are.
    fn properties(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let properties: BTreeMap<String, String> = self.properties.iter().cloned().collect();
        check_properties(&properties).map_err(|e| anyhow::anyhow!("--property: {e}"))?;
        Ok(properties)
    }
}

/// `weir kafka` subcommands.
#[derive(clap::Subcommand)]
pub enum KafkaCommand {
    /// Topics: create one, list them.
    Topic {
        #[command(subcommand)]
        command: TopicCommand,
    },
    /// Write each line of a file (`-`: standard input) to a topic as one
    /// record, waiting until the brokers acknowledged every one.
    Produce(ProduceArgs),
    /// Print the records of a topic, from the start of every partition to
    /// its end (or on, with --follow): each value on a line.
    Consume(ConsumeArgs),
}

/// `weir kafka topic` subcommands.
#[derive(clap::Subcommand)]
pub enum TopicCommand {
    /// Create a topic, and wait until the brokers list its partitions; a
    /// topic that exists is left as it is (said on stderr).
    Create {
        /// The topic.
        name: String,
        /// Its partitions: a pipeline's input runs one ingest unit per
        /// partition on workers.
        #[arg(long, short = 'p', default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..))]
        partitions: i32,
        /// Copies of each partition (default: the brokers'
        /// `default.replication.factor`).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
        replication_factor: Option<i32>,
        /// A topic config (`retention.ms=604800000`, `cleanup.policy=compact`);
        /// repeatable.
        #[arg(long, value_name = "NAME=VALUE", value_parser = name_value)]
        config: Vec<(String, String)>,
        #[command(flatten)]
        brokers: Brokers,
    },
    /// List the topics with their partition counts (Kafka's internal
    /// `__` topics left out).
    List {
        #[command(flatten)]
        brokers: Brokers,
    },
}

/// What `weir kafka produce` takes.
#[derive(clap::Args)]
pub struct ProduceArgs {
    /// The topic (it must exist).
    topic: String,
    /// The file: one record per line, blank lines skipped; `-` reads
    /// standard input.
    file: PathBuf,
    /// Key each record by this field of its line (a JSON object), so
    /// records with the same key land in the same partition, in order
    /// (e.g. orders by `customer_id`). Without it, records have no key.
    #[arg(long, short = 'k', value_name = "FIELD")]
    key_field: Option<String>,
    #[command(flatten)]
    brokers: Brokers,
}

/// What `weir kafka consume` takes.
#[derive(clap::Args)]
pub struct ConsumeArgs {
    /// The topic.
    topic: String,
    /// Only records of committed transactions (`isolation.level=read_committed`),
    /// as readers of an exactly-once sink must read.
    #[arg(long)]
    read_committed: bool,
    /// Stop after this many records.
    #[arg(long, short = 'n', value_name = "N")]
    max: Option<u64>,
    /// Keep reading past the end, printing records as they come (Ctrl-C
    /// stops).
    #[arg(long, short = 'f')]
    follow: bool,
    /// Print each record's key and a tab before its value.
    #[arg(long)]
    keys: bool,
    #[command(flatten)]
    brokers: Brokers,
}

/// Run `weir kafka`.
pub fn execute(command: KafkaCommand) -> anyhow::Result<()> {
    match command {
        KafkaCommand::Topic { command } => topic(command),
        KafkaCommand::Produce(args) => produce(args),
        KafkaCommand::Consume(args) => consume(args),
    }
}

fn topic(command: TopicCommand) -> anyhow::Result<()> {
    match command {
        TopicCommand::Create { name, partitions, replication_factor, config, brokers } => {
            let request = TopicRequest {
                name: name.clone(),
                partitions,
                replication_factor,
                configs: config.into_iter().collect(),
            };
            let properties = brokers.properties()?;
            match admin::create_topic(&brokers.bootstrap_servers, &properties, &request)? {
                Created::Created => {
                    eprintln!("created topic {name} ({partitions} partitions)");
                }
                Created::Existed { partitions: found }
                    if usize::try_from(partitions).ok() == Some(found) =>
                {
                    eprintln!("topic {name} exists already ({found} partitions): left as it is");
                }
                Created::Existed { partitions: found } => {
                    eprintln!(
                        "topic {name} exists already with {found} partitions, not {partitions}: left as it is"
                    );
                }
            }
        }
        TopicCommand::List { brokers } => {
            let properties = brokers.properties()?;
            let topics = admin::list_topics(&brokers.bootstrap_servers, &properties)?;
            let width = topics.iter().map(|t| t.name.len()).max().unwrap_or(5).max(5);
            println!("{:<width$}  PARTITIONS", "TOPIC");
            for topic in topics {
                println!("{:<width$}  {}", topic.name, topic.partitions);
            }
        }
    }
    Ok(())
}

fn produce(args: ProduceArgs) -> anyhow::Result<()> {
    let properties = args.brokers.properties()?;
    let key = args.key_field.as_deref();
    let bootstrap = &args.brokers.bootstrap_servers;
    let produced = if args.file.as_os_str() == "-" {
        let stdin = std::io::stdin().lock();
        console::produce_lines(bootstrap, &properties, &args.topic, stdin, "stdin", key)?
    } else {
        let file = std::fs::File::open(&args.file)
            .with_context(|| format!("opening {}", args.file.display()))?;
        let source = args.file.display().to_string();
        let reader = std::io::BufReader::new(file);
        console::produce_lines(bootstrap, &properties, &args.topic, reader, &source, key)?
    };
    let spread: Vec<String> =
        produced.per_partition.iter().map(|(p, n)| format!("{p}: {n}")).collect();
    eprintln!(
        "wrote {} records to {} (by partition: {})",
        produced.records,
        args.topic,
        if spread.is_empty() { "none".to_string() } else { spread.join(", ") }
    );
    Ok(())
}

fn consume(args: ConsumeArgs) -> anyhow::Result<()> {
    let properties = args.brokers.properties()?;
    let options = ReadOptions {
        read_committed: args.read_committed,
        max: args.max,
        follow: args.follow,
        from_end: false,
    };
    let mut out = std::io::stdout().lock();
    let mut failed = None;
    let mut print = |record: Option<&ReadRecord>| {
        let Some(record) = record else { return failed.is_none() };
        if failed.is_some() {
            return false;
        }
        let mut line = Vec::new();
        if args.keys {
            line.extend_from_slice(record.key.as_deref().unwrap_or_default());
            line.push(b'\t');
        }
        line.extend_from_slice(record.value.as_deref().unwrap_or_default());
        line.push(b'\n');
        // Flushed per record: a reader following a topic sees each at once.
        if let Err(error) = out.write_all(&line).and_then(|()| out.flush()) {
            failed = Some(error);
        }
        failed.is_none()
    };
    let read = console::read_records(
        &args.brokers.bootstrap_servers,
        &properties,
        &args.topic,
        options,
        &mut print,
    )?;
    if let Some(error) = failed {
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(error).context("writing to standard output");
        }
    }
    let how = if args.read_committed { " (read_committed)" } else { "" };
    eprintln!("read {read} records from {}{how}", args.topic);
    Ok(())
}

/// `NAME=VALUE` as a pair.
fn name_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("expected NAME=VALUE, not {text:?}")),
    }
}
