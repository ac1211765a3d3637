//! `scripts/dev lint`'s check of `deploy/kubernetes/`, offline:
//! `kustomization.yaml` lists every other manifest of the directory, and
//! [kubeconform](https://github.com/yannh/kubeconform) validates each
//! resource with `-strict` against JSON schemas made here from the
//! Kubernetes API's own OpenAPI v3 documents.
//!
//! kubeconform downloads its schemas from GitHub by default, which CI
//! cannot reach. The documents come instead from the Go module
//! `k8s.io/kubernetes` (its `api/openapi-spec/v3/`: every group version
//! the API server of that release serves), fetched with `go mod download`
//! from the module proxy (an 18 MB zip); kubeconform itself with `go
//! install`. Both are pinned ([`KUBECONFORM_VERSION`],
//! [`KUBERNETES_VERSION`]); the tool and the schemas are kept under
//! `~/.cache/weir/`, so a later run only validates.
//!
//! A schema is made per kind ([`schemas_of`]): the kind's definition with
//! the definitions it reaches, `apiVersion` and `kind` fixed to the
//! kind's, and every object that lists its properties closed to others
//! (`additionalProperties: false`, as kubeconform's `-strict` schemas are),
//! except where the API keeps unknown fields.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

use crate::process;

/// The kubeconform release that validates the manifests (it builds with
/// Go 1.24 or later).
pub const KUBECONFORM_VERSION: &str = "v0.7.0";

/// The Kubernetes release whose OpenAPI documents the schemas are made
/// from (the Go module `k8s.io/kubernetes`).
pub const KUBERNETES_VERSION: &str = "v1.34.1";

/// Check the manifests of `dir` and of each directory under it with a
/// `kustomization.yaml` of its own (a variant, such as `cluster/`) (see
/// the module doc); kubeconform prints its summary.
pub fn lint(dir: &Path) -> Result<()> {
    let mut files = kustomized_files(dir)?;
    let mut variants: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.join("kustomization.yaml").is_file())
        .collect();
    variants.sort();
    for variant in variants {
        files.extend(kustomized_files(&variant)?);
    }
    let kubeconform = kubeconform()?;
    let schemas = schemas()?;
    let location =
        format!("{}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json", schemas.display());
    let status = Command::new(&kubeconform)
        .args(["-strict", "-summary", "-schema-location", &location])
        .args(&files)
        .status()
        .with_context(|| format!("running {}", kubeconform.display()))?;
    if !status.success() {
        bail!("kubeconform found invalid manifests in {} ({status})", dir.display());
    }
    Ok(())
}

/// The files `dir/kustomization.yaml` lists under `resources:`, in its
/// order; an error unless they are exactly the other `.yaml` files of
/// `dir`.
pub fn kustomized_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let path = dir.join("kustomization.yaml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut listed = Vec::new();
    let mut in_resources = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if !line.starts_with([' ', '-']) {
            in_resources = trimmed == "resources:";
            continue;
        }
        if in_resources {
            let Some(item) = trimmed.strip_prefix("- ") else {
                bail!("{}: resources: expected `- file.yaml`, found {trimmed:?}", path.display());
            };
            listed.push(item.trim().trim_matches(['"', '\'']).to_string());
        }
    }
    let mut present = BTreeSet::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if (name.ends_with(".yaml") || name.ends_with(".yml")) && name != "kustomization.yaml" {
            present.insert(name);
        }
    }
    let named: BTreeSet<String> = listed.iter().cloned().collect();
    let missing: Vec<&String> = present.difference(&named).collect();
    let absent: Vec<&String> = named.difference(&present).collect();
    if !missing.is_empty() || !absent.is_empty() || named.len() != listed.len() {
        bail!(
            "{}: resources must list every manifest of the directory once: not listed {missing:?}, \
             listed but missing {absent:?}, listed: {listed:?}",
            path.display()
        );
    }
    Ok(listed.iter().map(|name| dir.join(name)).collect())
}

/// kubeconform, installed once with `go install` into the cache.
fn kubeconform() -> Result<PathBuf> {
    let bin = process::cache_dir().join("tools").join(format!("kubeconform-{KUBECONFORM_VERSION}"));
    let exe = bin.join("kubeconform");
    if exe.exists() {
        return Ok(exe);
    }
    need_go()?;
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    eprintln!("==> installing kubeconform {KUBECONFORM_VERSION} with go install");
    let mut go = Command::new("go");
    go.args([
        "install",
        &format!("github.com/yannh/kubeconform/cmd/kubeconform@{KUBECONFORM_VERSION}"),
    ])
    .env("GOBIN", &bin)
    .current_dir(&bin);
    process::run_logged(go, &bin.join("go-install.log"), "go install kubeconform")?;
    if !exe.exists() {
        bail!("go install left no {}", exe.display());
    }
    Ok(exe)
}

/// The directory of the JSON schemas, made once from the Kubernetes
/// release's OpenAPI documents.
fn schemas() -> Result<PathBuf> {
    let dir = process::cache_dir().join("kubernetes-schemas").join(KUBERNETES_VERSION);
    if dir.join(".complete").exists() {
        return Ok(dir);
    }
    need_go()?;
    eprintln!("==> making Kubernetes JSON schemas from k8s.io/kubernetes@{KUBERNETES_VERSION}'s OpenAPI documents");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let module = format!("k8s.io/kubernetes@{KUBERNETES_VERSION}");
    let output = Command::new("go")
        .args(["mod", "download", "-json", &module])
        .current_dir(&dir)
        .output()
        .context("running go mod download")?;
    let answer: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!("go mod download {module}: {}", String::from_utf8_lossy(&output.stderr))
    })?;
    let Some(source) = answer["Dir"].as_str() else {
        bail!(
            "go mod download {module}: {}",
            answer["Error"].as_str().unwrap_or("no Dir in its answer")
        );
    };
    let testdata = Path::new(source).join("api/openapi-spec/v3");
    let mut made = 0;
    for entry in
        std::fs::read_dir(&testdata).with_context(|| format!("reading {}", testdata.display()))?
    {
        let path = entry?.path();
        if !path.to_string_lossy().ends_with("_openapi.json") {
            continue;
        }
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let document: Value =
            serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))?;
        for (file, schema) in schemas_of(&document) {
            std::fs::write(dir.join(file), serde_json::to_string(&schema)?)?;
            made += 1;
        }
    }
    if made == 0 {
        bail!("no OpenAPI documents in {}", testdata.display());
    }
    std::fs::write(dir.join(".complete"), format!("{made} schemas\n"))?;
    Ok(dir)
}

fn need_go() -> Result<()> {
    if !process::on_path("go") {
        bail!(
            "validating deploy/kubernetes needs Go 1.24 or later on the PATH (https://go.dev/dl)"
        );
    }
    Ok(())
}

/// The JSON schemas of the kinds an OpenAPI v3 document of one group
/// version defines, as kubeconform finds them: file
/// `<kind>-<group>-<version>.json` (`statefulset-apps-v1.json`; the core
/// group: `service-v1.json`), standalone and strict. Lists and the
/// apimachinery types every group repeats (`DeleteOptions`, …) are left
/// out.
pub fn schemas_of(document: &Value) -> Vec<(String, Value)> {
    let Some(components) = document["components"]["schemas"].as_object() else {
        return Vec::new();
    };
    let mut definitions: Map<String, Value> = components.clone();
    for schema in definitions.values_mut() {
        convert(schema);
    }
    // Quantities are strings or numbers (`cpu: 1`, `memory: 1Gi`).
    if let Some(quantity) = definitions.get_mut("io.k8s.apimachinery.pkg.api.resource.Quantity") {
        *quantity = json!({ "type": ["string", "number"] });
    }
    let mut schemas = Vec::new();
    for (name, schema) in components {
        if name.starts_with("io.k8s.apimachinery.") {
            continue;
        }
        let Some(kinds) = schema["x-kubernetes-group-version-kind"].as_array() else { continue };
        for gvk in kinds {
            let (Some(group), Some(version), Some(kind)) =
                (gvk["group"].as_str(), gvk["version"].as_str(), gvk["kind"].as_str())
            else {
                continue;
            };
            if kind.ends_with("List") {
                continue;
            }
            let api_version =
                if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
            let mut root = definitions[name].clone();
            if let Some(properties) = root["properties"].as_object_mut() {
                properties.insert(
                    "apiVersion".into(),
                    json!({ "type": "string", "enum": [api_version] }),
                );
                properties.insert("kind".into(), json!({ "type": "string", "enum": [kind] }));
            }
            let reached = reachable(&root, &definitions);
            root["definitions"] = Value::Object(reached);
            schemas
                .push((format!("{}{}.json", kind.to_lowercase(), kind_suffix(&api_version)), root));
        }
    }
    schemas
}

/// kubeconform's `{{ .KindSuffix }}` of `api_version`: `-apps-v1` for
/// `apps/v1`, `-rbac-v1` for `rbac.authorization.k8s.io/v1`, `-v1` for `v1`.
fn kind_suffix(api_version: &str) -> String {
    let mut parts = api_version.split('/');
    let first = parts.next().unwrap_or_default();
    let mut suffix = format!("-{}", first.split('.').next().unwrap_or_default().to_lowercase());
    if let Some(version) = parts.next() {
        suffix.push('-');
        suffix.push_str(&version.to_lowercase());
    }
    suffix
}

/// Make an OpenAPI v3 schema a strict JSON schema, in place: references to
/// `#/definitions/`, objects with listed properties closed (unless the API
/// keeps unknown fields there), int-or-string fields integers or strings,
/// `nullable` as a `null` type; descriptions dropped (size).
fn convert(node: &mut Value) {
    let Some(object) = node.as_object_mut() else { return };
    if object.get("description").is_some_and(Value::is_string) {
        object.remove("description");
    }
    if let Some(Value::String(reference)) = object.get_mut("$ref") {
        if let Some(name) = reference.strip_prefix("#/components/schemas/") {
            *reference = format!("#/definitions/{name}");
        }
    }
    if object.get("format").and_then(Value::as_str) == Some("int-or-string") {
        object.insert("type".into(), json!(["integer", "string"]));
    }
    if object.remove("nullable") == Some(Value::Bool(true)) {
        if let Some(kind) = object.get("type").cloned() {
            let mut kinds = match kind {
                Value::Array(kinds) => kinds,
                other => vec![other],
            };
            kinds.push("null".into());
            object.insert("type".into(), Value::Array(kinds));
        }
    }
    let keeps_unknown =
        object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(convert);
        if !keeps_unknown && !object.contains_key("additionalProperties") {
            object.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    for key in ["additionalProperties", "items", "not"] {
        if let Some(value) = object.get_mut(key) {
            convert(value);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = object.get_mut(key) {
            list.iter_mut().for_each(convert);
        }
    }
}

/// The definitions `root` refers to, directly or through others.
fn reachable(root: &Value, definitions: &Map<String, Value>) -> Map<String, Value> {
    let mut found: BTreeMap<String, Value> = BTreeMap::new();
    let mut pending = Vec::new();
    references(root, &mut pending);
    while let Some(name) = pending.pop() {
        if found.contains_key(&name) {
            continue;
        }
        if let Some(definition) = definitions.get(&name) {
            references(definition, &mut pending);
            found.insert(name, definition.clone());
        }
    }
    found.into_iter().collect()
}

/// The definition names of the `$ref`s under `node`.
fn references(node: &Value, into: &mut Vec<String>) {
    match node {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("$ref", Value::String(reference)) => {
                        if let Some(name) = reference.strip_prefix("#/definitions/") {
                            into.push(name.to_string());
                        }
                    }
                    _ => references(value, into),
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|value| references(value, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small OpenAPI v3 document in the shape of the API's.
    fn document() -> Value {
        json!({ "components": { "schemas": {
            "io.k8s.api.apps.v1.StatefulSet": {
                "description": "A stateful set.",
                "type": "object",
                "properties": {
                    "apiVersion": { "type": "string" },
                    "kind": { "type": "string" },
                    "metadata": { "allOf": [{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }], "default": {} },
                    "spec": { "allOf": [{ "$ref": "#/components/schemas/io.k8s.api.apps.v1.StatefulSetSpec" }] }
                },
                "x-kubernetes-group-version-kind": [{ "group": "apps", "version": "v1", "kind": "StatefulSet" }]
            },
            "io.k8s.api.apps.v1.StatefulSetList": {
                "type": "object",
                "properties": { "items": { "type": "array" } },
                "x-kubernetes-group-version-kind": [{ "group": "apps", "version": "v1", "kind": "StatefulSetList" }]
            },
            "io.k8s.api.apps.v1.StatefulSetSpec": {
                "type": "object",
                "properties": {
                    "replicas": { "type": "integer", "format": "int32" },
                    "description": { "type": "string", "description": "a field named description" },
                    "port": { "allOf": [{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString" }] },
                    "cpu": { "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity" },
                    "raw": { "type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": { "a": { "type": "string" } } },
                    "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                    "note": { "type": "string", "nullable": true }
                }
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object",
                "properties": { "name": { "type": "string" } }
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions": {
                "type": "object",
                "properties": {},
                "x-kubernetes-group-version-kind": [{ "group": "apps", "version": "v1", "kind": "DeleteOptions" }]
            },
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": { "type": "string", "format": "int-or-string" },
            "io.k8s.apimachinery.pkg.api.resource.Quantity": { "type": "string" },
            "io.k8s.api.core.v1.Unused": { "type": "object" }
        }}})
    }

    #[test]
    fn a_kind_gets_a_standalone_strict_schema_named_as_kubeconform_looks_for_it() {
        let schemas = schemas_of(&document());
        let names: Vec<&str> = schemas.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["statefulset-apps-v1.json"], "no lists, no apimachinery kinds");
        let schema = &schemas[0].1;
        assert_eq!(schema["properties"]["apiVersion"]["enum"], json!(["apps/v1"]));
        assert_eq!(schema["properties"]["kind"]["enum"], json!(["StatefulSet"]));
        assert_eq!(schema["additionalProperties"], false);
        assert!(schema.get("description").is_none());
        assert_eq!(
            schema["properties"]["spec"]["allOf"][0]["$ref"],
            "#/definitions/io.k8s.api.apps.v1.StatefulSetSpec"
        );
        let definitions = schema["definitions"].as_object().unwrap();
        let reached: Vec<&String> = definitions.keys().collect();
        assert_eq!(
            reached,
            [
                "io.k8s.api.apps.v1.StatefulSetSpec",
                "io.k8s.apimachinery.pkg.api.resource.Quantity",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
            ],
            "only the definitions it reaches"
        );
        let spec = &definitions["io.k8s.api.apps.v1.StatefulSetSpec"];
        assert_eq!(spec["additionalProperties"], false);
        assert_eq!(
            spec["properties"]["description"]["type"], "string",
            "a field, not a description"
        );
        assert!(
            spec["properties"]["raw"].get("additionalProperties").is_none(),
            "unknown fields kept"
        );
        assert_eq!(spec["properties"]["labels"]["additionalProperties"]["type"], "string");
        assert_eq!(spec["properties"]["note"]["type"], json!(["string", "null"]));
        assert_eq!(
            definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"],
            json!(["integer", "string"])
        );
        assert_eq!(
            definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"],
            json!(["string", "number"])
        );
        assert_eq!(
            definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["additionalProperties"],
            false
        );
    }

    #[test]
    fn kind_suffixes_follow_kubeconform() {
        assert_eq!(kind_suffix("apps/v1"), "-apps-v1");
        assert_eq!(kind_suffix("v1"), "-v1");
        assert_eq!(kind_suffix("policy/v1"), "-policy-v1");
        assert_eq!(kind_suffix("rbac.authorization.k8s.io/v1"), "-rbac-v1");
    }

    #[test]
    fn the_kustomization_must_list_every_manifest() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["a.yaml", "b.yaml"] {
            std::fs::write(dir.path().join(file), "kind: ConfigMap\n").unwrap();
        }
        let kustomization = dir.path().join("kustomization.yaml");
        std::fs::write(
            &kustomization,
            "# comment\nlabels:\n  - pairs:\n      a: b\nresources:\n  - b.yaml\n  - a.yaml\n",
        )
        .unwrap();
        let files = kustomized_files(dir.path()).unwrap();
        assert_eq!(files, [dir.path().join("b.yaml"), dir.path().join("a.yaml")]);

        std::fs::write(&kustomization, "resources:\n  - a.yaml\n").unwrap();
        let refused = kustomized_files(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("not listed [\"b.yaml\"]"), "{refused}");
        std::fs::write(&kustomization, "resources:\n  - a.yaml\n  - b.yaml\n  - c.yaml\n").unwrap();
        let refused = kustomized_files(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("listed but missing [\"c.yaml\"]"), "{refused}");
    }
}
