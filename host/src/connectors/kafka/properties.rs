//! The check of the librdkafka `properties` a spec passes through: they may
//! tune and secure the clients, never override what Weir sets itself for
//! exactly-once and checkpointed positions, nor load native code into (or
//! run commands from) the Weir process. It never changes a property; it
//! refuses the spec, naming the property and why.

use std::collections::BTreeMap;

use crate::connectors::registry::ConfigError;

/// Properties Weir sets itself (or takes from its own field), and why.
const OWNED: &[(&str, &str)] = &[
    ("bootstrap.servers", "give the brokers as `bootstrap_servers`"),
    ("metadata.broker.list", "give the brokers as `bootstrap_servers`"),
    ("group.id", "Weir names the groups itself (the source's is its `group_id`; the exactly-once sink's marker group is `weir-txn-<transactional_id_prefix>`)"),
    ("isolation.level", "the source reads only committed records (read_committed), so output of aborted transactions never enters a pipeline"),
    ("enable.auto.commit", "source positions live in checkpoints; Weir commits group offsets itself"),
    ("auto.commit.enable", "source positions live in checkpoints; Weir commits group offsets itself"),
    ("enable.auto.offset.store", "source positions live in checkpoints; Weir commits group offsets itself"),
    ("auto.offset.reset", "Weir seeks every partition itself (`start`, checkpoints, `on_data_loss`); a reset would skip or replay records silently"),
    ("enable.partition.eof", "the source finds the end of a bounded partition itself"),
    ("transactional.id", "exactly-once derives the transactional ids from `transactional_id_prefix`"),
    ("transaction.timeout.ms", "give it as `transaction_timeout` (Weir checks it against the checkpoint settings and the broker)"),
    ("enable.idempotence", "the sink's producers are idempotent, so a retried send is never written twice"),
    ("acks", "idempotent and transactional producers need acknowledgements from all in-sync replicas"),
    ("request.required.acks", "idempotent and transactional producers need acknowledgements from all in-sync replicas"),
];

/// Properties that load native code into the process or run a command.
const NATIVE: &[&str] = &[
    "plugin.library.paths",
    "ssl.engine.location",
    "ssl.engine.id",
    "ssl.providers",
    "sasl.kerberos.kinit.cmd",
];

/// Refuse a property of `properties` that Weir owns or that would load
/// native code; the error names `properties.<name>`.
pub fn check_properties(properties: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for name in properties.keys() {
        let key = name.trim().to_ascii_lowercase();
        let field = format!("properties.{name}");
        if let Some((_, why)) = OWNED.iter().find(|(owned, _)| *owned == key) {
            return Err(ConfigError::new(
                field,
                format!("Weir sets this itself and a spec cannot override it: {why}; remove it"),
            ));
        }
        if NATIVE.contains(&key.as_str()) {
            return Err(ConfigError::new(
                field,
                "would load native code into (or run a command from) the Weir process, which a spec may not do; remove it",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str) -> Result<(), String> {
        let properties = BTreeMap::from([(name.to_string(), "x".to_string())]);
        check_properties(&properties).map_err(|e| e.to_string())
    }

    #[test]
    fn tuning_and_security_pass() {
        for name in ["security.protocol", "sasl.mechanisms", "linger.ms", "fetch.min.bytes"] {
            check(name).unwrap();
        }
    }

    #[test]
    fn owned_and_native_properties_are_refused_by_name() {
        let error = check("isolation.level").unwrap_err();
        assert!(
            error.starts_with("properties.isolation.level: ") && error.contains("read_committed"),
            "{error}"
        );
        for name in [
            "transactional.id",
            "enable.idempotence",
            "transaction.timeout.ms",
            "enable.auto.commit",
            "group.id",
            "Bootstrap.Servers",
            "auto.offset.reset",
            "enable.partition.eof",
        ] {
            assert!(check(name).unwrap_err().contains("cannot override"), "{name}");
        }
        for name in ["plugin.library.paths", "ssl.engine.location", "sasl.kerberos.kinit.cmd"] {
            assert!(check(name).unwrap_err().contains("native code"), "{name}");
        }
    }
}
