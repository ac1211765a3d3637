//! Which connector client properties carry credentials, and the
//! placeholder shown in their place: the one rule every answer, status
//! and error follows when it shows a spec or a client's settings (the
//! spec's side of it is [`crate::specification::secrets`]).
//!
//! Flink's rule is the anchor (a key is sensitive when its name contains
//! `password`, `secret`, `token`, …): a property is secret when its name,
//! compared without case or surrounding blanks and with `-` and `_` read
//! as `.`, either
//!
//! * contains one of [`SECRET_PARTS`]: `password`, `passwd`, `passphrase`,
//!   `secret`, `token`, `credential`, `jaas` (`sasl.jaas.config` holds a
//!   password), `apikey`, `api.key`, `auth.params`, `basic.auth`,
//!   `user.info` (`basic.auth.user.info` is `user:password`),
//!   `http.headers` (an `Authorization` header); or
//! * has the word `key` after its first word, naming a key itself —
//!   `ssl.key.pem`, `ssl.keystore.key`,
//!   `sasl.oauthbearer.assertion.private.key.pem` — unless it names a
//!   file (ends in `.location`, `.file` or `.path`: the file holds the key,
//!   its path is none) or the record key (`key.serializer` starts with it).
//!
//! So `sasl.password`, `ssl.key.pem`, `ssl.key.password`,
//! `ssl.keystore.password`, `sasl.oauthbearer.client.secret` are secret;
//! `sasl.username`, `ssl.certificate.pem`, `ssl.ca.pem`, `ssl.key.location`
//! and the tuning properties are not. It errs on the side of hiding: a
//! property it hides by mistake is only harder to read.

/// What an answer shows instead of a secret property's value; sent back
/// in an upgrade, it stands for the value stored.
pub const REDACTED: &str = "<redacted>";

/// Parts of a property name that make it secret wherever they are.
pub const SECRET_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "jaas",
    "apikey",
    "api.key",
    "auth.params",
    "basic.auth",
    "user.info",
    "http.headers",
];

/// Whether client property `name` carries a credential (see the module
/// documentation for the rule).
pub fn is_secret_property(name: &str) -> bool {
    let name: String = name
        .trim()
        .chars()
        .map(|c| if c == '-' || c == '_' { '.' } else { c.to_ascii_lowercase() })
        .collect();
    if SECRET_PARTS.iter().any(|part| name.contains(part)) {
        return true;
    }
    let words: Vec<&str> = name.split('.').collect();
    let names_a_file = matches!(words.last(), Some(&("location" | "file" | "path")));
    !names_a_file && words.iter().skip(1).any(|word| *word == "key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_secret() {
        for name in [
            "sasl.password",
            "SASL.Password ",
            "ssl.key.pem",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "ssl.keystore.key",
            "sasl.jaas.config",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.assertion.private.key.pem",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "basic.auth.user.info",
            "schema.registry.basic.auth.user.info",
            "fs.azure.account.key",
            "api_key",
            "x-api-key",
            "bearer.auth.token",
            "aws.credentials",
            "http.headers",
        ] {
            assert!(is_secret_property(name), "{name}");
        }
    }

    #[test]
    fn settings_and_paths_are_not() {
        for name in [
            "sasl.username",
            "sasl.mechanism",
            "security.protocol",
            "ssl.certificate.pem",
            "ssl.ca.pem",
            "ssl.key.location",
            "ssl.keystore.location",
            "sasl.kerberos.keytab",
            "sasl.oauthbearer.assertion.private.key.file",
            "key.serializer",
            "ssl.keymanager.algorithm",
            "client.id",
            "linger.ms",
            "compression.type",
            "enable.ssl.certificate.verification",
        ] {
            assert!(!is_secret_property(name), "{name}");
        }
    }
}
