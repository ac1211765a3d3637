//! Who may do what over the API: bearer tokens, each with a [`Role`], and
//! the role each request needs.
//!
//! Tokens come from `--token` (one admin token) and from a tokens file the
//! operator manages (`--tokens FILE`), which holds only their SHA-256:
//!
//! ```text
//! # <role> sha256:<hex of the token's SHA-256> [label]
//! read   sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 dashboards
//! deploy sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 ci
//! ```
//!
//! The server must start with the file there and well formed. Then it
//! reads the file every second and takes its tokens again when its
//! contents changed (it compares their SHA-256, so a rewrite of the same
//! length within one tick of the file system's clock is noticed), and at
//! once on SIGHUP ([`watch`]). What a reload finds:
//!
//! * well-formed lines: exactly those tokens are in force;
//! * an empty file (or only comments), or no file (deleted): no tokens from
//!   the file; its tokens are revoked, and only `--token`, if given, is
//!   accepted (a server with a tokens file never opens up without one);
//! * a malformed or unreadable file: an error, logged, and the tokens read
//!   before stay in force until it is fixed, so a typo never locks everyone
//!   out nor lets a revoked token back in.
//!
//! Write the file whole (a new file renamed over it): a reader catching a
//! half-written file sees fewer tokens, or a malformed line, until the
//! next second. Tokens are compared by hash, in constant time, and never
//! stored or logged in clear.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::Method;
use sha2::{Digest, Sha256};

use super::ApiError;

/// What a token may do; each role may also do all the roles below it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Every `GET` route, `/metrics` included.
    Read,
    /// Also upload functions, deploy, savepoint, stop and upgrade.
    Deploy,
    /// Also every `DELETE`, and `override_kafka_marker`.
    Admin,
}

impl Role {
    /// Its name in the tokens file: `read`, `deploy`, `admin`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Deploy => "deploy",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "read" => Ok(Role::Read),
            "deploy" => Ok(Role::Deploy),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("{text:?} is not a role (read, deploy or admin)")),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The role of a request's bearer (admin when no token is configured),
/// for handlers whose role check depends on the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller(pub(crate) Role);

/// Which token the caller holds, for limits counted per token: the first
/// 8 bytes of its SHA-256 in hex (never the token), or `None` when the
/// server has no tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bearer(pub(crate) Option<String>);

/// Why the tokens could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The tokens file cannot be read.
    #[error("tokens file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of the tokens file is malformed.
    #[error(
        "tokens file {} line {line}: {message}; each line is `<role> sha256:<hex> [label]` \
         (role read, deploy or admin) or a `#` comment, as `weir token new` prints",
        path.display()
    )]
    Line {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The operating system gave no random bytes.
    #[error("no random bytes from the operating system: {0}")]
    Random(String),
}

/// One token of a tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    role: Role,
    hash: [u8; 32],
}

/// The tokens of a tokens file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenSet {
    entries: Vec<Entry>,
}

impl TokenSet {
    /// Parse the text of the tokens file at `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, AccessError> {
        let mut entries: Vec<(usize, Entry)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let error = |message: String| AccessError::Line {
                path: path.to_path_buf(),
                line: number,
                message,
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let role: Role = words.next().unwrap_or_default().parse().map_err(error)?;
            let hash =
                words.next().ok_or_else(|| error("no `sha256:<hex>` after the role".into()))?;
            let hex = hash.strip_prefix("sha256:").ok_or_else(|| {
                error(format!("{hash:?} is not `sha256:<hex>` (the hash, never the token)"))
            })?;
            let mut bytes = [0u8; 32];
            hex::decode_to_slice(hex, &mut bytes)
                .map_err(|_| error(format!("{hex:?} is not 64 hex digits")))?;
            if let Some((other, _)) = entries.iter().find(|(_, e)| e.hash == bytes) {
                return Err(error(format!("the same token as line {other}")));
            }
            entries.push((number, Entry { role, hash: bytes }));
        }
        Ok(Self { entries: entries.into_iter().map(|(_, e)| e).collect() })
    }

    /// How many tokens it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The role of the token whose hash is `hash`, if it is one. Every
    /// entry is compared, each in constant time.
    fn role_of(&self, hash: &[u8; 32]) -> Option<Role> {
        self.entries.iter().fold(None, |found, entry| {
            if constant_time_eq(&entry.hash, hash) {
                found.max(Some(entry.role))
            } else {
                found
            }
        })
    }
}

/// The SHA-256 of a token.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A fresh token: 32 bytes from the operating system's random source, as
/// 64 hex digits.
pub fn new_token() -> Result<String, AccessError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AccessError::Random(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// The tokens file line for `token` with `role` (and `label`).
pub fn token_line(role: Role, token: &str, label: Option<&str>) -> String {
    let hash = hex::encode(hash_token(token));
    match label {
        Some(label) => format!("{role} sha256:{hash} {label}"),
        None => format!("{role} sha256:{hash}"),
    }
}

/// Compare without an early exit, so timing does not reveal the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the tokens file held when last looked at. Its contents' hash, not
/// its modification time and length: a rewrite of the same length within
/// one tick of the file system's clock changes neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// There was no file.
    Missing,
    /// It could not be read (its error was logged).
    Unreadable,
    /// The SHA-256 of its bytes.
    Contents([u8; 32]),
}

/// Read the tokens file: what was seen, and its tokens — none when there
/// is no file; an error when it cannot be read or is malformed.
fn look(path: &Path) -> (Seen, Result<TokenSet, AccessError>) {
    let failed = |source| AccessError::Read { path: path.to_path_buf(), source };
    match std::fs::read(path) {
        Ok(bytes) => {
            let seen = Seen::Contents(Sha256::digest(&bytes).into());
            let tokens = String::from_utf8(bytes)
                .map_err(|e| failed(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
                .and_then(|text| TokenSet::parse(path, &text));
            (seen, tokens)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            (Seen::Missing, Ok(TokenSet::default()))
        }
        Err(error) => (Seen::Unreadable, Err(failed(error))),
    }
}

/// A tokens file and the tokens last read from it.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    /// The file as last looked at (read well or not), and the tokens in
    /// force.
    current: RwLock<(Seen, Arc<TokenSet>)>,
}

/// The tokens a server accepts.
#[derive(Debug, Default)]
pub struct Access {
    /// `--token`'s hash: an admin token.
    admin: Option<[u8; 32]>,
    file: Option<TokenFile>,
}

impl Access {
    /// The `--token` (if any, an admin token) and the tokens file (if any),
    /// read now: a missing, unreadable or malformed file is an error (an
    /// empty one is not: it holds no tokens).
    pub fn open(token: Option<&str>, tokens_file: Option<&Path>) -> Result<Self, AccessError> {
        let file = match tokens_file {
            Some(path) => {
                let (seen, tokens) = look(path);
                if seen == Seen::Missing {
                    let source = std::io::Error::from(std::io::ErrorKind::NotFound);
                    return Err(AccessError::Read { path: path.to_path_buf(), source });
                }
                let tokens = tokens?;
                Some(TokenFile {
                    path: path.to_path_buf(),
                    current: RwLock::new((seen, Arc::new(tokens))),
                })
            }
            None => None,
        };
        Ok(Self { admin: token.map(hash_token), file })
    }

    /// Whether requests need a token (one is configured).
    pub fn required(&self) -> bool {
        self.admin.is_some() || self.file.is_some()
    }

    /// The tokens file, if one is configured.
    pub fn tokens_file(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.path.as_path())
    }

    /// The role of `token`, if it is one this server accepts.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        let hash = hash_token(token);
        let admin = self.admin.filter(|admin| constant_time_eq(admin, &hash)).map(|_| Role::Admin);
        let listed = self.file.as_ref().and_then(|file| {
            let current = file.current.read().unwrap_or_else(|e| e.into_inner());
            current.1.role_of(&hash)
        });
        admin.max(listed)
    }

    /// The role the bearer of `authorization` (the header's value) has, if
    /// it may do what needs `needed`: 401 without a valid token, 403 with
    /// one of too small a role. Without tokens configured, everyone is
    /// admin.
    pub fn authorize(&self, authorization: Option<&str>, needed: Role) -> Result<Role, ApiError> {
        if !self.required() {
            return Ok(Role::Admin);
        }
        let token = authorization.and_then(|v| v.strip_prefix("Bearer "));
        let role = token.and_then(|t| self.role_of(t)).ok_or_else(ApiError::unauthorized)?;
        if role < needed {
            return Err(ApiError::forbidden(format!(
                "this needs a token of role {needed} (or above); yours is {role}"
            )));
        }
        Ok(role)
    }

    /// Who the bearer of `authorization` (an authorized request's header)
    /// is, for limits counted per token: `None` without tokens configured.
    pub(crate) fn bearer(&self, authorization: Option<&str>) -> Bearer {
        let token = authorization.and_then(|v| v.strip_prefix("Bearer "));
        Bearer(token.filter(|_| self.required()).map(|t| hex::encode(&hash_token(t)[..8])))
    }

    /// Take the tokens file's tokens again if its contents changed since it
    /// was last looked at (or in any case with `force`): how many it holds
    /// now, or `None` when nothing changed. A deleted file holds none: its
    /// tokens are revoked, as an empty file's are. A file that cannot be
    /// read or is malformed is an error and leaves the tokens in force as
    /// they were (it is not reported again until it changes or `force`).
    pub fn reload(&self, force: bool) -> Result<Option<usize>, AccessError> {
        let Some(file) = &self.file else { return Ok(None) };
        let (seen, read) = look(&file.path);
        {
            let current = file.current.read().unwrap_or_else(|e| e.into_inner());
            if !force && current.0 == seen {
                return Ok(None);
            }
        }
        let mut current = file.current.write().unwrap_or_else(|e| e.into_inner());
        current.0 = seen;
        let tokens = read?;
        let count = tokens.len();
        current.1 = Arc::new(tokens);
        Ok(Some(count))
    }
}

/// Keep the tokens file's tokens current: look at the file every second
/// and read it again when it changed, and at once on SIGHUP. Returns at
/// once without a tokens file (SIGHUP then keeps its default action).
pub(crate) async fn watch(access: Arc<Access>) {
    let Some(path) = access.tokens_file().map(Path::to_path_buf) else { return };
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| {
            tracing::warn!(
                "cannot catch SIGHUP ({e}); the tokens file is still read when it changes"
            );
        });
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        #[cfg(unix)]
        let force = match hangup.as_mut() {
            Ok(signal) => tokio::select! {
                _ = tick.tick() => false,
                _ = signal.recv() => true,
            },
            Err(()) => {
                tick.tick().await;
                false
            }
        };
        #[cfg(not(unix))]
        let force = {
            tick.tick().await;
            false
        };
        match access.reload(force) {
            Ok(Some(0)) => {
                tracing::warn!(path = %path.display(), "the tokens file is gone or holds no tokens: its tokens are revoked, only --token (if given) is accepted");
            }
            Ok(Some(count)) => {
                tracing::info!(path = %path.display(), tokens = count, "tokens file read again");
            }
            Ok(None) => {}
            Err(error) => {
                tracing::error!("{error}; the tokens read before stay in force until it is fixed");
            }
        }
    }
}

/// The role a request needs, from its method, path and query: `GET` (and
/// `HEAD`) read; `DELETE` admin; a deploy with `override_kafka_marker`
/// admin; other `PUT` and `POST` deploy; anything else admin. (An
/// upgrade's `override_kafka_marker` is in its body: its handler asks for
/// admin.)
pub fn needed_role(method: &Method, path: &str, query: Option<&str>) -> Role {
    match *method {
        Method::GET | Method::HEAD => Role::Read,
        Method::POST if path == "/v1/pipelines" && overrides_marker(query) => Role::Admin,
        Method::PUT | Method::POST => Role::Deploy,
        _ => Role::Admin,
    }
}

/// Whether a query asks for `override_kafka_marker` (any value but
/// `false`, so an unreadable one errs on the safe side).
fn overrides_marker(query: Option<&str>) -> bool {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(key, value)| key == "override_kafka_marker" && value != "false")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(role: &str, token: &str) -> String {
        format!("{role} sha256:{}", hex::encode(hash_token(token)))
    }

    #[test]
    fn a_tokens_file_parses_roles_hashes_labels_and_comments() {
        let text = format!(
            "# tokens\n\n{}\n  {} ci job  \n{}\n",
            line("read", "r"),
            line("deploy", "d"),
            line("admin", "a")
        );
        let set = TokenSet::parse(Path::new("t"), &text).unwrap();
        assert_eq!(set.len(), 3);
        assert_eq!(set.role_of(&hash_token("r")), Some(Role::Read));
        assert_eq!(set.role_of(&hash_token("d")), Some(Role::Deploy));
        assert_eq!(set.role_of(&hash_token("a")), Some(Role::Admin));
        assert_eq!(set.role_of(&hash_token("x")), None);
        assert!(TokenSet::parse(Path::new("t"), "# nothing\n").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_line_is_named() {
        let good = line("read", "r");
        for (text, says) in [
            (format!("{good}\nroot sha256:{}", "0".repeat(64)), "line 2: \"root\" is not a role"),
            ("deploy\n".to_string(), "line 1: no `sha256:<hex>`"),
            ("deploy s3cret\n".to_string(), "line 1: \"s3cret\" is not `sha256:<hex>`"),
            ("# c\nread sha256:abc\n".to_string(), "line 2: \"abc\" is not 64 hex digits"),
            (format!("{good}\n{good} again\n"), "line 2: the same token as line 1"),
        ] {
            let error = TokenSet::parse(Path::new("/etc/weir/tokens"), &text).unwrap_err();
            let message = error.to_string();
            assert!(message.contains(says), "{message}");
            assert!(message.starts_with("tokens file /etc/weir/tokens line"), "{message}");
        }
    }

    #[test]
    fn a_new_token_is_random_and_its_line_parses_back() {
        let (one, two) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(one.len(), 64);
        assert_ne!(one, two);
        let text = token_line(Role::Deploy, &one, Some("ci"));
        assert!(text.starts_with("deploy sha256:") && text.ends_with(" ci"), "{text}");
        let set = TokenSet::parse(Path::new("t"), &text).unwrap();
        assert_eq!(set.role_of(&hash_token(&one)), Some(Role::Deploy));
        assert!(!text.contains(&one), "the line holds the hash, not the token");
    }

    #[test]
    fn roles_follow_the_method_and_route() {
        let need =
            |method: Method, path: &str, query: Option<&str>| needed_role(&method, path, query);
        assert_eq!(need(Method::GET, "/metrics", None), Role::Read);
        assert_eq!(need(Method::GET, "/v1/pipelines/p", None), Role::Read);
        assert_eq!(need(Method::PUT, "/v1/functions/f", None), Role::Deploy);
        assert_eq!(need(Method::POST, "/v1/pipelines", Some("restore=x")), Role::Deploy);
        assert_eq!(need(Method::POST, "/v1/pipelines/p/stop", None), Role::Deploy);
        assert_eq!(need(Method::POST, "/v1/pipelines/p/upgrade", None), Role::Deploy);
        assert_eq!(need(Method::DELETE, "/v1/pipelines/p", None), Role::Admin);
        assert_eq!(need(Method::DELETE, "/v1/functions/f", None), Role::Admin);
        assert_eq!(need(Method::PATCH, "/v1/pipelines/p", None), Role::Admin);
        for query in ["override_kafka_marker=true", "a=1&override_kafka_marker=1"] {
            assert_eq!(need(Method::POST, "/v1/pipelines", Some(query)), Role::Admin, "{query}");
        }
        let off = Some("override_kafka_marker=false");
        assert_eq!(need(Method::POST, "/v1/pipelines", off), Role::Deploy);
    }

    #[test]
    fn authorize_answers_401_for_unknown_tokens_and_403_for_small_roles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("{}\n{}\n", line("read", "r"), line("deploy", "d"))).unwrap();
        let access = Access::open(Some("root"), Some(&path)).unwrap();
        assert!(access.required());
        assert_eq!(access.authorize(Some("Bearer r"), Role::Read), Ok(Role::Read));
        let refused = access.authorize(Some("Bearer r"), Role::Deploy).unwrap_err();
        assert_eq!((refused.status.as_u16(), refused.code), (403, "forbidden"));
        assert!(refused.message.contains("role deploy"), "{}", refused.message);
        assert_eq!(access.authorize(Some("Bearer d"), Role::Deploy), Ok(Role::Deploy));
        assert_eq!(access.authorize(Some("Bearer d"), Role::Admin).unwrap_err().status, 403);
        assert_eq!(access.authorize(Some("Bearer root"), Role::Admin), Ok(Role::Admin));
        for header in [None, Some("Bearer nope"), Some("r"), Some("Basic r")] {
            assert_eq!(access.authorize(header, Role::Read).unwrap_err().code, "unauthorized");
        }
        let open = Access::open(None, None).unwrap();
        assert_eq!(open.authorize(None, Role::Admin), Ok(Role::Admin));
    }

    #[test]
    fn a_reload_takes_new_tokens_and_a_failed_one_keeps_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, line("read", "old")).unwrap();
        let access = Access::open(None, Some(&path)).unwrap();
        assert_eq!(access.reload(false).unwrap(), None, "unchanged");
        std::fs::write(&path, format!("{}\n# rotated\n", line("admin", "new"))).unwrap();
        assert_eq!(access.reload(false).unwrap(), Some(1));
        assert_eq!(access.role_of("old"), None);
        assert_eq!(access.role_of("new"), Some(Role::Admin));
        std::fs::write(&path, "admin new\n").unwrap();
        let error = access.reload(true).unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
        assert_eq!(access.role_of("new"), Some(Role::Admin), "the old tokens stay");
        assert!(Access::open(None, Some(&path)).is_err(), "a malformed file refuses to start");
        std::fs::remove_file(&path).unwrap();
        assert!(Access::open(None, Some(&path)).is_err(), "a missing file refuses to start");
    }

    #[test]
    fn a_deleted_or_emptied_tokens_file_revokes_its_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("{}\n", line("deploy", "ci"))).unwrap();
        let access = Access::open(Some("root"), Some(&path)).unwrap();
        assert_eq!(access.role_of("ci"), Some(Role::Deploy));

        std::fs::remove_file(&path).unwrap();
        assert_eq!(access.reload(false).unwrap(), Some(0), "the deletion is noticed");
        assert_eq!(access.role_of("ci"), None, "a deleted file's tokens are revoked");
        assert_eq!(access.role_of("root"), Some(Role::Admin), "--token stays");
        assert!(access.required(), "the API does not open up");
        assert_eq!(access.reload(false).unwrap(), None, "still gone: nothing new");

        std::fs::write(&path, format!("{}\n", line("deploy", "ci"))).unwrap();
        assert_eq!(access.reload(false).unwrap(), Some(1), "a file put back is read");
        assert_eq!(access.role_of("ci"), Some(Role::Deploy));

        for empty in ["", "\n", "# every token revoked\n"] {
            std::fs::write(&path, format!("{}\n", line("deploy", "ci"))).unwrap();
            access.reload(true).unwrap();
            assert_eq!(access.role_of("ci"), Some(Role::Deploy));
            std::fs::write(&path, empty).unwrap();
            assert_eq!(access.reload(false).unwrap(), Some(0), "{empty:?}");
            assert_eq!(access.role_of("ci"), None, "an empty file ({empty:?}) revokes");
        }

        // Without --token, nobody is let in any more.
        let alone = Access::open(None, Some(&path)).unwrap();
        assert!(alone.required());
        assert_eq!(alone.authorize(None, Role::Read).unwrap_err().code, "unauthorized");
    }

    #[test]
    fn a_same_size_rewrite_within_one_clock_tick_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("{}\n", line("read", "old"))).unwrap();
        let before = std::fs::metadata(&path).unwrap();
        let access = Access::open(None, Some(&path)).unwrap();
        // Rewritten in place, as long as before, within the same tick of
        // the file system's clock (set back to the old time here).
        std::fs::write(&path, format!("{}\n", line("read", "new"))).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(before.modified().unwrap()).unwrap();
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (after.modified().unwrap(), after.len()),
            (before.modified().unwrap(), before.len())
        );

        assert_eq!(access.reload(false).unwrap(), Some(1), "the change is noticed");
        assert_eq!(access.role_of("new"), Some(Role::Read));
        assert_eq!(access.role_of("old"), None);
        assert_eq!(access.reload(false).unwrap(), None, "unchanged since");
    }
}
