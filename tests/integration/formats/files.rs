//! Files of length-delimited registry-format records (each an unsigned
//! varint length, then the record in the registry's wire format) read by
//! the file source.

use super::*;

/// `records` as a file's bytes: each with its varint length before it.
fn delimited(records: &[Vec<u8>]) -> Vec<u8> {
    let mut file = Vec::new();
    for record in records {
        let mut length = record.len() as u64;
        while length >= 0x80 {
            file.push((length as u8) | 0x80);
            length >>= 7;
        }
        file.push(length as u8);
        file.extend_from_slice(record);
    }
    file
}

/// A revenue pipeline reading `input` in `format` with `extra` source
/// settings, writing JSON lines to `output`; its path.
fn file_spec(dir: &Path, input: &Path, format: &str, extra: &str, output: &Path) -> PathBuf {
    let wasm = function("revenue");
    let path = dir.join(format!("{format}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {format}-file\nwatermark: {{ max_out_of_orderness: 5s }}\nbatch_size: 100\n\
             checkpoint: {{ interval: 100ms }}\n\
             source: {{ type: file, path: {input:?}, timestamp_field: event_time, format: {format}{}{extra} }}\n\
             key: {{ wasm: {wasm:?} }}\nprocess: {{ wasm: {wasm:?} }}\n\
             sink: {{ type: file, path: {output:?} }}\n",
            registry_setting()
        ),
    )
    .unwrap();
    path
}

#[test]
fn files_of_avro_and_protobuf_records_give_the_totals_json_lines_give() {
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let expected = reference(dir.path(), &orders);
    let not_a_record = orders[0].json().into_bytes();
    for (format, mut framed) in [
        ("avro", super::avro::framed_orders(&unique("file-avro"), &orders)),
        ("protobuf", super::protobuf::framed_orders(&unique("file-protobuf"), &orders)),
    ] {
        // A JSON order among the records, set aside as it was read.
        framed.insert(5, not_a_record.clone());
        let input = dir.path().join(format!("orders.{format}"));
        std::fs::write(&input, delimited(&framed)).unwrap();
        let (output, dead) =
            (dir.path().join(format!("{format}.out")), dir.path().join(format!("{format}.dead")));
        let extra = ", on_undecodable: { side-output: bad }";
        let spec = file_spec(dir.path(), &input, format, extra, &output);
        let text = std::fs::read_to_string(&spec).unwrap();
        let text = format!("{text}side_outputs: {{ bad: {{ type: file, path: {dead:?} }} }}\n");
        std::fs::write(&spec, text).unwrap();
        run_ok(&spec, &dir.path().join(format!("{format}-data")), &[]);
        let got = per_customer(records(&output).iter().map(total_of));
        assert_eq!(got, expected, "{format} records give what JSON lines give");
        let mut expected_dead = not_a_record.clone();
        expected_dead.push(b'\n');
        assert_eq!(std::fs::read(&dead).unwrap(), expected_dead, "{format}: the bad record");
    }
}

#[test]
fn a_cut_short_or_foreign_file_stops_the_run_naming_the_file_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let whole = delimited(&super::avro::framed_orders(&unique("file-cut"), &orders[..3]));
    let output = dir.path().join("out");
    let long_line = format!("{}\n", orders[0].json().repeat(3)).into_bytes();
    for (name, bytes, expected) in [
        ("cut.avro", &whole[..whole.len() - 2], "cut.avro:3: the file ends inside the record"),
        (
            "lines.avro",
            &b"{\"order_id\":1}\n"[..],
            "lines.avro:1: the file ends inside the record at byte 0",
        ),
        ("json.avro", &long_line[..], "json.avro:1: not in the schema registry's wire format"),
        ("huge.avro", &[0xff, 0xff, 0xff, 0xff, 0x7f][..], "more than the"),
    ] {
        let input = dir.path().join(name);
        std::fs::write(&input, bytes).unwrap();
        let spec = file_spec(dir.path(), &input, "avro", "", &output);
        let data = dir.path().join(format!("{name}-data"));
        let run = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{name} must stop the run");
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
}

#[test]
fn a_file_of_avro_records_is_read_exactly_once_through_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut orders = Vec::new();
    for round in 0..30 {
        orders.extend(super::orders().into_iter().map(|mut order| {
            order.order_id += round * 1_000;
            order.event_time += round as i64 * 1_000_000;
            order
        }));
    }
    let expected = reference(dir.path(), &orders);
    let input = dir.path().join("orders.avro");
    std::fs::write(&input, delimited(&super::avro::framed_orders(&unique("file-kills"), &orders)))
        .unwrap();
    let output = dir.path().join("out.jsonl");
    let spec = file_spec(dir.path(), &input, "avro", "", &output);
    let kills = run_with_kills(&spec, &dir.path().join("data"), &output);
    let got = per_customer(records(&output).iter().map(total_of));
    assert_eq!(got, expected, "exact after kills at {kills:?} committed records");
    let mid_work = kills.iter().filter(|&&committed| committed < orders.len()).count();
    assert!(mid_work >= 3, "kills landed mid-work only {mid_work} times: {kills:?}");
}

#[test]
fn a_reader_schema_resolves_every_writer_schema_or_names_why_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let orders = orders();
    let expected = reference(dir.path(), &orders);
    let input = dir.path().join("orders.avro");
    let framed = super::avro::framed_orders(&unique("file-reader"), &orders);
    std::fs::write(&input, delimited(&framed)).unwrap();
    let reader = |channel: &str| {
        quoted(&format!(
            r#"{{"type":"record","name":"Order","namespace":"weir.test","fields":[
            {{"name":"order_id","type":"long"}},{{"name":"customer_id","type":"long"}},
            {{"name":"amount","type":"double"}},
            {{"name":"event_time","type":{{"type":"long","logicalType":"timestamp-millis"}}}},{channel}]}}"#
        ))
    };
    // The first half's writer lacks `channel`: the reader's default fills it.
    let defaulted = reader(r#"{"name":"channel","type":"string","default":"store"}"#);
    let output = dir.path().join("out.jsonl");
    let spec =
        file_spec(dir.path(), &input, "avro", &format!(", reader_schema: {defaulted}"), &output);
    run_ok(&spec, &dir.path().join("defaulted"), &[]);
    assert_eq!(per_customer(records(&output).iter().map(total_of)), expected);

    // A field neither writer has, without a default, cannot be resolved.
    let required = reader(r#"{"name":"discount","type":"double"}"#);
    let spec =
        file_spec(dir.path(), &input, "avro", &format!(", reader_schema: {required}"), &output);
    let data = dir.path().join("required");
    let run = weir(&["run", spec.to_str().unwrap(), "--data-dir", data.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "an unresolvable record must stop the run");
    assert!(stderr.contains("does not resolve to the reader schema"), "{stderr}");
    assert!(stderr.contains("orders.avro:1"), "names the record: {stderr}");
}
