//! The check of the librdkafka `properties` a spec passes through: they may
//! tune and secure the clients, never override what Weir sets itself for
//! exactly-once and checkpointed positions, nor load native code into (or
//! run commands from) the Weir process. It never changes a property; it
//! refuses the spec, naming the property and why.
//!
//! A spec deployed through `weir serve` is held to more: only the
//! properties of [`ALLOWED`] (security and client tuning), and those of
//! [`FILE_PATHS`] (certificates, keys, keytabs) only with a path the server
//! grants for reading; see [`served_property`]. `weir run` keeps the deny
//! check alone.

use std::collections::BTreeMap;

use crate::connectors::config::ConfigError;

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

/// The properties a spec deployed through `weir serve` may set: security
/// (SASL, TLS settings that are not files) and client tuning.
pub const ALLOWED: &[&str] = &[
    // Security.
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.kerberos.principal",
    "sasl.kerberos.service.name",
    "sasl.kerberos.min.time.before.relogin",
    "ssl.ca.pem",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.cipher.suites",
    "ssl.curves.list",
    "ssl.sigalgs.list",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    // Identity and diagnostics.
    "client.id",
    "client.rack",
    "statistics.interval.ms",
    "log.connection.close",
    // Producing.
    "linger.ms",
    "queue.buffering.max.ms",
    "queue.buffering.max.messages",
    "queue.buffering.max.kbytes",
    "queue.buffering.backpressure.threshold",
    "batch.size",
    "batch.num.messages",
    "compression.type",
    "compression.codec",
    "compression.level",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "message.send.max.retries",
    "retries",
    "sticky.partitioning.linger.ms",
    "max.in.flight",
    "max.in.flight.requests.per.connection",
    // Fetching.
    "fetch.min.bytes",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.wait.max.ms",
    "fetch.error.backoff.ms",
    "fetch.queue.backoff.ms",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "check.crcs",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "coordinator.query.interval.ms",
    // Messages, requests, retries.
    "message.max.bytes",
    "message.copy.max.bytes",
    "receive.message.max.bytes",
    "request.timeout.ms",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    // Connections and metadata.
    "socket.timeout.ms",
    "socket.keepalive.enable",
    "socket.nagle.disable",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.max.fails",
    "socket.connection.setup.timeout.ms",
    "connections.max.idle.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "reconnect.backoff.jitter.ms",
    "broker.address.family",
    "metadata.max.age.ms",
    "topic.metadata.refresh.interval.ms",
    "topic.metadata.refresh.fast.interval.ms",
    "topic.metadata.refresh.sparse",
    "topic.metadata.propagation.max.ms",
    "api.version.request",
    "api.version.request.timeout.ms",
    "api.version.fallback.ms",
    "broker.version.fallback",
];

/// The properties naming a file the client reads (certificates, keys,
/// keytabs): allowed over the API when the file is inside a read grant.
pub const FILE_PATHS: &[&str] = &[
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
    "sasl.kerberos.keytab",
];

/// What a spec deployed through `weir serve` may do with a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedProperty {
    /// Set it.
    Allowed,
    /// Set it to a file the server grants for reading.
    ReadsFile,
    /// Nothing: the reason.
    Refused(&'static str),
}

/// What a spec deployed through `weir serve` may do with property `name`
/// (compared without case or surrounding blanks).
pub fn served_property(name: &str) -> ServedProperty {
    let key = name.trim().to_ascii_lowercase();
    if FILE_PATHS.contains(&key.as_str()) {
        ServedProperty::ReadsFile
    } else if ALLOWED.contains(&key.as_str()) {
        ServedProperty::Allowed
    } else if NATIVE.contains(&key.as_str()) {
        ServedProperty::Refused(
            "it would load native code into (or run a command from) the Weir process",
        )
    } else if key.ends_with(".location")
        || key.ends_with(".file")
        || key.ends_with("path")
        || key.ends_with("paths")
    {
        ServedProperty::Refused("it names a file on the server that is not among the certificate and key files a deployed spec may name")
    } else {
        ServedProperty::Refused("it is not on the list of security and tuning properties a pipeline deployed through `weir serve` may set")
    }
}

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
    fn served_specs_set_only_listed_properties() {
        for name in
            ["security.protocol", "SASL.Password", "linger.ms", "fetch.min.bytes", "client.id"]
        {
            assert_eq!(served_property(name), ServedProperty::Allowed, "{name}");
        }
        for name in ["ssl.ca.location", "ssl.key.location", "sasl.kerberos.keytab"] {
            assert_eq!(served_property(name), ServedProperty::ReadsFile, "{name}");
        }
        for (name, says) in [
            ("plugin.library.paths", "native code"),
            ("ssl.engine.location", "native code"),
            ("https.ca.location", "names a file"),
            ("sasl.oauthbearer.assertion.private.key.file", "names a file"),
            ("offset.store.path", "names a file"),
            ("interceptors", "not on the list"),
            ("debug", "not on the list"),
        ] {
            let ServedProperty::Refused(why) = served_property(name) else {
                panic!("{name} is allowed")
            };
            assert!(why.contains(says), "{name}: {why}");
        }
        // Nothing Weir owns is on the list.
        for (owned, _) in OWNED {
            assert!(!ALLOWED.contains(owned) && !FILE_PATHS.contains(owned), "{owned}");
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
