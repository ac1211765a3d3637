//! `weir schema types`: the types it writes compile where they are used —
//! TypeScript under `tsc --strict`, Python when run — and describe the
//! events a source of the schema hands to functions.

use std::process::Command;

use super::*;

/// The orders' Avro schema with every kind of field the types map.
const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"weir.test","fields":[
    {"name":"order_id","type":"long"},
    {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["WEB","STORE"]}},
    {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
        {"name":"sku","type":"string"},{"name":"tags","type":{"type":"map","values":"int"}}]}}}]}"#;

/// An event of `ORDER` as a source hands it to a function.
const EVENT: &str = r#"{"order_id":7,"amount":"12.34","note":null,"kind":"WEB","lines":[{"sku":"a","tags":{"x":1}}]}"#;

fn types(args: &[&str]) -> String {
    let mut all = vec!["schema", "types"];
    all.extend_from_slice(args);
    let output = weir(&all);
    assert!(
        output.status.success(),
        "weir schema types: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn typescript_and_python_types_of_an_avro_schema_compile_and_fit_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("order.avsc");
    std::fs::write(&schema, ORDER).unwrap();

    let typescript = types(&[schema.to_str().unwrap(), "--lang", "typescript"]);
    let program = format!(
        "{typescript}\nconst order: Order = {EVENT};\nconst kind: Kind = order.kind;\n\
         const total: number = order.order_id + order.lines[0].tags[\"x\"];\nexport {{ kind, total }};\n"
    );
    std::fs::write(dir.path().join("order.ts"), program).unwrap();
    let tsc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/js/node_modules/.bin/tsc");
    let checked = Command::new(&tsc)
        .args(["--strict", "--noEmit", "--target", "es2020"])
        .arg(dir.path().join("order.ts"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e} (npm ci in guest-sdk/js installs it)", tsc.display()));
    assert!(checked.status.success(), "tsc: {}", String::from_utf8_lossy(&checked.stdout));
    // A wrong field type is caught.
    std::fs::write(
        dir.path().join("bad.ts"),
        format!("{typescript}\nconst o: Order = {};\n", EVENT.replace("\"WEB\"", "\"MAIL\"")),
    )
    .unwrap();
    let bad = Command::new(&tsc)
        .args(["--strict", "--noEmit"])
        .arg(dir.path().join("bad.ts"))
        .output()
        .unwrap();
    assert!(!bad.status.success(), "an unknown enum symbol must not type-check");

    let python = types(&[schema.to_str().unwrap(), "--lang", "python"]);
    let program = format!(
        "{python}\nimport json\norder: Order = json.loads({EVENT:?})\nassert Order.__annotations__['order_id'] is int\nassert order['lines'][0]['tags']['x'] == 1\nprint(sorted(Order.__annotations__))\n"
    );
    std::fs::write(dir.path().join("order.py"), program).unwrap();
    let ran = Command::new("python3").arg(dir.path().join("order.py")).output().unwrap();
    assert!(ran.status.success(), "python: {}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        "['amount', 'kind', 'lines', 'note', 'order_id']"
    );

    let rust = types(&[schema.to_str().unwrap(), "--lang", "rust"]);
    assert!(
        rust.contains("pub struct Order {") && rust.contains("pub lines: Vec<Line>,"),
        "{rust}"
    );
}

#[test]
fn types_of_a_registry_subject_follow_its_schema_type() {
    let topic = unique("types-orders");
    let proto = "syntax = \"proto3\";\npackage weir.test;\nmessage Order {\n  int64 order_id = 1;\n  repeated string tags = 2;\n}\n";
    super::protobuf::register(&topic, proto);
    let url = shared_url();
    let typescript =
        types(&["--registry", &url, "--subject", &format!("{topic}-value"), "--lang", "ts"]);
    assert!(
        typescript.contains("export interface Order {\n  order_id: number;\n  tags: string[];\n}"),
        "{typescript}"
    );
    let missing = weir(&[
        "schema",
        "types",
        "--registry",
        &url,
        "--subject",
        "no-such-subject-value",
        "--lang",
        "ts",
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no-such-subject-value"));
}
