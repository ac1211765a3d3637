//! The credentials in a spec's text: a spec as shown ([`redact`]) has
//! `<redacted>` ([`REDACTED`]) for the value of every secret property —
//! by the one rule of [`crate::connectors::secrets`] — of every
//! `properties:` map, wherever it is (a connector's client properties: a
//! source's, a sink's, a side output's, a graph node's); and a spec sent
//! back with that placeholder keeps the value stored ([`restore`]), so a
//! spec read, edited and sent back as an upgrade keeps its secrets.
//!
//! A spec without a secret property is shown as it was written. One with
//! some is shown as written again from its parsed form: YAML (comments and
//! layout lost), or JSON when it was written as JSON.

use std::borrow::Cow;

use serde_yaml::Value;

use super::parts::SpecError;
use crate::connectors::secrets::{is_secret_property, REDACTED};

/// The field of a connector's client properties.
const PROPERTIES: &str = "properties";

/// What is shown of a spec that does not parse (a stored spec always
/// did): nothing, rather than a secret.
const UNREADABLE: &str = "# the spec cannot be shown: it no longer parses\n";

/// `text` (a spec, YAML or JSON) with every secret property's value
/// replaced by [`REDACTED`]; `text` itself when it holds none.
pub fn redact(text: &str) -> Cow<'_, str> {
    let Ok(mut spec) = serde_yaml::from_str::<Value>(text) else {
        return Cow::Borrowed(UNREADABLE);
    };
    let mut changed = false;
    let hide = &mut |_: &[Step], value: &mut Value| {
        if value.as_str() != Some(REDACTED) {
            *value = Value::String(REDACTED.to_string());
            changed = true;
        }
        Ok(())
    };
    if secrets(&mut spec, &mut Vec::new(), hide).is_err() {
        return Cow::Borrowed(UNREADABLE);
    }
    match changed {
        false => Cow::Borrowed(text),
        true => write(text, &spec).map_or(Cow::Borrowed(UNREADABLE), Cow::Owned),
    }
}

/// `text` (a spec sent to deploy, or to upgrade a pipeline whose spec is
/// `stored`) with every secret property given as [`REDACTED`] set to the
/// value `stored` holds at the same place (the same field of the same
/// section); `text` itself when it gives none. A placeholder where
/// `stored` holds no value (or there is no `stored`) is an error naming
/// the property. A text that does not parse is left to the spec's parser
/// to report.
pub fn restore<'a>(text: &'a str, stored: Option<&str>) -> Result<Cow<'a, str>, SpecError> {
    let Ok(mut spec) = serde_yaml::from_str::<Value>(text) else {
        return Ok(Cow::Borrowed(text));
    };
    let stored: Option<Value> = stored.and_then(|s| serde_yaml::from_str(s).ok());
    let mut changed = false;
    let keep = &mut |path: &[Step], value: &mut Value| {
        if value.as_str() != Some(REDACTED) {
            return Ok(());
        }
        let kept =
            stored.as_ref().and_then(|s| find(s, path)).filter(|v| v.as_str() != Some(REDACTED));
        let Some(kept) = kept else {
            let message = match stored.is_some() {
                true => format!("{REDACTED} stands for the secret the deployed spec holds here, and it holds none: give the value"),
                false => format!("{REDACTED} stands for a secret already stored, and a new pipeline has none: give the value"),
            };
            return Err(SpecError::field(&dotted(path), message));
        };
        *value = kept.clone();
        changed = true;
        Ok(())
    };
    secrets(&mut spec, &mut Vec::new(), keep)?;
    match changed {
        false => Ok(Cow::Borrowed(text)),
        true => write(text, &spec)
            .map(Cow::Owned)
            .ok_or_else(|| SpecError::field(".", "cannot write the spec with its secrets back")),
    }
}

/// One step of the way to a value in a spec.
#[derive(Debug, Clone)]
enum Step {
    /// A mapping's field.
    Field(Value),
    /// A sequence's item.
    Item(usize),
}

/// What [`secrets`] calls for each secret property: with the way to it
/// and its value.
type Visit<'a> = dyn FnMut(&[Step], &mut Value) -> Result<(), SpecError> + 'a;

/// Call `each` with the way to, and the value of, every secret property
/// of every `properties:` map in `value`; stop at its first error.
fn secrets(value: &mut Value, path: &mut Vec<Step>, each: &mut Visit<'_>) -> Result<(), SpecError> {
    match value {
        Value::Mapping(mapping) => {
            for (key, value) in mapping.iter_mut() {
                path.push(Step::Field(key.clone()));
                match value {
                    Value::Mapping(properties) if key.as_str() == Some(PROPERTIES) => {
                        for (name, value) in properties.iter_mut() {
                            if name.as_str().is_some_and(is_secret_property) {
                                path.push(Step::Field(name.clone()));
                                let found = each(path, value);
                                path.pop();
                                found?;
                            }
                        }
                    }
                    value => secrets(value, path, each)?,
                }
                path.pop();
            }
        }
        Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                path.push(Step::Item(index));
                let found = secrets(item, path, each);
                path.pop();
                found?;
            }
        }
        Value::Tagged(tagged) => secrets(&mut tagged.value, path, each)?,
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
    Ok(())
}

/// The value at `path` in `value`.
fn find<'a>(mut value: &'a Value, path: &[Step]) -> Option<&'a Value> {
    for step in path {
        if let Value::Tagged(tagged) = value {
            value = &tagged.value;
        }
        value = match step {
            Step::Field(key) => value.as_mapping()?.get(key)?,
            Step::Item(index) => value.as_sequence()?.get(*index)?,
        };
    }
    Some(value)
}

/// `path` as a spec's errors name a field: `sink.properties.sasl.password`.
fn dotted(path: &[Step]) -> String {
    let steps = path.iter().map(|step| match step {
        Step::Field(Value::String(name)) => name.clone(),
        Step::Field(other) => serde_yaml::to_string(other).unwrap_or_default().trim().to_string(),
        Step::Item(index) => index.to_string(),
    });
    steps.collect::<Vec<_>>().join(".")
}

/// `spec` written out as `text` was: JSON if it was JSON, else YAML.
fn write(text: &str, spec: &Value) -> Option<String> {
    if text.trim_start().starts_with('{') {
        if let Ok(json) = serde_json::to_string_pretty(spec) {
            return Some(json + "\n");
        }
    }
    serde_yaml::to_string(spec).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specification::PipelineSpec;

    /// A Kafka connector with a password, a key and settings.
    fn kafka(what: &str) -> String {
        format!(
            "{{ type: kafka, bootstrap_servers: \"b:9092\", {what}, properties: {{ \
             sasl.username: alice, sasl.password: \"pw-{what}\", ssl.key.pem: \"KEY-{what}\", \
             linger.ms: '5' }} }}"
        )
    }

    /// A line spec and a graph with Kafka connectors in every place one
    /// can be, with their secrets.
    fn specs() -> Vec<(String, Vec<String>)> {
        let line = format!(
            "name: line\n# sasl.password is in properties\nsource: {}\nkey: {{ wasm: k.wasm }}\n\
             process: {{ wasm: p.wasm }}\nsink: {}\nside_outputs:\n  late: {}\n",
            kafka("topics: [in]"),
            kafka("topic: out"),
            kafka("topic: late")
        );
        let graph = format!(
            "name: graph\noperators:\n  src: {{ source: {} }}\n  \
             run: {{ inputs: [src], key: {{ wasm: k.wasm }}, process: {{ wasm: p.wasm }} }}\n  \
             out: {{ inputs: [run], sink: {} }}\n",
            kafka("topics: [in]"),
            kafka("topic: out")
        );
        let secrets = |what: &[&str]| {
            what.iter().flat_map(|w| [format!("pw-{w}"), format!("KEY-{w}")]).collect::<Vec<_>>()
        };
        vec![
            (line, secrets(&["topics: [in]", "topic: out", "topic: late"])),
            (graph, secrets(&["topics: [in]", "topic: out"])),
        ]
    }

    #[test]
    fn every_secret_property_is_shown_as_the_placeholder() {
        for (text, secrets) in specs() {
            let original = PipelineSpec::parse(&text).unwrap();
            let shown = redact(&text);
            for secret in &secrets {
                assert!(text.contains(secret.as_str()));
                assert!(!shown.contains(secret.as_str()), "{secret} in {shown}");
            }
            assert!(!shown.contains("# sasl.password"), "comments go: {shown}");
            let parsed = PipelineSpec::parse(&shown).unwrap();
            // The same connectors, settings kept, secrets replaced.
            let graph = (original.graph().unwrap(), parsed.graph().unwrap());
            assert_eq!(graph.0.sources.len(), graph.1.sources.len());
            assert_eq!(graph.0.sinks.len(), graph.1.sinks.len());
            let redacted = shown.matches(&format!("sasl.password: {REDACTED}")).count();
            assert_eq!(redacted, graph.1.sources.len() + graph.1.sinks.len(), "{shown}");
            assert_eq!(shown.matches("ssl.key.pem: <redacted>").count(), redacted, "{shown}");
            assert_eq!(shown.matches("sasl.username: alice").count(), redacted, "{shown}");
            assert_eq!(shown.matches("linger.ms: '5'").count(), redacted, "{shown}");
            assert_eq!(redact(&shown), shown, "already redacted");
        }
    }

    #[test]
    fn a_spec_without_secrets_is_shown_as_written() {
        let text = "name: plain   # a comment\nsource: { type: kafka, bootstrap_servers: b, \
                    topics: [t], properties: { sasl.username: alice, client.id: c } }\n";
        assert!(matches!(redact(text), Cow::Borrowed(t) if t == text));
        assert_eq!(redact("name: [unclosed"), UNREADABLE);
    }

    #[test]
    fn json_is_shown_as_json() {
        let text = r#"{"name": "j", "source": {"type": "kafka", "bootstrap_servers": "b", "topics": ["t"],
            "properties": {"sasl.jaas.config": "x required password=\"hunter2\";", "client.id": "c"}}}"#;
        let shown = redact(text);
        let json: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(json["source"]["properties"]["sasl.jaas.config"], REDACTED);
        assert_eq!(json["source"]["properties"]["client.id"], "c");
        assert!(!shown.contains("hunter2"));
    }

    #[test]
    fn the_placeholder_sent_back_keeps_the_stored_secret() {
        for (text, secrets) in specs() {
            let shown = redact(&text).into_owned();
            let edited = shown.replace("linger.ms: '5'", "linger.ms: '9'");
            assert_ne!(edited, shown);
            let restored = restore(&edited, Some(&text)).unwrap();
            for secret in &secrets {
                assert!(restored.contains(secret.as_str()), "{secret} lost: {restored}");
            }
            assert!(!restored.contains(REDACTED), "{restored}");
            assert!(restored.contains("linger.ms: '9'"), "{restored}");
            PipelineSpec::parse(&restored).unwrap();
            // A new value replaces the stored one; nothing to restore, the
            // text is kept as it is.
            let new = text.replace("pw-topic: out", "pw-new");
            assert!(matches!(restore(&new, Some(&text)).unwrap(), Cow::Borrowed(t) if t == new));
        }
    }

    #[test]
    fn a_placeholder_with_nothing_stored_is_refused_naming_the_property() {
        let (text, _) = specs().remove(0);
        let shown = redact(&text).into_owned();
        let error = restore(&shown, None).unwrap_err().to_string();
        assert!(
            error.starts_with("invalid spec: source.properties.sasl.password: <redacted> stands for a secret already stored"),
            "{error}"
        );
        // Placed where the stored spec has no such property, or another
        // section than it had.
        let added =
            shown.replacen("linger.ms: '5'", "linger.ms: '5'\n    ssl.key.password: <redacted>", 1);
        let error = restore(&added, Some(&text)).unwrap_err().to_string();
        assert!(
            error.contains("source.properties.ssl.key.password: <redacted> stands for the secret the deployed spec holds here, and it holds none"),
            "{error}\n{added}"
        );
        let moved = shown.replace("late:", "dead:");
        let error = restore(&moved, Some(&text)).unwrap_err().to_string();
        assert!(error.contains("side_outputs.dead.properties.sasl.password"), "{error}");
        // A stored placeholder is no secret either.
        let error = restore(&shown, Some(&shown)).unwrap_err().to_string();
        assert!(error.contains("holds none"), "{error}");
    }
}
