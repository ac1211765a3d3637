//! What the commands print for people: the run summary, the snapshot
//! table, pipeline statuses, function versions, and errors on one line.
//! (`--json` prints the API's answer types instead.)

use std::time::Duration;

use weir_host::api::{FunctionList, PipelineList, PipelineStatus, StateView};
use weir_host::checkpoint::{CheckpointStorage, SnapshotMetadata};
use weir_host::cluster::worker::UnitStatus;
use weir_host::observe::RunSummary;
use weir_host::store::FunctionVersion;
use weir_host::units::format_bytes;

/// The error and its causes on one line, skipping causes whose text the
/// message already contains (many errors repeat their source's message).
pub fn one_line(error: &anyhow::Error) -> String {
    let mut message = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !message.contains(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    message.replace('\n', " ")
}

/// The end-of-run summary on stderr: totals, then records in and out per
/// operator.
pub fn print_summary(name: &str, summary: &RunSummary) {
    let seconds = summary.elapsed.as_secs_f64();
    eprintln!(
        "{name}: {} records in, {} out, {} to side outputs ({} dropped) in {seconds:.3}s \
         ({:.0} events/s)",
        summary.records_in,
        summary.records_out,
        summary.side_outputs_written,
        summary.side_outputs_dropped,
        summary.records_in as f64 / seconds.max(1e-9)
    );
    eprintln!("  {:<12} {:>12} {:>12}", "operator", "in", "out");
    eprintln!("  {:<12} {:>12} {:>12}", "source", "", summary.records_in);
    if summary.dropped_bad_timestamps > 0 {
        eprintln!(
            "  {} source records dropped: no usable timestamp",
            summary.dropped_bad_timestamps
        );
    }
    eprintln!("  {:<12} {:>12} {:>12}", "key", summary.key.records_in, summary.key.records_out);
    for (stage, subtasks) in &summary.stages {
        for (index, counts) in subtasks.iter().enumerate() {
            eprintln!(
                "  {:<12} {:>12} {:>12}",
                format!("{stage}[{index}]"),
                counts.records_in,
                counts.records_out
            );
        }
    }
    let late: u64 = summary.subtasks.iter().map(|c| c.late_dropped).sum();
    if late > 0 {
        eprintln!("  {late} late records dropped (no late_output declared)");
    }
    eprintln!(
        "  {:<12} {:>12} {:>12}",
        "sink",
        summary.records_out + summary.side_outputs_written + summary.side_outputs_dropped,
        ""
    );
    if let Some((kind, id)) = summary.restored_from {
        eprintln!("  restored from {} {id}", kind.name());
    }
    if let Some(last) = &summary.last_snapshot {
        eprintln!(
            "  {} snapshots completed{}; last: {} {}, {} ({} new) in {} ms",
            summary.snapshots_completed,
            if summary.snapshots_expired > 0 {
                format!(" ({} expired)", summary.snapshots_expired)
            } else {
                String::new()
            },
            last.kind.name(),
            last.id,
            format_bytes(last.size_bytes),
            format_bytes(last.incremental_bytes),
            last.duration.as_millis()
        );
    }
    if summary.stopped {
        eprintln!("  stopped on request");
    }
    if let Some(l) = &summary.latency {
        let ms = |us: u64| us as f64 / 1000.0;
        eprintln!(
            "  latency ms (event time to visible output): p50 {:.1}, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1} over {} events",
            ms(l.p50_us),
            ms(l.p90_us),
            ms(l.p99_us),
            ms(l.p999_us),
            ms(l.max_us),
            l.count
        );
        if l.early > 0 {
            eprintln!("  {} events written before their timestamp (not counted)", l.early);
        }
        if l.warm_up > 0 {
            eprintln!("  {} events stamped within the warm-up (not counted)", l.warm_up);
        }
    }
    if let Some(rss) = weir_host::observe::process::peak_rss_bytes() {
        eprintln!("  peak RSS {:.1} MiB", rss as f64 / f64::from(1 << 20));
    }
}

/// One row of `weir checkpoints list`.
pub fn print_snapshot(storage: &CheckpointStorage, metadata: &SnapshotMetadata) {
    let time = std::time::UNIX_EPOCH
        + Duration::from_millis(u64::try_from(metadata.completed_at).unwrap_or(0));
    println!(
        "{:>6}  {:<10}  {:<24}  {:>10}  {:>12}  {:>6}ms  {}",
        metadata.id,
        metadata.kind.name(),
        humantime::format_rfc3339_millis(time).to_string(),
        format_bytes(metadata.size_bytes),
        format_bytes(metadata.incremental_bytes),
        metadata.duration_ms,
        storage.describe(&storage.snapshot_dir(metadata.kind, metadata.id))
    );
}

/// A function version as `weir function upload` prints it.
pub fn print_function_version(version: &FunctionVersion) {
    println!(
        "{} version {} sha256:{} ({})",
        version.name,
        version.version,
        version.digest,
        worlds(&version.worlds)
    );
}

/// Each function with its newest version.
pub fn print_function_list(list: &FunctionList) {
    for function in &list.functions {
        let newest = function.versions.last();
        println!(
            "{:<24} v{} sha256:{}  {}",
            function.name,
            newest.map_or("null".to_string(), |v| v.version.to_string()),
            newest.map_or("?", |v| v.digest.as_str()),
            newest.map_or("null".to_string(), |v| worlds(&v.worlds))
        );
    }
}

/// Worlds as the JSON list the API gives.
fn worlds(worlds: &[String]) -> String {
    serde_json::to_string(worlds).unwrap_or_default()
}

/// Every pipeline, one line each.
pub fn print_pipeline_list(list: &PipelineList) {
    println!(
        "{:<24} {:<9} {:>4} {:>12} {:>12}  last checkpoint",
        "name", "state", "gen", "in", "out"
    );
    for p in &list.pipelines {
        let last = match &p.last_checkpoint {
            Some(last) => format!("{} {}", last.kind, last.id),
            None => "-".to_string(),
        };
        println!(
            "{:<24} {:<9} {:>4} {:>12} {:>12}  {last}",
            p.name,
            p.state.name(),
            p.generation,
            p.counts.as_ref().map_or(0, |c| c.source_records),
            p.counts.as_ref().map_or(0, |c| c.sink_records)
        );
    }
}

/// A pipeline's status, for people.
pub fn print_status(p: &PipelineStatus) {
    println!(
        "{}  {}  (generation {}, parallelism {})",
        p.name,
        p.state.name(),
        p.generation,
        p.parallelism
    );
    if let Some(failure) = &p.failure {
        println!("  failure: {failure}");
    }
    let restart = &p.restart;
    if restart.restarts > 0 || restart.next_attempt_at.is_some() {
        let next = restart.next_attempt_at.map_or(String::new(), |at| {
            let time =
                std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or(0));
            format!(", next attempt at {}", humantime::format_rfc3339_seconds(time))
        });
        println!("  restarts: {}{next}", restart.restarts);
        if let Some(last) = &restart.last_failure {
            println!("  last failure: {last}");
        }
    }
    for f in &p.functions {
        println!("  {:<14} {} v{}", f.field, f.function, f.version);
    }
    if let Some(metrics) = &p.metrics {
        println!(
            "  {:<14} {:>10} {:>10} {:>6} {:>6} {:>6}",
            "task", "in/s", "out/s", "busy", "bp", "idle"
        );
        for operator in &metrics.operators {
            for task in &operator.subtasks {
                println!(
                    "  {:<14} {:>10.0} {:>10.0} {:>5.0}% {:>5.0}% {:>5.0}%",
                    format!("{}[{}]", operator.id, task.subtask),
                    task.records_in_per_second,
                    task.records_out_per_second,
                    task.busy_ms_per_second / 10.0,
                    task.backpressured_ms_per_second / 10.0,
                    task.idle_ms_per_second / 10.0,
                );
            }
        }
    }
    if !p.units.is_empty() {
        print_units(p);
    } else if let Some(counts) = &p.counts {
        println!("  {:<14} {:>12} {:>12}", "operator", "in", "out");
        println!("  {:<14} {:>12} {:>12}", "key", counts.key.records_in, counts.key.records_out);
        let stages = counts.operators.iter().flat_map(|stage| {
            stage.subtasks.iter().enumerate().map(move |(i, c)| (&stage.name, i, c))
        });
        for (stage, i, c) in stages {
            println!(
                "  {:<14} {:>12} {:>12}",
                format!("{stage}[{i}]"),
                c.records_in,
                c.records_out
            );
        }
        println!("  {:<14} {:>12}", "sink", counts.sink_records);
    }
    if let Some(watermark) = p.watermark {
        let time =
            std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(watermark).unwrap_or(0));
        println!(
            "  watermark: {}",
            if watermark == i64::MAX {
                "end of time".to_string()
            } else {
                humantime::format_rfc3339_millis(time).to_string()
            }
        );
    }
    if let Some(last) = &p.last_checkpoint {
        println!("  last {} {}: {} ms, {}", last.kind, last.id, last.duration_ms, last.location);
    }
}

/// A cluster pipeline's units, each on its worker.
fn print_units(p: &PipelineStatus) {
    print_unit_header("  ");
    for u in &p.units {
        print_unit("  ", &u.worker, u.version, &u.unit);
    }
    for (worker, why) in &p.waiting {
        println!("  {worker} waits: {why}");
    }
}

/// The header of [`print_unit`]'s lines, after `indent`.
pub fn print_unit_header(indent: &str) {
    println!(
        "{indent}{:<34} {:<14} {:>4} {:<9} {:>10} {:>10} {:>8} {:>10}",
        "unit", "worker", "ver", "state", "in", "out", "lag", "checkpoint"
    );
}

/// One unit of a cluster pipeline, run by `worker` at `version`, after
/// `prefix` (an indent, or a pipeline column).
pub fn print_unit(prefix: &str, worker: &str, version: u64, unit: &UnitStatus) {
    let or_dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    println!(
        "{prefix}{:<34} {:<14} {:>4} {:<9} {:>10} {:>10} {:>8} {:>10}",
        unit.unit,
        worker,
        version,
        unit.state,
        unit.records_in,
        unit.records_out,
        or_dash(unit.lag),
        or_dash(unit.last_checkpoint.map(|c| c as i64)),
    );
}

/// A key's state, for people: the decoded value (or map entries).
pub fn print_state(view: &StateView) {
    if !view.found {
        println!("{} has no state {:?} in {}", view.key, view.state, view.operator);
        return;
    }
    match (&view.value, &view.entries) {
        (Some(value), _) => println!("{value}"),
        (None, Some(entries)) => {
            for (key, value) in entries {
                println!("{key}\t{value}");
            }
        }
        (None, None) => {}
    }
}
