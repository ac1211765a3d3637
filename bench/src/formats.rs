//! `weir bench --workload sum-avro,sum-protobuf`: workload (a), the
//! running sum per customer (`bench-json`), over the same generated orders
//! in JSON, Avro and Protobuf (the schema registry's wire format): from a
//! file (JSON lines; length-delimited records) and, given a broker, from a
//! Kafka topic. Each format's events/s is reported as a ratio to JSON's
//! from the same input in the same repeat, so the table says what reading
//! a registry format costs or saves against JSON.
//!
//! Inside a pipeline every event is JSON (see `weir_host::formats`): a
//! registry-format source decodes each record into JSON once, as it reads
//! it, and the function reads the same JSON either way. So the ratio
//! weighs the decoding into JSON against what JSON costs on its own (a
//! file source checks each line is JSON; a Kafka source passes JSON on
//! unread) and against the bytes saved (Avro and Protobuf records are
//! about a third of the JSON's size).

use std::io::Write;
use std::path::{Path, PathBuf};

use rdkafka::producer::BaseRecord;
use weir_host::connectors::kafka::{send_waiting, serve_deliveries};
use weir_host::connectors::{Encoding, GeneratorSource, Source};
use weir_host::formats::{
    Format, RecordEncoder, SchemaRegistryConfig, SinkSchema, SubjectStrategy,
};

use super::cluster::{flush, kafka_fail, Kafka};
use super::{median_of, BenchError, Implementation, Measurement, SpecRun};

/// The orders' Avro schema (the generator's JSON orders' fields).
const AVRO_ORDER: &str = r#"{"type":"record","name":"Order","namespace":"weir.bench","fields":[
    {"name":"order_id","type":"long"},
    {"name":"customer_id","type":"long"},
    {"name":"amount","type":"double"},
    {"name":"event_time","type":"string"}]}"#;

/// The orders' Protobuf schema.
const PROTOBUF_ORDER: &str = "syntax = \"proto3\";\npackage weir.bench;\n\nmessage Order {\n  int64 order_id = 1;\n  int64 customer_id = 2;\n  double amount = 3;\n  string event_time = 4;\n}\n";

/// What the format benchmark runs.
#[derive(Debug, Clone)]
pub struct FormatSuite {
    /// Orders per run.
    pub events: u64,
    /// Distinct customers.
    pub keys: u64,
    /// The registry formats to compare with JSON (Avro, Protobuf).
    pub formats: Vec<Format>,
    /// The schema registry's base URL.
    pub registry: String,
    /// A broker (`host:port`) for the Kafka inputs; none: files only.
    pub kafka: Option<String>,
    /// Checkpoint every second.
    pub checkpoints: bool,
    /// Where `bench-json.wasm` is.
    pub functions_dir: PathBuf,
    /// Scratch space for the input files and the runs' data.
    pub scratch: PathBuf,
    /// Runs per case; medians are reported.
    pub repeat: usize,
    /// Print one JSON object per run instead of the table.
    pub json: bool,
}

/// Where a run's orders come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    File,
    Kafka,
}

impl Input {
    fn name(self) -> &'static str {
        match self {
            Input::File => "file",
            Input::Kafka => "kafka",
        }
    }
}

/// The prepared inputs: each format's file, and topic when a broker is
/// given.
struct Inputs {
    files: Vec<(Format, PathBuf)>,
    topics: Vec<(Format, String)>,
}

/// Run `suite` with the `weir` binary at `weir`, writing the table (or
/// JSON lines) to `out`.
pub fn run_formats(
    suite: &FormatSuite,
    weir: &Path,
    out: &mut dyn Write,
) -> Result<(), BenchError> {
    let write = |e: std::io::Error| BenchError::Io(format!("writing the results: {e}"));
    let formats: Vec<Format> = std::iter::once(Format::Json).chain(suite.formats.clone()).collect();
    let kafka = suite.kafka.as_deref().map(Kafka::new).transpose()?;
    let inputs = prepare(suite, &formats, kafka.as_ref())?;
    let mut cases: Vec<(Input, Format)> =
        inputs.files.iter().map(|(format, _)| (Input::File, *format)).collect();
    cases.extend(inputs.topics.iter().map(|(format, _)| (Input::Kafka, *format)));
    // Compile the function once, before anything is measured.
    let warm_up = pipeline(
        suite,
        "{ type: generator, count: 1000, keys: 10, seed: 7, encoding: json }",
        Implementation::Wasm,
    );
    run(weir, suite, "warm-up", &warm_up)?;
    // runs[case][repeat] = [wasm, native]
    let mut runs: Vec<Vec<[Measurement; 2]>> = vec![Vec::new(); cases.len()];
    for repeat in 0..suite.repeat.max(1) {
        for (index, &(input, format)) in cases.iter().enumerate() {
            let mut pair: [Measurement; 2] = Default::default();
            for (slot, implementation) in
                [Implementation::Wasm, Implementation::Native].into_iter().enumerate()
            {
                let source = match input {
                    Input::File => file_source(suite, &inputs, format),
                    Input::Kafka => kafka_source(suite, &inputs, format),
                };
                let spec = pipeline(suite, &source, implementation);
                let label = format!("{} {} {implementation:?}", input.name(), format.name());
                pair[slot] = run(weir, suite, &label, &spec)?;
                if pair[slot].events != suite.events {
                    return Err(BenchError::Run {
                        case: label,
                        message: format!("read {} orders of {}", pair[slot].events, suite.events),
                    });
                }
                if suite.json {
                    let line = serde_json::json!({
                        "workload": "formats", "input": input.name(), "format": format.name(),
                        "keys": suite.keys, "checkpoints": suite.checkpoints, "repeat": repeat,
                        "implementation": if slot == 0 { "wasm" } else { "native" },
                        "measurement": pair[slot], "events_per_second": pair[slot].rate(),
                    });
                    writeln!(out, "{line}").map_err(write)?;
                }
            }
            runs[index].push(pair);
        }
    }
    if suite.json {
        return Ok(());
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    writeln!(
        out,
        "{} ({cores} cores); {} orders per run, {} customers; median of {} runs; running sum (bench-json), parallelism 2, discard sink; checkpoints {}",
        super::cluster::cpu_model(),
        suite.events,
        suite.keys,
        suite.repeat.max(1),
        if suite.checkpoints { "every 1s" } else { "off" }
    )
    .map_err(write)?;
    writeln!(
        out,
        "{:<6} {:<9} {:>12} {:>12} {:>9} {:>9} {:>12} {:>9}",
        "input",
        "format",
        "wasm ev/s",
        "native ev/s",
        "wasm/json",
        "nat/json",
        "µs cpu/ev",
        "bytes/ev"
    )
    .map_err(write)?;
    for (index, &(input, format)) in cases.iter().enumerate() {
        let json = cases.iter().position(|&c| c == (input, Format::Json)).unwrap_or(index);
        let ratio = |slot: usize| {
            median_of(
                runs[index]
                    .iter()
                    .zip(&runs[json])
                    .map(|(own, json)| own[slot].rate_over(&json[slot]))
                    .collect(),
            )
        };
        let rate = |slot: usize| median_of(runs[index].iter().map(|p| p[slot].rate()).collect());
        let cpu = median_of(
            runs[index].iter().map(|p| p[0].cpu_seconds * 1e6 / p[0].events as f64).collect(),
        );
        let bytes = match input {
            Input::File => inputs
                .files
                .iter()
                .find(|(f, _)| *f == format)
                .and_then(|(_, path)| std::fs::metadata(path).ok())
                .map_or(String::from("-"), |m| {
                    format!("{:.1}", m.len() as f64 / suite.events as f64)
                }),
            Input::Kafka => String::from("-"),
        };
        writeln!(
            out,
            "{:<6} {:<9} {:>12.0} {:>12.0} {:>9.2} {:>9.2} {:>12.2} {:>9}",
            input.name(),
            format.name(),
            rate(0),
            rate(1),
            ratio(0),
            ratio(1),
            cpu,
            bytes
        )
        .map_err(write)?;
    }
    if let Some(kafka) = &kafka {
        kafka.delete_topics_containing(&topic_prefix(suite));
    }
    Ok(())
}

/// Write the orders in every format to files (and topics), their schemas
/// registered.
fn prepare(
    suite: &FormatSuite,
    formats: &[Format],
    kafka: Option<&Kafka>,
) -> Result<Inputs, BenchError> {
    let io = |what: String| move |e: std::io::Error| BenchError::Io(format!("{what}: {e}"));
    std::fs::create_dir_all(&suite.scratch).map_err(io(suite.scratch.display().to_string()))?;
    let registry =
        SchemaRegistryConfig { url: suite.registry.clone(), properties: Default::default() };
    let prefix = topic_prefix(suite);
    if let Some(kafka) = kafka {
        kafka.delete_topics_containing(&prefix);
    }
    let mut writers = Vec::new();
    let mut inputs = Inputs { files: Vec::new(), topics: Vec::new() };
    for &format in formats {
        let path = suite.scratch.join(format!("orders-{}.{}", suite.events, format.name()));
        let topic = format!("{prefix}-{}", format.name());
        let encoder = match format {
            Format::Json => None,
            _ => Some(
                RecordEncoder::open(&SinkSchema {
                    format,
                    registry: &registry,
                    topic: &topic,
                    schema: Some(if format == Format::Avro { AVRO_ORDER } else { PROTOBUF_ORDER }),
                    strategy: SubjectStrategy::TopicName,
                    record: None,
                })
                .map_err(|e| {
                    BenchError::Io(format!("registering the {} orders' schema: {e}", format.name()))
                })?,
            ),
        };
        let file = std::fs::File::create(&path).map_err(io(path.display().to_string()))?;
        writers.push((format, encoder, std::io::BufWriter::new(file), topic.clone()));
        inputs.files.push((format, path));
        if kafka.is_some() {
            inputs.topics.push((format, topic));
        }
    }
    if let Some(kafka) = kafka {
        let topics: Vec<&str> = inputs.topics.iter().map(|(_, t)| t.as_str()).collect();
        kafka.create_topics(&topics)?;
    }
    let producer = kafka.map(Kafka::producer).transpose()?;
    let mut generator = GeneratorSource::new(suite.events, suite.keys, 7, 1_768_471_200_000, 1)
        .with_encoding(Encoding::Json);
    let mut batch = Vec::new();
    let mut encoded = Vec::new();
    loop {
        batch.clear();
        let polled = generator
            .next_batch(10_000, &mut batch)
            .map_err(|e| BenchError::Io(format!("generating orders: {e}")))?;
        for event in &batch {
            for (format, encoder, file, topic) in &mut writers {
                let record: &[u8] = match encoder {
                    None => &event.value,
                    Some(encoder) => {
                        encoder.encode(&event.value, &mut encoded).map_err(|e| {
                            BenchError::Io(format!("encoding an order as {}: {e}", format.name()))
                        })?;
                        &encoded
                    }
                };
                let written = match encoder {
                    None => file.write_all(record).and_then(|()| file.write_all(b"\n")),
                    Some(_) => {
                        file.write_all(&varint(record.len())).and_then(|()| file.write_all(record))
                    }
                };
                written.map_err(io(format!("writing the {} orders", format.name())))?;
                if let Some(producer) = &producer {
                    let record: BaseRecord<'_, [u8], [u8], ()> =
                        BaseRecord::to(topic.as_str()).payload(record);
                    send_waiting(producer, record, std::time::Duration::from_millis(1), &|| false)
                        .map_err(kafka_fail(format!("producing to {topic}")))?;
                    serve_deliveries(producer);
                }
            }
        }
        if !polled.more {
            break;
        }
    }
    for (format, _, file, _) in &mut writers {
        file.flush().map_err(io(format!("writing the {} orders", format.name())))?;
    }
    if let Some(producer) = &producer {
        flush(producer)?;
    }
    Ok(inputs)
}

/// `length` as an unsigned varint, as a length-delimited file frames its
/// records.
fn varint(mut length: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(2);
    while length >= 0x80 {
        bytes.push((length as u8) | 0x80);
        length >>= 7;
    }
    bytes.push(length as u8);
    bytes
}

/// The benchmark topics' common prefix (one set per suite size).
fn topic_prefix(suite: &FormatSuite) -> String {
    format!("weir-bench-formats-{}", suite.events)
}

/// The registry settings of a source.
fn registry(suite: &FormatSuite, format: Format) -> String {
    if format.uses_registry() {
        format!(", format: {}, schema_registry: {{ url: {:?} }}", format.name(), suite.registry)
    } else {
        String::new()
    }
}

fn file_source(suite: &FormatSuite, inputs: &Inputs, format: Format) -> String {
    let path = inputs.files.iter().find(|(f, _)| *f == format).map(|(_, p)| p.clone());
    format!("{{ type: file, path: {:?}{} }}", path.unwrap_or_default(), registry(suite, format))
}

fn kafka_source(suite: &FormatSuite, inputs: &Inputs, format: Format) -> String {
    let topic = inputs.topics.iter().find(|(f, _)| *f == format).map(|(_, t)| t.clone());
    format!(
        "{{ type: kafka, bootstrap_servers: {:?}, topics: [{}], bounded: true{} }}",
        suite.kafka.as_deref().unwrap_or_default(),
        topic.unwrap_or_default(),
        registry(suite, format)
    )
}

/// The running sum over `source`.
fn pipeline(suite: &FormatSuite, source: &str, implementation: Implementation) -> String {
    let function = match implementation {
        Implementation::Wasm => {
            format!("{{ wasm: {:?} }}", suite.functions_dir.join("bench-json.wasm"))
        }
        Implementation::Native => "{ native: bench-json }".to_string(),
    };
    let checkpoint = if suite.checkpoints { "checkpoint: { interval: 1s }\n" } else { "" };
    format!(
        "name: bench-formats\nparallelism: 2\nstate_cache_bytes: 134217728\n\
         source: {source}\nkey: {function}\nprocess: {function}\nsink: {{ type: discard }}\n{checkpoint}"
    )
}

fn run(
    weir: &Path,
    suite: &FormatSuite,
    label: &str,
    spec: &str,
) -> Result<Measurement, BenchError> {
    SpecRun { label, dir: "formats-run", args: &[], task_metrics: "on" }.measure(
        weir,
        spec,
        &suite.scratch,
    )
}
