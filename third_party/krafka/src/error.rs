//! Error types for Krafka.
//!
//! Every fallible operation returns [`KrafkaError`]. Three predicates answer
//! what to do next without matching on variants:
//!
//! | Predicate | Meaning |
//! |-----------|---------|
//! | [`is_retriable`](KrafkaError::is_retriable) | The same operation may succeed if tried again. |
//! | [`requires_abort`](KrafkaError::requires_abort) | The open transaction must be aborted; the producer stays usable. |
//! | [`is_fatal`](KrafkaError::is_fatal) | The client cannot continue; build a new one. |
//!
//! `requires_abort` and `is_fatal` are never both true.

use std::fmt;
use std::io;
use std::sync::Arc;

use thiserror::Error;

/// Wraps an `Arc<dyn Error>` so that `thiserror`'s `#[source]` attribute
/// can chain it through the standard `std::error::Error::source()` API.
///
/// `Arc` is used instead of `Box` so that `KrafkaError` remains `Clone`.
#[derive(Debug, Clone)]
pub struct ArcError(Arc<dyn std::error::Error + Send + Sync>);

impl ArcError {
    /// Wrap any error in an `ArcError`.
    pub fn new<E: std::error::Error + Send + Sync + 'static>(err: E) -> Self {
        Self(Arc::new(err))
    }

    /// Access the inner error.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync) {
        self.0.as_ref()
    }
}

impl fmt::Display for ArcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ArcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// The main error type for Krafka operations.
#[non_exhaustive]
#[derive(Debug, Clone, Error)]
pub enum KrafkaError {
    /// Network-related errors: connecting, I/O, a broker that is not
    /// reachable or not known. Retriable.
    ///
    /// Wrapped in `Arc` so that cloning preserves the full error chain
    /// (including `raw_os_error()` and `source()`).
    #[error("network error: {0}")]
    Network(#[source] Arc<io::Error>),

    /// Protocol encoding/decoding errors.
    ///
    /// The structured classification is available via
    /// [`KrafkaError::protocol_error_kind`], allowing callers to drive retry
    /// policy without substring-matching the message.
    #[error("protocol error ({kind:?}): {message}")]
    Protocol {
        /// Structured classification of the protocol error.
        kind: ProtocolErrorKind,
        /// Human-readable error message with specific details.
        message: String,
    },

    /// Authentication failed: SASL, a TLS certificate the client rejected or
    /// that rejected the client, or the OIDC token endpoint. Fatal.
    #[error("authentication error: {message}")]
    Auth {
        /// Error message describing the authentication failure.
        message: String,
        /// Underlying cause, if any (TLS error, token-endpoint response, …).
        #[source]
        source: Option<ArcError>,
    },

    /// An operation did not complete within its time bound. Retriable.
    #[error("operation timed out: {operation}")]
    Timeout {
        /// The operation that timed out.
        operation: String,
    },

    /// A record was not acknowledged within `delivery_timeout`.
    ///
    /// `possibly_written` is `true` when a produce request carrying the record
    /// reached the wire: the broker may have appended it, so resending can
    /// duplicate it. When `false`, the record never left the client.
    #[error("delivery timed out (possibly written: {possibly_written}): {message}")]
    DeliveryTimeout {
        /// Whether the broker may have appended the record.
        possibly_written: bool,
        /// Human-readable detail, including the last error seen.
        message: String,
    },

    /// Broker errors returned by Kafka.
    #[error("broker error: {code:?} - {message}")]
    Broker {
        /// The Kafka error code.
        code: ErrorCode,
        /// Human-readable error message.
        message: String,
    },

    /// Configuration errors.
    #[error("configuration error: {message}")]
    Config {
        /// Error message describing the configuration problem.
        message: String,
    },

    /// Compression errors.
    #[error("compression error: {message}")]
    Compression {
        /// Error message describing the compression failure.
        message: String,
    },

    /// Serialization errors.
    #[error("serialization error: {message}")]
    Serialization {
        /// Error message describing the serialization failure.
        message: String,
    },

    /// A consumed record could not be deserialized.
    ///
    /// Carries the record's coordinates rather than only a message, because
    /// the only way to make progress past a permanently undeserializable
    /// record is to seek past it — and that needs the topic, partition and
    /// offset:
    ///
    /// ```rust,ignore
    /// match consumer.poll(timeout).await {
    ///     Err(KrafkaError::RecordDeserialization { topic, partition, offset, .. }) => {
    ///         consumer.seek(&topic, partition, offset + 1).await?;
    ///     }
    ///     other => other?,
    /// };
    /// ```
    ///
    /// The consumer does **not** advance past the offending record on its own:
    /// the record and everything fetched behind it are put back, so nothing is
    /// skipped silently. Equivalent to the Java client's
    /// `RecordDeserializationException`.
    #[error(
        "failed to deserialize the {part} of {topic}-{partition} at offset {offset}: {message}"
    )]
    RecordDeserialization {
        /// Topic the record was read from.
        topic: String,
        /// Partition the record was read from.
        partition: crate::PartitionId,
        /// Offset of the record that could not be deserialized.
        offset: i64,
        /// Which half of the record failed — `"key"` or `"value"`.
        part: &'static str,
        /// Human-readable description of the failure.
        message: String,
    },

    /// The client, or the component the call needed, has been closed. Fatal.
    #[error("closed: {message}")]
    Closed {
        /// What was closed.
        message: String,
    },

    /// A blocking consumer call was interrupted by `wakeup()`.
    #[error("wakeup() was called")]
    Wakeup,

    /// Another producer with the same identity took over; this one is
    /// fenced. Fatal: build a new producer.
    #[error("fenced: {message}")]
    Fenced {
        /// Human-readable detail.
        message: String,
    },

    /// The open transaction cannot commit and must be aborted. The producer
    /// stays usable after `abort()`.
    #[error("transaction must be aborted: {message}")]
    TransactionAbortable {
        /// Human-readable detail.
        message: String,
    },

    /// Partitions have no committed offset and the reset policy is `None`.
    ///
    /// Equivalent to the Java client's `NoOffsetForPartitionException`.
    #[error("no offset and no reset policy for {}", format_partitions(partitions))]
    NoOffset {
        /// The partitions without a position.
        partitions: Vec<(String, crate::PartitionId)>,
    },

    /// The topic does not exist, or the client has no metadata for it.
    #[error("unknown topic: {topic}")]
    UnknownTopic {
        /// The topic name.
        topic: String,
    },

    /// The broker rejected a batch's sequence number: an earlier batch of the
    /// same partition was lost.
    #[error("out-of-order sequence on {topic}-{partition}: {message}")]
    OutOfOrderSequence {
        /// Topic of the rejected batch.
        topic: String,
        /// Partition of the rejected batch.
        partition: crate::PartitionId,
        /// Human-readable detail.
        message: String,
    },

    /// The call is not valid in the client's current state (for example
    /// `send` before `begin`), or an internal invariant broke.
    #[error("illegal state: {message}")]
    IllegalState {
        /// Human-readable detail.
        message: String,
    },
}

fn format_partitions(partitions: &[(String, crate::PartitionId)]) -> String {
    partitions
        .iter()
        .map(|(topic, partition)| format!("{topic}-{partition}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<io::Error> for KrafkaError {
    fn from(err: io::Error) -> Self {
        Self::Network(Arc::new(err))
    }
}

impl From<tokio::time::error::Elapsed> for KrafkaError {
    fn from(_: tokio::time::error::Elapsed) -> Self {
        Self::Timeout {
            operation: "operation timed out".to_string(),
        }
    }
}

impl KrafkaError {
    /// Create a new network error from an I/O error.
    #[cold]
    pub fn network(err: io::Error) -> Self {
        Self::Network(Arc::new(err))
    }

    /// A network error for a broker, leader or address the client cannot
    /// currently reach or resolve. Retriable.
    #[cold]
    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::network(io::Error::new(io::ErrorKind::NotConnected, message.into()))
    }

    /// Create a new protocol error with an explicit [`ProtocolErrorKind`].
    #[cold]
    pub fn protocol_kind(kind: ProtocolErrorKind, message: impl Into<String>) -> Self {
        Self::Protocol {
            kind,
            message: message.into(),
        }
    }

    /// Create a new authentication error.
    #[cold]
    pub fn auth(message: impl Into<String>) -> Self {
        Self::Auth {
            message: message.into(),
            source: None,
        }
    }

    /// Create a new authentication error with an underlying cause, kept in
    /// `std::error::Error::source()`.
    #[cold]
    pub fn auth_with_source<E>(message: impl Into<String>, source: E) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::Auth {
            message: message.into(),
            source: Some(ArcError::new(source)),
        }
    }

    /// Create a new timeout error.
    #[cold]
    pub fn timeout(operation: impl Into<String>) -> Self {
        Self::Timeout {
            operation: operation.into(),
        }
    }

    /// Create a new delivery-timeout error.
    #[cold]
    pub fn delivery_timeout(possibly_written: bool, message: impl Into<String>) -> Self {
        Self::DeliveryTimeout {
            possibly_written,
            message: message.into(),
        }
    }

    /// Create a new broker error.
    #[cold]
    pub fn broker(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Broker {
            code,
            message: message.into(),
        }
    }

    /// Create a new configuration error.
    #[cold]
    pub fn config(message: impl Into<String>) -> Self {
        Self::Config {
            message: message.into(),
        }
    }

    /// Create a new compression error.
    #[cold]
    pub fn compression(message: impl Into<String>) -> Self {
        Self::Compression {
            message: message.into(),
        }
    }

    /// Create a new serialization error.
    #[cold]
    pub fn serialization(message: impl Into<String>) -> Self {
        Self::Serialization {
            message: message.into(),
        }
    }

    /// Create a new record-deserialization error.
    ///
    /// `part` is `"key"` or `"value"`; the topic, partition and offset are
    /// what let the caller seek past the record.
    #[cold]
    pub fn record_deserialization(
        topic: impl Into<String>,
        partition: crate::PartitionId,
        offset: i64,
        part: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self::RecordDeserialization {
            topic: topic.into(),
            partition,
            offset,
            part,
            message: message.into(),
        }
    }

    /// Create a new closed error.
    #[cold]
    pub fn closed(message: impl Into<String>) -> Self {
        Self::Closed {
            message: message.into(),
        }
    }

    /// Create a new fenced error.
    #[cold]
    pub fn fenced(message: impl Into<String>) -> Self {
        Self::Fenced {
            message: message.into(),
        }
    }

    /// Create a new transaction-abortable error.
    #[cold]
    pub fn transaction_abortable(message: impl Into<String>) -> Self {
        Self::TransactionAbortable {
            message: message.into(),
        }
    }

    /// Create a new no-offset error for `partitions`.
    #[cold]
    pub fn no_offset(partitions: Vec<(String, crate::PartitionId)>) -> Self {
        Self::NoOffset { partitions }
    }

    /// Create a new unknown-topic error.
    #[cold]
    pub fn unknown_topic(topic: impl Into<String>) -> Self {
        Self::UnknownTopic {
            topic: topic.into(),
        }
    }

    /// Create a new out-of-order-sequence error.
    #[cold]
    pub fn out_of_order_sequence(
        topic: impl Into<String>,
        partition: crate::PartitionId,
        message: impl Into<String>,
    ) -> Self {
        Self::OutOfOrderSequence {
            topic: topic.into(),
            partition,
            message: message.into(),
        }
    }

    /// Create a new illegal-state error.
    #[cold]
    pub fn illegal_state(message: impl Into<String>) -> Self {
        Self::IllegalState {
            message: message.into(),
        }
    }

    // Errors for a cluster that lacks a feature. Each names the feature and
    // the client setting that avoids it, where one exists.

    /// The broker cannot serve `ConsumerGroupHeartbeat` (KIP-848).
    #[cold]
    pub(crate) fn kip848_unsupported() -> Self {
        Self::protocol_kind(
            ProtocolErrorKind::UnknownApiVersion,
            "this cluster does not provide KIP-848 consumer groups: the broker does not support \
             ConsumerGroupHeartbeat. Use the classic protocol: \
             `.group_protocol(GroupProtocol::Classic)`",
        )
    }

    /// The broker cannot serve one of the share-group APIs (KIP-932).
    #[cold]
    pub(crate) fn share_groups_unsupported(api: crate::protocol::ApiKey) -> Self {
        Self::protocol_kind(
            ProtocolErrorKind::UnknownApiVersion,
            format!(
                "this cluster does not provide share groups (KIP-932): the broker does not \
                 support {api:?}. Share groups need Apache Kafka 4.2 or later"
            ),
        )
    }

    /// The broker cannot serve one of the transaction APIs.
    #[cold]
    pub(crate) fn transactions_unsupported(api: crate::protocol::ApiKey) -> Self {
        Self::protocol_kind(
            ProtocolErrorKind::UnknownApiVersion,
            format!(
                "this cluster does not provide transactions: the broker does not support {api:?}"
            ),
        )
    }

    /// An idempotent producer could not get a producer id: `cause` is the
    /// broker's code, or `None` when the broker has no usable
    /// `InitProducerId`.
    #[cold]
    pub(crate) fn idempotence_unavailable(cause: Option<ErrorCode>) -> Self {
        const HINT: &str = "the producer is idempotent by default; on a cluster without \
                            idempotent producers, build it with `.idempotent(false)`";
        match cause {
            Some(code) => Self::broker(
                code,
                format!("InitProducerId for the idempotent producer failed; {HINT}"),
            ),
            None => Self::protocol_kind(
                ProtocolErrorKind::UnknownApiVersion,
                format!("this cluster does not provide InitProducerId; {HINT}"),
            ),
        }
    }

    /// The broker rejected a batch's compression codec.
    #[cold]
    pub(crate) fn compression_unsupported(
        codec: crate::protocol::Compression,
        topic: &str,
        partition: crate::PartitionId,
    ) -> Self {
        Self::broker(
            ErrorCode::UnsupportedCompressionType,
            format!(
                "the broker rejected {codec:?} compression for {topic}-{partition}. Choose a codec \
                 the cluster accepts with `.compression(..)` or `.topic_compression(..)`, or \
                 `Compression::None`"
            ),
        )
    }

    /// Whether the same operation may succeed if tried again.
    ///
    /// True for network errors, timeouts, retriable broker codes and
    /// retriable protocol errors. A [`DeliveryTimeout`](Self::DeliveryTimeout)
    /// is not: the producer has already retried for the whole delivery budget.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::Network(_) | Self::Timeout { .. } => true,
            Self::Broker { code, .. } => code.is_retriable(),
            Self::Protocol { kind, .. } => kind.is_retriable(),
            _ => false,
        }
    }

    /// Whether the client cannot continue and must be rebuilt.
    ///
    /// True for [`Fenced`](Self::Fenced), [`Auth`](Self::Auth),
    /// [`Closed`](Self::Closed), and the broker codes that mean the same:
    /// a fenced producer or coordinator, an invalid transaction state, and a
    /// denied transactional id, cluster or SASL authentication.
    pub fn is_fatal(&self) -> bool {
        match self {
            Self::Fenced { .. } | Self::Auth { .. } | Self::Closed { .. } => true,
            Self::Broker { code, .. } => matches!(
                code,
                ErrorCode::ProducerFenced
                    | ErrorCode::InvalidProducerEpoch
                    | ErrorCode::TransactionCoordinatorFenced
                    | ErrorCode::TransactionalIdAuthorizationFailed
                    | ErrorCode::InvalidTxnState
                    | ErrorCode::ClusterAuthorizationFailed
                    | ErrorCode::SaslAuthenticationFailed
            ),
            _ => false,
        }
    }

    /// Whether the open transaction must be aborted before the producer can
    /// continue. The producer itself stays usable.
    pub fn requires_abort(&self) -> bool {
        matches!(
            self,
            Self::TransactionAbortable { .. }
                | Self::Broker {
                    code: ErrorCode::TransactionAbortable,
                    ..
                }
        )
    }

    /// Returns the structured classification for a protocol error.
    ///
    /// This is intended for callers that need to distinguish protocol
    /// failures programmatically without matching on the human-readable
    /// message text.
    #[must_use]
    pub fn protocol_error_kind(&self) -> Option<ProtocolErrorKind> {
        match self {
            Self::Protocol { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Structured classification of [`KrafkaError::Protocol`] errors.
///
/// The Kafka wire protocol surfaces many distinct failure modes (truncated
/// frames, CRC mismatches, version negotiation failures, oversized arrays,
/// etc.) that callers may want to distinguish without substring-matching the
/// error message. `ProtocolErrorKind` exposes the classification as a typed
/// enum while keeping the human-readable detail on the accompanying message.
///
/// Kinds are coarse on purpose — they reflect *retry/fail* decisions rather
/// than every possible broker-returned condition. Retriability is exposed via
/// [`ProtocolErrorKind::is_retriable`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolErrorKind {
    /// Buffer exhausted before a complete frame, field, or record could be read.
    ///
    /// Usually indicates a short read on the wire or a truncated response body.
    /// Retriable: the request may succeed on a fresh connection.
    TruncatedFrame,
    /// Record batch CRC32C did not match the computed checksum.
    ///
    /// Indicates corruption of the batch as stored or transmitted. **Not**
    /// retriable: re-fetching the same offset returns the same bytes.
    CrcMismatch,
    /// No mutually supported API version, or the broker does not advertise
    /// the required API at all.
    ///
    /// Not retriable — reflects a permanent client/broker version mismatch.
    UnknownApiVersion,
    /// An encoded length exceeds the protocol maximum (`i32::MAX`, `u32::MAX`,
    /// `i16::MAX` for `KafkaString`, etc.) or the configured safety cap
    /// (`MAX_DECODE_ARRAY_LEN`, `MAX_RECORD_HEADERS`).
    ///
    /// Not retriable — indicates a malformed response or a misconfigured cap.
    InvalidLength,
    /// A locally encoded request frame exceeds the configured
    /// `max_request_size` before it ever reaches the wire.
    ///
    /// Distinct from [`InvalidLength`](Self::InvalidLength), which covers
    /// malformed *inbound* data: this kind is raised only by the client's own
    /// pre-send frame-size guard, so the producer can treat it as "the batch
    /// is too large — split it and resend" without ever confusing it with a
    /// response that failed to decode. (Conflating the two once meant a
    /// truncated `ProduceResponse` could trigger a batch split-and-resend for
    /// records the broker may already have committed.)
    ///
    /// Not retriable as-is — the same frame will be rejected again; the
    /// producer's recovery is to split the batch, not to retry it.
    FrameTooLarge,
    /// Bytes decoded as a UTF-8 string were not valid UTF-8.
    ///
    /// Not retriable.
    InvalidUtf8,
    /// Record batch magic byte is not a supported version (only `2` is
    /// accepted today).
    ///
    /// Not retriable.
    UnsupportedMagic,
    /// A field value was outside its allowed range or encoded incorrectly
    /// (negative record count, bad enum discriminant, unknown header version,
    /// malformed varint, etc.).
    ///
    /// Not retriable.
    InvalidValue,
    /// The response was structurally malformed in a way that does not fit the
    /// other variants (unexpected partition in a response, missing required
    /// field, etc.).
    ///
    /// Retriable — often transient and resolves after a metadata refresh or
    /// reconnection.
    Malformed,
    /// Catch-all for protocol errors not otherwise classified.
    ///
    /// Not retriable by default; callers should inspect the message.
    Other,
}

impl ProtocolErrorKind {
    /// Returns true if this protocol error kind is typically transient and
    /// safe to retry after a reconnect or metadata refresh.
    ///
    /// [`CrcMismatch`](Self::CrcMismatch) is deliberately **not** retriable: a
    /// CRC failure means the batch as stored or transmitted is corrupt, and
    /// re-fetching the same offset returns the same bytes. Retrying spins
    /// forever instead of surfacing the corruption to the caller.
    pub fn is_retriable(self) -> bool {
        matches!(self, Self::TruncatedFrame | Self::Malformed)
    }
}

/// Kafka protocol error codes.
///
/// These are the standard error codes defined in the Kafka protocol.
/// Forward compatibility is provided by the `Unknown(i16)` variant.
///
/// This enum is `#[non_exhaustive]` — new Kafka error codes may be added as
/// named variants in future releases without a semver-major bump.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i16)]
pub enum ErrorCode {
    /// No error.
    #[default]
    None = 0,
    /// Unknown server error.
    UnknownServerError = -1,
    /// The requested offset is outside the range of offsets maintained by the server.
    OffsetOutOfRange = 1,
    /// Message contents does not match its CRC.
    CorruptMessage = 2,
    /// Unknown topic or partition.
    UnknownTopicOrPartition = 3,
    /// Invalid message size.
    InvalidMessageSize = 4,
    /// Leader not available.
    LeaderNotAvailable = 5,
    /// Not leader for partition.
    NotLeaderForPartition = 6,
    /// Request timed out.
    RequestTimedOut = 7,
    /// Broker not available.
    BrokerNotAvailable = 8,
    /// Replica not available.
    ReplicaNotAvailable = 9,
    /// Message too large.
    MessageTooLarge = 10,
    /// Stale controller epoch.
    StaleControllerEpoch = 11,
    /// Offset metadata too large.
    OffsetMetadataTooLarge = 12,
    /// Network exception.
    NetworkException = 13,
    /// Coordinator load in progress.
    CoordinatorLoadInProgress = 14,
    /// Coordinator not available.
    CoordinatorNotAvailable = 15,
    /// Not coordinator.
    NotCoordinator = 16,
    /// Invalid topic.
    InvalidTopic = 17,
    /// Record list too large.
    RecordListTooLarge = 18,
    /// Not enough replicas.
    NotEnoughReplicas = 19,
    /// Not enough replicas after append.
    NotEnoughReplicasAfterAppend = 20,
    /// Invalid required acks.
    InvalidRequiredAcks = 21,
    /// Illegal generation.
    IllegalGeneration = 22,
    /// Inconsistent group protocol.
    InconsistentGroupProtocol = 23,
    /// Invalid group ID.
    InvalidGroupId = 24,
    /// Unknown member ID.
    UnknownMemberId = 25,
    /// Invalid session timeout.
    InvalidSessionTimeout = 26,
    /// Rebalance in progress.
    RebalanceInProgress = 27,
    /// Invalid commit offset size.
    InvalidCommitOffsetSize = 28,
    /// Topic authorization failed.
    TopicAuthorizationFailed = 29,
    /// Group authorization failed.
    GroupAuthorizationFailed = 30,
    /// Cluster authorization failed.
    ClusterAuthorizationFailed = 31,
    /// Invalid timestamp.
    InvalidTimestamp = 32,
    /// Unsupported SASL mechanism.
    UnsupportedSaslMechanism = 33,
    /// Illegal SASL state.
    IllegalSaslState = 34,
    /// Unsupported version.
    UnsupportedVersion = 35,
    /// Topic already exists.
    TopicAlreadyExists = 36,
    /// Invalid partitions.
    InvalidPartitions = 37,
    /// Invalid replication factor.
    InvalidReplicationFactor = 38,
    /// Invalid replica assignment.
    InvalidReplicaAssignment = 39,
    /// Invalid config.
    InvalidConfig = 40,
    /// Not controller.
    NotController = 41,
    /// Invalid request.
    InvalidRequest = 42,
    /// Unsupported for message format.
    UnsupportedForMessageFormat = 43,
    /// Policy violation.
    PolicyViolation = 44,
    /// Out of order sequence number.
    OutOfOrderSequenceNumber = 45,
    /// Duplicate sequence number.
    DuplicateSequenceNumber = 46,
    /// Invalid producer epoch.
    InvalidProducerEpoch = 47,
    /// Invalid txn state.
    InvalidTxnState = 48,
    /// Invalid producer ID mapping.
    InvalidProducerIdMapping = 49,
    /// Invalid transaction timeout.
    InvalidTransactionTimeout = 50,
    /// Concurrent transactions.
    ConcurrentTransactions = 51,
    /// Transaction coordinator fenced.
    TransactionCoordinatorFenced = 52,
    /// Transactional ID authorization failed.
    TransactionalIdAuthorizationFailed = 53,
    /// Security disabled.
    SecurityDisabled = 54,
    /// Operation not attempted.
    OperationNotAttempted = 55,
    /// Kafka storage exception.
    KafkaStorageException = 56,
    /// Log directory not found.
    LogDirNotFound = 57,
    /// SASL authentication failed.
    SaslAuthenticationFailed = 58,
    /// Unknown producer ID.
    UnknownProducerId = 59,
    /// Reassignment in progress.
    ReassignmentInProgress = 60,
    /// Delegation token auth disabled.
    DelegationTokenAuthDisabled = 61,
    /// Delegation token not found.
    DelegationTokenNotFound = 62,
    /// Delegation token owner mismatch.
    DelegationTokenOwnerMismatch = 63,
    /// Delegation token request not allowed.
    DelegationTokenRequestNotAllowed = 64,
    /// Delegation token authorization failed.
    DelegationTokenAuthorizationFailed = 65,
    /// Delegation token expired.
    DelegationTokenExpired = 66,
    /// Invalid principal type.
    InvalidPrincipalType = 67,
    /// Non-empty group.
    NonEmptyGroup = 68,
    /// Group ID not found.
    GroupIdNotFound = 69,
    /// Fetch session ID not found.
    FetchSessionIdNotFound = 70,
    /// Invalid fetch session epoch.
    InvalidFetchSessionEpoch = 71,
    /// Listener not found.
    ListenerNotFound = 72,
    /// Topic deletion disabled.
    TopicDeletionDisabled = 73,
    /// Fenced leader epoch.
    FencedLeaderEpoch = 74,
    /// Unknown leader epoch.
    UnknownLeaderEpoch = 75,
    /// Unsupported compression type.
    UnsupportedCompressionType = 76,
    /// Stale broker epoch.
    StaleBrokerEpoch = 77,
    /// Offset not available.
    OffsetNotAvailable = 78,
    /// Member ID required.
    MemberIdRequired = 79,
    /// Preferred leader not available.
    PreferredLeaderNotAvailable = 80,
    /// Group max size reached.
    GroupMaxSizeReached = 81,
    /// Fenced instance ID.
    FencedInstanceId = 82,
    /// Eligible leaders not available.
    EligibleLeadersNotAvailable = 83,
    /// Election not needed.
    ElectionNotNeeded = 84,
    /// No reassignment in progress.
    NoReassignmentInProgress = 85,
    /// Group subscribed to topic.
    GroupSubscribedToTopic = 86,
    /// Invalid record.
    InvalidRecord = 87,
    /// Unstable offset commit.
    UnstableOffsetCommit = 88,
    /// The throttling quota has been exceeded.
    ThrottlingQuotaExceeded = 89,
    /// There is a newer producer with the same transactionalId which fences the current one.
    ProducerFenced = 90,
    /// A request illegally referred to a resource that does not exist.
    ResourceNotFound = 91,
    /// A request illegally referred to the same resource twice.
    DuplicateResource = 92,
    /// Requested credential would not meet criteria for acceptability.
    UnacceptableCredential = 93,
    /// Either the sender or recipient of a voter-only request is not one of the expected voters.
    InconsistentVoterSet = 94,
    /// The given update version was invalid.
    InvalidUpdateVersion = 95,
    /// Unable to update finalized features due to an unexpected server error.
    FeatureUpdateFailed = 96,
    /// Request principal deserialization failed during forwarding.
    PrincipalDeserializationFailure = 97,
    /// Requested snapshot was not found.
    SnapshotNotFound = 98,
    /// Requested position is not greater than or equal to zero, and less than the size of the snapshot.
    PositionOutOfRange = 99,
    /// This server does not host this topic ID.
    UnknownTopicId = 100,
    /// This broker ID is already in use.
    DuplicateBrokerRegistration = 101,
    /// The given broker ID was not registered.
    BrokerIdNotRegistered = 102,
    /// The log's topic ID did not match the topic ID in the request.
    InconsistentTopicId = 103,
    /// The clusterId in the request does not match that found on the server.
    InconsistentClusterId = 104,
    /// The transactionalId could not be found.
    TransactionalIdNotFound = 105,
    /// The fetch session encountered inconsistent topic ID usage.
    FetchSessionTopicIdError = 106,
    /// The new ISR contains at least one ineligible replica.
    IneligibleReplica = 107,
    /// The AlterPartition request successfully updated the partition state but the leader has changed.
    NewLeaderElected = 108,
    /// The requested offset is moved to tiered storage.
    OffsetMovedToTieredStorage = 109,
    /// Fenced member epoch (KIP-848).
    FencedMemberEpoch = 110,
    /// The instance ID is still used by another member in the consumer group (KIP-848).
    UnreleasedInstanceId = 111,
    /// The assignor or its version range is not supported by the consumer group (KIP-848).
    UnsupportedAssignor = 112,
    /// The member epoch is stale; retry after receiving an updated epoch via ConsumerGroupHeartbeat (KIP-848).
    StaleMemberEpoch = 113,
    /// The request was sent to an endpoint of the wrong type.
    MismatchedEndpointType = 114,
    /// The broker does not support this endpoint type.
    UnsupportedEndpointType = 115,
    /// This controller ID is not known.
    UnknownControllerId = 116,
    /// Client sent a push telemetry request with an invalid or outdated subscription ID.
    UnknownSubscriptionId = 117,
    /// Client sent a push telemetry request larger than the maximum size the broker will accept.
    TelemetryTooLarge = 118,
    /// The controller has considered the broker registration to be invalid.
    InvalidRegistration = 119,
    /// The server encountered an error with the transaction. The client can abort the transaction to continue (KIP-890).
    TransactionAbortable = 120,
    /// The record state is invalid (KIP-932).
    InvalidRecordState = 121,
    /// The share session was not found (KIP-932).
    ShareSessionNotFound = 122,
    /// The share session epoch is invalid (KIP-932).
    InvalidShareSessionEpoch = 123,
    /// The share coordinator rejected the request because the share-state epoch
    /// is fenced by a newer one (KIP-932).
    FencedStateEpoch = 124,
    /// The voter key in the request does not match the receiving replica's key
    /// (KIP-853).
    InvalidVoterKey = 125,
    /// The voter is already part of the set of voters (KIP-853).
    DuplicateVoter = 126,
    /// The voter is not part of the set of voters (KIP-853).
    VoterNotFound = 127,
    /// The regular expression is not valid (KIP-848 v1+).
    InvalidRegularExpression = 128,
    /// The client should rebootstrap to connect to the appropriate seed broker (KIP-899).
    RebootstrapRequired = 129,
    /// The supplied Kafka Streams topology is invalid (KIP-1071).
    StreamsInvalidTopology = 130,
    /// The supplied Kafka Streams topology epoch is invalid (KIP-1071).
    StreamsInvalidTopologyEpoch = 131,
    /// The Kafka Streams topology was fenced by a newer one (KIP-1071).
    StreamsTopologyFenced = 132,
    /// The share session limit has been reached on the broker (KIP-932).
    ShareSessionLimitReached = 133,
    /// Unknown error code.
    Unknown(i16),
}

impl ErrorCode {
    /// Create an ErrorCode from a raw i16 value.
    #[inline]
    pub fn from_i16(code: i16) -> Self {
        match code {
            0 => Self::None,
            -1 => Self::UnknownServerError,
            1 => Self::OffsetOutOfRange,
            2 => Self::CorruptMessage,
            3 => Self::UnknownTopicOrPartition,
            4 => Self::InvalidMessageSize,
            5 => Self::LeaderNotAvailable,
            6 => Self::NotLeaderForPartition,
            7 => Self::RequestTimedOut,
            8 => Self::BrokerNotAvailable,
            9 => Self::ReplicaNotAvailable,
            10 => Self::MessageTooLarge,
            11 => Self::StaleControllerEpoch,
            12 => Self::OffsetMetadataTooLarge,
            13 => Self::NetworkException,
            14 => Self::CoordinatorLoadInProgress,
            15 => Self::CoordinatorNotAvailable,
            16 => Self::NotCoordinator,
            17 => Self::InvalidTopic,
            18 => Self::RecordListTooLarge,
            19 => Self::NotEnoughReplicas,
            20 => Self::NotEnoughReplicasAfterAppend,
            21 => Self::InvalidRequiredAcks,
            22 => Self::IllegalGeneration,
            23 => Self::InconsistentGroupProtocol,
            24 => Self::InvalidGroupId,
            25 => Self::UnknownMemberId,
            26 => Self::InvalidSessionTimeout,
            27 => Self::RebalanceInProgress,
            28 => Self::InvalidCommitOffsetSize,
            29 => Self::TopicAuthorizationFailed,
            30 => Self::GroupAuthorizationFailed,
            31 => Self::ClusterAuthorizationFailed,
            32 => Self::InvalidTimestamp,
            33 => Self::UnsupportedSaslMechanism,
            34 => Self::IllegalSaslState,
            35 => Self::UnsupportedVersion,
            36 => Self::TopicAlreadyExists,
            37 => Self::InvalidPartitions,
            38 => Self::InvalidReplicationFactor,
            39 => Self::InvalidReplicaAssignment,
            40 => Self::InvalidConfig,
            41 => Self::NotController,
            42 => Self::InvalidRequest,
            43 => Self::UnsupportedForMessageFormat,
            44 => Self::PolicyViolation,
            45 => Self::OutOfOrderSequenceNumber,
            46 => Self::DuplicateSequenceNumber,
            47 => Self::InvalidProducerEpoch,
            48 => Self::InvalidTxnState,
            49 => Self::InvalidProducerIdMapping,
            50 => Self::InvalidTransactionTimeout,
            51 => Self::ConcurrentTransactions,
            52 => Self::TransactionCoordinatorFenced,
            53 => Self::TransactionalIdAuthorizationFailed,
            54 => Self::SecurityDisabled,
            55 => Self::OperationNotAttempted,
            56 => Self::KafkaStorageException,
            57 => Self::LogDirNotFound,
            58 => Self::SaslAuthenticationFailed,
            59 => Self::UnknownProducerId,
            60 => Self::ReassignmentInProgress,
            61 => Self::DelegationTokenAuthDisabled,
            62 => Self::DelegationTokenNotFound,
            63 => Self::DelegationTokenOwnerMismatch,
            64 => Self::DelegationTokenRequestNotAllowed,
            65 => Self::DelegationTokenAuthorizationFailed,
            66 => Self::DelegationTokenExpired,
            67 => Self::InvalidPrincipalType,
            68 => Self::NonEmptyGroup,
            69 => Self::GroupIdNotFound,
            70 => Self::FetchSessionIdNotFound,
            71 => Self::InvalidFetchSessionEpoch,
            72 => Self::ListenerNotFound,
            73 => Self::TopicDeletionDisabled,
            74 => Self::FencedLeaderEpoch,
            75 => Self::UnknownLeaderEpoch,
            76 => Self::UnsupportedCompressionType,
            77 => Self::StaleBrokerEpoch,
            78 => Self::OffsetNotAvailable,
            79 => Self::MemberIdRequired,
            80 => Self::PreferredLeaderNotAvailable,
            81 => Self::GroupMaxSizeReached,
            82 => Self::FencedInstanceId,
            83 => Self::EligibleLeadersNotAvailable,
            84 => Self::ElectionNotNeeded,
            85 => Self::NoReassignmentInProgress,
            86 => Self::GroupSubscribedToTopic,
            87 => Self::InvalidRecord,
            88 => Self::UnstableOffsetCommit,
            89 => Self::ThrottlingQuotaExceeded,
            90 => Self::ProducerFenced,
            91 => Self::ResourceNotFound,
            92 => Self::DuplicateResource,
            93 => Self::UnacceptableCredential,
            94 => Self::InconsistentVoterSet,
            95 => Self::InvalidUpdateVersion,
            96 => Self::FeatureUpdateFailed,
            97 => Self::PrincipalDeserializationFailure,
            98 => Self::SnapshotNotFound,
            99 => Self::PositionOutOfRange,
            100 => Self::UnknownTopicId,
            101 => Self::DuplicateBrokerRegistration,
            102 => Self::BrokerIdNotRegistered,
            103 => Self::InconsistentTopicId,
            104 => Self::InconsistentClusterId,
            105 => Self::TransactionalIdNotFound,
            106 => Self::FetchSessionTopicIdError,
            107 => Self::IneligibleReplica,
            108 => Self::NewLeaderElected,
            109 => Self::OffsetMovedToTieredStorage,
            110 => Self::FencedMemberEpoch,
            111 => Self::UnreleasedInstanceId,
            112 => Self::UnsupportedAssignor,
            113 => Self::StaleMemberEpoch,
            114 => Self::MismatchedEndpointType,
            115 => Self::UnsupportedEndpointType,
            116 => Self::UnknownControllerId,
            117 => Self::UnknownSubscriptionId,
            118 => Self::TelemetryTooLarge,
            119 => Self::InvalidRegistration,
            120 => Self::TransactionAbortable,
            121 => Self::InvalidRecordState,
            122 => Self::ShareSessionNotFound,
            123 => Self::InvalidShareSessionEpoch,
            124 => Self::FencedStateEpoch,
            125 => Self::InvalidVoterKey,
            126 => Self::DuplicateVoter,
            127 => Self::VoterNotFound,
            128 => Self::InvalidRegularExpression,
            129 => Self::RebootstrapRequired,
            130 => Self::StreamsInvalidTopology,
            131 => Self::StreamsInvalidTopologyEpoch,
            132 => Self::StreamsTopologyFenced,
            133 => Self::ShareSessionLimitReached,
            other => Self::Unknown(other),
        }
    }

    /// Convert the ErrorCode to its raw i16 value.
    #[inline]
    pub fn to_i16(self) -> i16 {
        match self {
            Self::None => 0,
            Self::UnknownServerError => -1,
            Self::OffsetOutOfRange => 1,
            Self::CorruptMessage => 2,
            Self::UnknownTopicOrPartition => 3,
            Self::InvalidMessageSize => 4,
            Self::LeaderNotAvailable => 5,
            Self::NotLeaderForPartition => 6,
            Self::RequestTimedOut => 7,
            Self::BrokerNotAvailable => 8,
            Self::ReplicaNotAvailable => 9,
            Self::MessageTooLarge => 10,
            Self::StaleControllerEpoch => 11,
            Self::OffsetMetadataTooLarge => 12,
            Self::NetworkException => 13,
            Self::CoordinatorLoadInProgress => 14,
            Self::CoordinatorNotAvailable => 15,
            Self::NotCoordinator => 16,
            Self::InvalidTopic => 17,
            Self::RecordListTooLarge => 18,
            Self::NotEnoughReplicas => 19,
            Self::NotEnoughReplicasAfterAppend => 20,
            Self::InvalidRequiredAcks => 21,
            Self::IllegalGeneration => 22,
            Self::InconsistentGroupProtocol => 23,
            Self::InvalidGroupId => 24,
            Self::UnknownMemberId => 25,
            Self::InvalidSessionTimeout => 26,
            Self::RebalanceInProgress => 27,
            Self::InvalidCommitOffsetSize => 28,
            Self::TopicAuthorizationFailed => 29,
            Self::GroupAuthorizationFailed => 30,
            Self::ClusterAuthorizationFailed => 31,
            Self::InvalidTimestamp => 32,
            Self::UnsupportedSaslMechanism => 33,
            Self::IllegalSaslState => 34,
            Self::UnsupportedVersion => 35,
            Self::TopicAlreadyExists => 36,
            Self::InvalidPartitions => 37,
            Self::InvalidReplicationFactor => 38,
            Self::InvalidReplicaAssignment => 39,
            Self::InvalidConfig => 40,
            Self::NotController => 41,
            Self::InvalidRequest => 42,
            Self::UnsupportedForMessageFormat => 43,
            Self::PolicyViolation => 44,
            Self::OutOfOrderSequenceNumber => 45,
            Self::DuplicateSequenceNumber => 46,
            Self::InvalidProducerEpoch => 47,
            Self::InvalidTxnState => 48,
            Self::InvalidProducerIdMapping => 49,
            Self::InvalidTransactionTimeout => 50,
            Self::ConcurrentTransactions => 51,
            Self::TransactionCoordinatorFenced => 52,
            Self::TransactionalIdAuthorizationFailed => 53,
            Self::SecurityDisabled => 54,
            Self::OperationNotAttempted => 55,
            Self::KafkaStorageException => 56,
            Self::LogDirNotFound => 57,
            Self::SaslAuthenticationFailed => 58,
            Self::UnknownProducerId => 59,
            Self::ReassignmentInProgress => 60,
            Self::DelegationTokenAuthDisabled => 61,
            Self::DelegationTokenNotFound => 62,
            Self::DelegationTokenOwnerMismatch => 63,
            Self::DelegationTokenRequestNotAllowed => 64,
            Self::DelegationTokenAuthorizationFailed => 65,
            Self::DelegationTokenExpired => 66,
            Self::InvalidPrincipalType => 67,
            Self::NonEmptyGroup => 68,
            Self::GroupIdNotFound => 69,
            Self::FetchSessionIdNotFound => 70,
            Self::InvalidFetchSessionEpoch => 71,
            Self::ListenerNotFound => 72,
            Self::TopicDeletionDisabled => 73,
            Self::FencedLeaderEpoch => 74,
            Self::UnknownLeaderEpoch => 75,
            Self::UnsupportedCompressionType => 76,
            Self::StaleBrokerEpoch => 77,
            Self::OffsetNotAvailable => 78,
            Self::MemberIdRequired => 79,
            Self::PreferredLeaderNotAvailable => 80,
            Self::GroupMaxSizeReached => 81,
            Self::FencedInstanceId => 82,
            Self::EligibleLeadersNotAvailable => 83,
            Self::ElectionNotNeeded => 84,
            Self::NoReassignmentInProgress => 85,
            Self::GroupSubscribedToTopic => 86,
            Self::InvalidRecord => 87,
            Self::UnstableOffsetCommit => 88,
            Self::ThrottlingQuotaExceeded => 89,
            Self::ProducerFenced => 90,
            Self::ResourceNotFound => 91,
            Self::DuplicateResource => 92,
            Self::UnacceptableCredential => 93,
            Self::InconsistentVoterSet => 94,
            Self::InvalidUpdateVersion => 95,
            Self::FeatureUpdateFailed => 96,
            Self::PrincipalDeserializationFailure => 97,
            Self::SnapshotNotFound => 98,
            Self::PositionOutOfRange => 99,
            Self::UnknownTopicId => 100,
            Self::DuplicateBrokerRegistration => 101,
            Self::BrokerIdNotRegistered => 102,
            Self::InconsistentTopicId => 103,
            Self::InconsistentClusterId => 104,
            Self::TransactionalIdNotFound => 105,
            Self::FetchSessionTopicIdError => 106,
            Self::IneligibleReplica => 107,
            Self::NewLeaderElected => 108,
            Self::OffsetMovedToTieredStorage => 109,
            Self::FencedMemberEpoch => 110,
            Self::UnreleasedInstanceId => 111,
            Self::UnsupportedAssignor => 112,
            Self::StaleMemberEpoch => 113,
            Self::MismatchedEndpointType => 114,
            Self::UnsupportedEndpointType => 115,
            Self::UnknownControllerId => 116,
            Self::UnknownSubscriptionId => 117,
            Self::TelemetryTooLarge => 118,
            Self::InvalidRegistration => 119,
            Self::TransactionAbortable => 120,
            Self::InvalidRecordState => 121,
            Self::ShareSessionNotFound => 122,
            Self::InvalidShareSessionEpoch => 123,
            Self::FencedStateEpoch => 124,
            Self::InvalidVoterKey => 125,
            Self::DuplicateVoter => 126,
            Self::VoterNotFound => 127,
            Self::InvalidRegularExpression => 128,
            Self::RebootstrapRequired => 129,
            Self::StreamsInvalidTopology => 130,
            Self::StreamsInvalidTopologyEpoch => 131,
            Self::StreamsTopologyFenced => 132,
            Self::ShareSessionLimitReached => 133,
            Self::Unknown(code) => code,
        }
    }

    /// Returns true if this error is retriable.
    ///
    /// # Reconciliation with Kafka's `Errors.java`
    ///
    /// For codes `0..=133` this classification follows the exception
    /// superclass chain of each entry in Apache Kafka's
    /// `org.apache.kafka.common.protocol.Errors`. An error is retriable in Java when its
    /// exception extends `RetriableException`, either directly or via
    /// `InvalidMetadataException` / `RefreshRetriableException`.
    ///
    /// Every code Java considers retriable is retriable here — the Java set is
    /// a strict subset, enforced by a unit test. krafka additionally treats the
    /// following as retriable, deliberately, because its own state machines
    /// recover from them by retrying rather than by failing the caller:
    ///
    /// | Code | Name | Java superclass | Why krafka retries |
    /// |-----:|------|-----------------|--------------------|
    /// | 8   | `BROKER_NOT_AVAILABLE`          | `ApiException` | Transient by definition; resolves once the broker re-registers. |
    /// | 27  | `REBALANCE_IN_PROGRESS`         | `ApiException` | Resolved by completing the rejoin; failing the caller aborts a healthy rebalance. |
    /// | 45  | `OUT_OF_ORDER_SEQUENCE_NUMBER`  | `ApiException` | The idempotent producer recovers by bumping the epoch and re-sending. |
    /// | 55  | `OPERATION_NOT_ATTEMPTED`       | `ApiException` | The broker explicitly did not attempt the operation; re-issuing is safe. |
    /// | 59  | `UNKNOWN_PRODUCER_ID`           | `OutOfOrderSequenceException` | Recovered by re-initialising the producer ID. |
    /// | 108 | `NEW_LEADER_ELECTED`            | `ApiException` | State was applied but leadership moved; a refresh + retry converges. |
    /// | 110 | `FENCED_MEMBER_EPOCH`           | `ApiException` | KIP-848: recovered by rejoining with the epoch from the next heartbeat. |
    /// | 113 | `STALE_MEMBER_EPOCH`            | `ApiException` | KIP-848: same as above — explicitly documented as "retry with a new epoch". |
    ///
    /// Note that [`Self::RebootstrapRequired`] (129) is **not** retriable in
    /// either model despite its name: it is handled by the dedicated
    /// rebootstrap path in
    /// [`ClusterMetadata`](crate::metadata::ClusterMetadata), not by a generic
    /// retry loop. Likewise [`Self::UnknownControllerId`] (116) is not
    /// retriable in general; the admin client's controller-routing loop handles
    /// it specifically.
    #[inline]
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            // ── Direct `RetriableException` subclasses ──
            Self::CorruptMessage                 // 2
                | Self::RequestTimedOut          // 7
                | Self::CoordinatorLoadInProgress // 14
                | Self::NotEnoughReplicas        // 19
                | Self::NotEnoughReplicasAfterAppend // 20
                | Self::NotController            // 41
                | Self::ConcurrentTransactions   // 51
                | Self::FetchSessionIdNotFound   // 70
                | Self::InvalidFetchSessionEpoch // 71
                | Self::UnknownLeaderEpoch       // 75
                | Self::OffsetNotAvailable       // 78
                | Self::UnstableOffsetCommit     // 88
                | Self::ThrottlingQuotaExceeded  // 89
                | Self::FetchSessionTopicIdError // 106
                // KIP-932 share-session errors: recovered by re-establishing
                // the share session against the broker.
                | Self::ShareSessionNotFound     // 122
                | Self::InvalidShareSessionEpoch // 123
                | Self::ShareSessionLimitReached // 133

                // ── Via `RefreshRetriableException` (coordinator discovery) ──
                | Self::CoordinatorNotAvailable  // 15
                | Self::NotCoordinator           // 16

                // ── Via `InvalidMetadataException` (resolved by a refresh) ──
                | Self::UnknownTopicOrPartition  // 3
                | Self::LeaderNotAvailable       // 5
                | Self::NotLeaderForPartition    // 6
                | Self::ReplicaNotAvailable      // 9
                | Self::NetworkException         // 13
                | Self::KafkaStorageException    // 56
                | Self::ListenerNotFound         // 72
                | Self::FencedLeaderEpoch        // 74
                | Self::PreferredLeaderNotAvailable // 80
                | Self::EligibleLeadersNotAvailable // 83
                | Self::ElectionNotNeeded        // 84
                | Self::UnknownTopicId           // 100
                | Self::InconsistentTopicId      // 103

                // ── Deliberate krafka deviations; see the table above ──
                | Self::BrokerNotAvailable       // 8
                | Self::RebalanceInProgress      // 27
                | Self::OutOfOrderSequenceNumber // 45
                | Self::OperationNotAttempted    // 55
                | Self::UnknownProducerId        // 59
                | Self::NewLeaderElected         // 108
                | Self::FencedMemberEpoch        // 110
                | Self::StaleMemberEpoch // 113
        )
    }

    /// Returns true if this error code indicates success.
    #[inline]
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::None)
    }
}

impl From<i16> for ErrorCode {
    #[inline]
    fn from(code: i16) -> Self {
        Self::from_i16(code)
    }
}

impl From<ErrorCode> for i16 {
    #[inline]
    fn from(code: ErrorCode) -> Self {
        code.to_i16()
    }
}

/// A specialized Result type for Krafka operations.
pub type Result<T> = std::result::Result<T, KrafkaError>;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn test_error_code_from_i16() {
        assert_eq!(ErrorCode::from_i16(0), ErrorCode::None);
        assert_eq!(ErrorCode::from_i16(-1), ErrorCode::UnknownServerError);
        assert_eq!(ErrorCode::from_i16(3), ErrorCode::UnknownTopicOrPartition);
        assert_eq!(ErrorCode::from_i16(999), ErrorCode::Unknown(999));
    }

    #[test]
    fn test_error_code_to_i16() {
        assert_eq!(ErrorCode::None.to_i16(), 0);
        assert_eq!(ErrorCode::UnknownServerError.to_i16(), -1);
        assert_eq!(ErrorCode::UnknownTopicOrPartition.to_i16(), 3);
        assert_eq!(ErrorCode::Unknown(999).to_i16(), 999);
    }

    #[test]
    fn test_error_code_is_retriable() {
        assert!(ErrorCode::LeaderNotAvailable.is_retriable());
        assert!(ErrorCode::RequestTimedOut.is_retriable());
        assert!(ErrorCode::CorruptMessage.is_retriable());
        assert!(ErrorCode::UnknownTopicOrPartition.is_retriable());
        assert!(ErrorCode::OutOfOrderSequenceNumber.is_retriable());
        assert!(ErrorCode::ConcurrentTransactions.is_retriable());
        assert!(ErrorCode::OperationNotAttempted.is_retriable());
        assert!(ErrorCode::BrokerNotAvailable.is_retriable());
        assert!(ErrorCode::NetworkException.is_retriable());
        assert!(!ErrorCode::None.is_retriable());
        assert!(!ErrorCode::InvalidTopic.is_retriable());
        // RebootstrapRequired must NOT be retriable: metadata.rs handles it via
        // a dedicated rebootstrap path, not via the generic retry loop.
        assert!(!ErrorCode::RebootstrapRequired.is_retriable());
    }

    #[test]
    fn test_error_code_is_ok() {
        assert!(ErrorCode::None.is_ok());
        assert!(!ErrorCode::UnknownServerError.is_ok());
    }

    #[test]
    fn test_krafka_error_is_retriable() {
        assert!(KrafkaError::timeout("test").is_retriable());
        assert!(KrafkaError::broker(ErrorCode::LeaderNotAvailable, "test").is_retriable());
        assert!(!KrafkaError::config("test").is_retriable());
        assert!(
            KrafkaError::network(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "refused",
            ))
            .is_retriable()
        );
    }

    /// One value of every kind, with what `is_fatal`, `requires_abort` and
    /// `is_retriable` must answer for it.
    fn one_of_each() -> Vec<(KrafkaError, bool, bool, bool)> {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "x");
        vec![
            (KrafkaError::network(reset), false, false, true),
            (
                KrafkaError::protocol_kind(ProtocolErrorKind::Malformed, "x"),
                false,
                false,
                true,
            ),
            (KrafkaError::auth("x"), true, false, false),
            (KrafkaError::timeout("x"), false, false, true),
            (
                KrafkaError::delivery_timeout(true, "x"),
                false,
                false,
                false,
            ),
            (
                KrafkaError::broker(ErrorCode::NotLeaderForPartition, "x"),
                false,
                false,
                true,
            ),
            (
                KrafkaError::broker(ErrorCode::ProducerFenced, "x"),
                true,
                false,
                false,
            ),
            (
                KrafkaError::broker(ErrorCode::TransactionAbortable, "x"),
                false,
                true,
                false,
            ),
            (KrafkaError::config("x"), false, false, false),
            (KrafkaError::compression("x"), false, false, false),
            (KrafkaError::serialization("x"), false, false, false),
            (
                KrafkaError::record_deserialization("t", 0, 0, "value", "x"),
                false,
                false,
                false,
            ),
            (KrafkaError::closed("x"), true, false, false),
            (KrafkaError::Wakeup, false, false, false),
            (KrafkaError::fenced("x"), true, false, false),
            (KrafkaError::transaction_abortable("x"), false, true, false),
            (
                KrafkaError::no_offset(vec![("t".to_string(), 0)]),
                false,
                false,
                false,
            ),
            (KrafkaError::unknown_topic("t"), false, false, false),
            (
                KrafkaError::out_of_order_sequence("t", 0, "x"),
                false,
                false,
                false,
            ),
            (KrafkaError::illegal_state("x"), false, false, false),
        ]
    }

    #[test]
    fn the_predicates_classify_each_kind() {
        for (error, fatal, abort, retriable) in one_of_each() {
            assert_eq!(error.is_fatal(), fatal, "is_fatal for {error:?}");
            assert_eq!(
                error.requires_abort(),
                abort,
                "requires_abort for {error:?}"
            );
            assert_eq!(
                error.is_retriable(),
                retriable,
                "is_retriable for {error:?}"
            );
        }
    }

    /// An error that requires an abort leaves the producer usable; a fatal
    /// one does not. No error may claim both.
    #[test]
    fn requires_abort_and_is_fatal_are_exclusive() {
        for (error, ..) in one_of_each() {
            assert!(
                !(error.requires_abort() && error.is_fatal()),
                "{error:?} claims both"
            );
        }
    }

    /// An authentication error built with a cause keeps it reachable.
    #[test]
    fn auth_errors_keep_their_cause() {
        use std::error::Error;
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "bad cert");
        let error = KrafkaError::auth_with_source("TLS handshake failed", io);
        let source = error.source().expect("the cause must be kept");
        assert!(source.to_string().contains("bad cert"));
        assert!(error.clone().source().is_some(), "clones keep it too");
    }

    #[test]
    fn no_offset_names_every_partition() {
        let error = KrafkaError::no_offset(vec![("a".to_string(), 0), ("b".to_string(), 3)]);
        let text = error.to_string();
        assert!(text.contains("a-0") && text.contains("b-3"), "got: {text}");
    }

    #[test]
    fn test_network_error_source_preserved_through_arc() {
        use std::error::Error;
        let io_err = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let krafka_err = KrafkaError::network(io_err);
        // source() must return Some — the Arc<io::Error> is the source
        let source = krafka_err.source().expect("source() must not be None");
        assert!(source.to_string().contains("refused"));
    }

    #[test]
    fn test_network_error_clone_preserves_source() {
        use std::error::Error;
        let io_err = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let original = KrafkaError::network(io_err);
        let cloned = original.clone();
        // Both original and clone must have source()
        assert!(original.source().is_some());
        assert!(cloned.source().is_some());
        assert_eq!(
            original.source().unwrap().to_string(),
            cloned.source().unwrap().to_string()
        );
    }

    // ── ErrorCode 56–88 from_i16 / to_i16 round-trip ──

    #[test]
    fn test_error_code_from_i16_codes_56_to_88() {
        assert_eq!(ErrorCode::from_i16(56), ErrorCode::KafkaStorageException);
        assert_eq!(ErrorCode::from_i16(57), ErrorCode::LogDirNotFound);
        assert_eq!(ErrorCode::from_i16(58), ErrorCode::SaslAuthenticationFailed);
        assert_eq!(ErrorCode::from_i16(59), ErrorCode::UnknownProducerId);
        assert_eq!(ErrorCode::from_i16(60), ErrorCode::ReassignmentInProgress);
        assert_eq!(
            ErrorCode::from_i16(61),
            ErrorCode::DelegationTokenAuthDisabled
        );
        assert_eq!(ErrorCode::from_i16(62), ErrorCode::DelegationTokenNotFound);
        assert_eq!(
            ErrorCode::from_i16(63),
            ErrorCode::DelegationTokenOwnerMismatch
        );
        assert_eq!(
            ErrorCode::from_i16(64),
            ErrorCode::DelegationTokenRequestNotAllowed
        );
        assert_eq!(
            ErrorCode::from_i16(65),
            ErrorCode::DelegationTokenAuthorizationFailed
        );
        assert_eq!(ErrorCode::from_i16(66), ErrorCode::DelegationTokenExpired);
        assert_eq!(ErrorCode::from_i16(67), ErrorCode::InvalidPrincipalType);
        assert_eq!(ErrorCode::from_i16(68), ErrorCode::NonEmptyGroup);
        assert_eq!(ErrorCode::from_i16(69), ErrorCode::GroupIdNotFound);
        assert_eq!(ErrorCode::from_i16(70), ErrorCode::FetchSessionIdNotFound);
        assert_eq!(ErrorCode::from_i16(71), ErrorCode::InvalidFetchSessionEpoch);
        assert_eq!(ErrorCode::from_i16(72), ErrorCode::ListenerNotFound);
        assert_eq!(ErrorCode::from_i16(73), ErrorCode::TopicDeletionDisabled);
        assert_eq!(ErrorCode::from_i16(74), ErrorCode::FencedLeaderEpoch);
        assert_eq!(ErrorCode::from_i16(75), ErrorCode::UnknownLeaderEpoch);
        assert_eq!(
            ErrorCode::from_i16(76),
            ErrorCode::UnsupportedCompressionType
        );
        assert_eq!(ErrorCode::from_i16(77), ErrorCode::StaleBrokerEpoch);
        assert_eq!(ErrorCode::from_i16(78), ErrorCode::OffsetNotAvailable);
        assert_eq!(ErrorCode::from_i16(79), ErrorCode::MemberIdRequired);
        assert_eq!(
            ErrorCode::from_i16(80),
            ErrorCode::PreferredLeaderNotAvailable
        );
        assert_eq!(ErrorCode::from_i16(81), ErrorCode::GroupMaxSizeReached);
        assert_eq!(ErrorCode::from_i16(82), ErrorCode::FencedInstanceId);
        assert_eq!(
            ErrorCode::from_i16(83),
            ErrorCode::EligibleLeadersNotAvailable
        );
        assert_eq!(ErrorCode::from_i16(84), ErrorCode::ElectionNotNeeded);
        assert_eq!(ErrorCode::from_i16(85), ErrorCode::NoReassignmentInProgress);
        assert_eq!(ErrorCode::from_i16(86), ErrorCode::GroupSubscribedToTopic);
        assert_eq!(ErrorCode::from_i16(87), ErrorCode::InvalidRecord);
        assert_eq!(ErrorCode::from_i16(88), ErrorCode::UnstableOffsetCommit);
    }

    #[test]
    fn test_error_code_to_i16_codes_56_to_88() {
        assert_eq!(ErrorCode::KafkaStorageException.to_i16(), 56);
        assert_eq!(ErrorCode::LogDirNotFound.to_i16(), 57);
        assert_eq!(ErrorCode::SaslAuthenticationFailed.to_i16(), 58);
        assert_eq!(ErrorCode::UnknownProducerId.to_i16(), 59);
        assert_eq!(ErrorCode::ReassignmentInProgress.to_i16(), 60);
        assert_eq!(ErrorCode::DelegationTokenAuthDisabled.to_i16(), 61);
        assert_eq!(ErrorCode::DelegationTokenNotFound.to_i16(), 62);
        assert_eq!(ErrorCode::DelegationTokenOwnerMismatch.to_i16(), 63);
        assert_eq!(ErrorCode::DelegationTokenRequestNotAllowed.to_i16(), 64);
        assert_eq!(ErrorCode::DelegationTokenAuthorizationFailed.to_i16(), 65);
        assert_eq!(ErrorCode::DelegationTokenExpired.to_i16(), 66);
        assert_eq!(ErrorCode::InvalidPrincipalType.to_i16(), 67);
        assert_eq!(ErrorCode::NonEmptyGroup.to_i16(), 68);
        assert_eq!(ErrorCode::GroupIdNotFound.to_i16(), 69);
        assert_eq!(ErrorCode::FetchSessionIdNotFound.to_i16(), 70);
        assert_eq!(ErrorCode::InvalidFetchSessionEpoch.to_i16(), 71);
        assert_eq!(ErrorCode::ListenerNotFound.to_i16(), 72);
        assert_eq!(ErrorCode::TopicDeletionDisabled.to_i16(), 73);
        assert_eq!(ErrorCode::FencedLeaderEpoch.to_i16(), 74);
        assert_eq!(ErrorCode::UnknownLeaderEpoch.to_i16(), 75);
        assert_eq!(ErrorCode::UnsupportedCompressionType.to_i16(), 76);
        assert_eq!(ErrorCode::StaleBrokerEpoch.to_i16(), 77);
        assert_eq!(ErrorCode::OffsetNotAvailable.to_i16(), 78);
        assert_eq!(ErrorCode::MemberIdRequired.to_i16(), 79);
        assert_eq!(ErrorCode::PreferredLeaderNotAvailable.to_i16(), 80);
        assert_eq!(ErrorCode::GroupMaxSizeReached.to_i16(), 81);
        assert_eq!(ErrorCode::FencedInstanceId.to_i16(), 82);
        assert_eq!(ErrorCode::EligibleLeadersNotAvailable.to_i16(), 83);
        assert_eq!(ErrorCode::ElectionNotNeeded.to_i16(), 84);
        assert_eq!(ErrorCode::NoReassignmentInProgress.to_i16(), 85);
        assert_eq!(ErrorCode::GroupSubscribedToTopic.to_i16(), 86);
        assert_eq!(ErrorCode::InvalidRecord.to_i16(), 87);
        assert_eq!(ErrorCode::UnstableOffsetCommit.to_i16(), 88);
    }

    // ── retriable codes ──

    #[test]
    fn test_r9_10_new_retriable_error_codes() {
        // These new codes from 56–88 should be retriable
        assert!(ErrorCode::KafkaStorageException.is_retriable());
        assert!(ErrorCode::UnknownProducerId.is_retriable());
        assert!(ErrorCode::FetchSessionIdNotFound.is_retriable());
        assert!(ErrorCode::InvalidFetchSessionEpoch.is_retriable());
        assert!(ErrorCode::FencedLeaderEpoch.is_retriable());
        assert!(ErrorCode::UnknownLeaderEpoch.is_retriable());
        assert!(ErrorCode::OffsetNotAvailable.is_retriable());
        assert!(ErrorCode::PreferredLeaderNotAvailable.is_retriable());
        assert!(ErrorCode::EligibleLeadersNotAvailable.is_retriable());
        assert!(ErrorCode::UnstableOffsetCommit.is_retriable());
    }

    #[test]
    fn test_r9_10_non_retriable_error_codes_56_to_88() {
        // These new codes from 56–88 should NOT be retriable
        assert!(!ErrorCode::LogDirNotFound.is_retriable());
        assert!(!ErrorCode::SaslAuthenticationFailed.is_retriable());
        assert!(!ErrorCode::ReassignmentInProgress.is_retriable());
        assert!(!ErrorCode::DelegationTokenAuthDisabled.is_retriable());
        assert!(!ErrorCode::DelegationTokenNotFound.is_retriable());
        assert!(!ErrorCode::DelegationTokenOwnerMismatch.is_retriable());
        assert!(!ErrorCode::DelegationTokenRequestNotAllowed.is_retriable());
        assert!(!ErrorCode::DelegationTokenAuthorizationFailed.is_retriable());
        assert!(!ErrorCode::DelegationTokenExpired.is_retriable());
        assert!(!ErrorCode::InvalidPrincipalType.is_retriable());
        assert!(!ErrorCode::NonEmptyGroup.is_retriable());
        assert!(!ErrorCode::GroupIdNotFound.is_retriable());
        assert!(!ErrorCode::TopicDeletionDisabled.is_retriable());
        assert!(!ErrorCode::UnsupportedCompressionType.is_retriable());
        assert!(!ErrorCode::StaleBrokerEpoch.is_retriable());
        assert!(!ErrorCode::MemberIdRequired.is_retriable());
        assert!(!ErrorCode::GroupMaxSizeReached.is_retriable());
        assert!(!ErrorCode::FencedInstanceId.is_retriable());
        assert!(!ErrorCode::NoReassignmentInProgress.is_retriable());
        assert!(!ErrorCode::GroupSubscribedToTopic.is_retriable());
        assert!(!ErrorCode::InvalidRecord.is_retriable());

        // LISTENER_NOT_FOUND (72) and ELECTION_NOT_NEEDED (84) are deliberately
        // absent from the list above: `ListenerNotFoundException` and
        // `ElectionNotNeededException` both extend `InvalidMetadataException`
        // -> `RetriableException`, so they resolve after a metadata refresh.
        assert!(ErrorCode::ListenerNotFound.is_retriable());
        assert!(ErrorCode::ElectionNotNeeded.is_retriable());
    }

    // ── Reconciliation with Kafka's `Errors.java` (codes 0..=133) ──

    /// Codes whose exception class extends `RetriableException` in Apache Kafka
    /// trunk — directly, or via `InvalidMetadataException` /
    /// `RefreshRetriableException`. Derived by resolving the superclass chain
    /// of every entry in `org.apache.kafka.common.protocol.Errors`.
    const JAVA_RETRIABLE: &[i16] = &[
        2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84,
        88, 89, 100, 103, 106, 122, 123, 133,
    ];

    /// Codes krafka deliberately treats as retriable even though Java does not.
    /// Each is justified in the `ErrorCode::is_retriable` rustdoc table.
    const KRAFKA_EXTRA_RETRIABLE: &[i16] = &[8, 27, 45, 55, 59, 108, 110, 113];

    /// Every code Java retries must be retriable here. Under-retrying wedges
    /// the client on errors the broker expects it to recover from.
    #[test]
    fn test_java_retriable_codes_are_all_retriable() {
        for &code in JAVA_RETRIABLE {
            let ec = ErrorCode::from_i16(code);
            assert!(
                ec.is_retriable(),
                "code {code} ({ec:?}) is retriable in Kafka's Errors.java but not here"
            );
        }
    }

    /// The retriable set is exactly the Java set plus the documented
    /// deviations — nothing else in 0..=133 may creep in unnoticed.
    #[test]
    fn test_retriable_classification_over_full_range() {
        for code in 0i16..=133 {
            let ec = ErrorCode::from_i16(code);
            let expected = JAVA_RETRIABLE.contains(&code) || KRAFKA_EXTRA_RETRIABLE.contains(&code);
            assert_eq!(
                ec.is_retriable(),
                expected,
                "retriable mismatch for code {code} ({ec:?}): expected {expected}"
            );
        }
        // UNKNOWN_SERVER_ERROR is never retriable.
        assert!(!ErrorCode::UnknownServerError.is_retriable());
    }

    /// Every code in -1..=133 must round-trip through `from_i16`/`to_i16`.
    /// Codes with no named variant fall through to `Unknown`, which still
    /// round-trips.
    #[test]
    fn test_error_code_round_trip_full_range() {
        for code in -1i16..=133 {
            let ec = ErrorCode::from_i16(code);
            assert_eq!(ec.to_i16(), code, "round-trip failed for code {code}");
        }
    }

    /// Codes 120..=133 must match Apache Kafka trunk exactly. The historical
    /// bug here mapped 124 to `REBOOTSTRAP_REQUIRED`; upstream assigns 124 to
    /// `FENCED_STATE_EPOCH` and `REBOOTSTRAP_REQUIRED` to 129. Because
    /// `ClusterMetadata` triggers its KIP-899 rebootstrap path from
    /// `RebootstrapRequired`, the wrong mapping made a share-coordinator
    /// fencing error tear down every connection in the client.
    #[test]
    fn test_error_codes_120_to_133_match_upstream() {
        assert_eq!(ErrorCode::from_i16(120), ErrorCode::TransactionAbortable);
        assert_eq!(ErrorCode::from_i16(121), ErrorCode::InvalidRecordState);
        assert_eq!(ErrorCode::from_i16(122), ErrorCode::ShareSessionNotFound);
        assert_eq!(
            ErrorCode::from_i16(123),
            ErrorCode::InvalidShareSessionEpoch
        );
        assert_eq!(ErrorCode::from_i16(124), ErrorCode::FencedStateEpoch);
        assert_eq!(ErrorCode::from_i16(125), ErrorCode::InvalidVoterKey);
        assert_eq!(ErrorCode::from_i16(126), ErrorCode::DuplicateVoter);
        assert_eq!(ErrorCode::from_i16(127), ErrorCode::VoterNotFound);
        assert_eq!(
            ErrorCode::from_i16(128),
            ErrorCode::InvalidRegularExpression
        );
        assert_eq!(ErrorCode::from_i16(129), ErrorCode::RebootstrapRequired);
        assert_eq!(ErrorCode::from_i16(130), ErrorCode::StreamsInvalidTopology);
        assert_eq!(
            ErrorCode::from_i16(131),
            ErrorCode::StreamsInvalidTopologyEpoch
        );
        assert_eq!(ErrorCode::from_i16(132), ErrorCode::StreamsTopologyFenced);
        assert_eq!(
            ErrorCode::from_i16(133),
            ErrorCode::ShareSessionLimitReached
        );

        // The rebootstrap trigger must be 129, never 124.
        assert_eq!(ErrorCode::RebootstrapRequired.to_i16(), 129);
        assert_ne!(ErrorCode::from_i16(124), ErrorCode::RebootstrapRequired);
    }

    /// `NOT_CONTROLLER` drives the admin client's controller-routing retry, so
    /// it must be classified retriable (Java: direct `RetriableException`).
    #[test]
    fn test_not_controller_is_retriable() {
        assert!(ErrorCode::NotController.is_retriable());
        assert_eq!(ErrorCode::NotController.to_i16(), 41);
        // UnknownControllerId is handled explicitly by the controller loop, not
        // by the generic retry classifier.
        assert!(!ErrorCode::UnknownControllerId.is_retriable());
    }

    // ── round-trip through From<i16> / From<ErrorCode> traits ──

    #[test]
    fn test_error_code_round_trip_56_to_88() {
        for code in 56i16..=88 {
            let ec = ErrorCode::from(code);
            let back: i16 = ec.into();
            assert_eq!(back, code, "round-trip failed for code {}", code);
        }
    }

    // ── L10: ProtocolErrorKind retry policy ──

    #[test]
    fn test_protocol_error_kind_is_retriable() {
        assert!(ProtocolErrorKind::TruncatedFrame.is_retriable());
        assert!(ProtocolErrorKind::Malformed.is_retriable());
        // A CRC failure means the bytes are corrupt as stored or transmitted.
        // Re-fetching the same offset returns the same bytes, so retrying
        // spins forever instead of surfacing the corruption.
        assert!(!ProtocolErrorKind::CrcMismatch.is_retriable());
        assert!(!ProtocolErrorKind::UnknownApiVersion.is_retriable());
        assert!(!ProtocolErrorKind::InvalidLength.is_retriable());
        assert!(!ProtocolErrorKind::InvalidUtf8.is_retriable());
        assert!(!ProtocolErrorKind::UnsupportedMagic.is_retriable());
        assert!(!ProtocolErrorKind::InvalidValue.is_retriable());
        assert!(!ProtocolErrorKind::Other.is_retriable());
    }

    #[test]
    fn test_krafka_error_protocol_kind_explicit() {
        let err = KrafkaError::protocol_kind(
            ProtocolErrorKind::CrcMismatch,
            "record batch CRC check failed",
        );
        match err {
            KrafkaError::Protocol { kind, message } => {
                assert_eq!(kind, ProtocolErrorKind::CrcMismatch);
                assert_eq!(message, "record batch CRC check failed");
            }
            _ => panic!("expected Protocol variant"),
        }
    }

    #[test]
    fn test_krafka_error_protocol_retriable_via_kind() {
        assert!(
            !KrafkaError::protocol_kind(ProtocolErrorKind::CrcMismatch, "CRC mismatch: a vs b")
                .is_retriable()
        );
        assert!(
            KrafkaError::protocol_kind(
                ProtocolErrorKind::TruncatedFrame,
                "not enough bytes for header"
            )
            .is_retriable()
        );
        assert!(
            !KrafkaError::protocol_kind(
                ProtocolErrorKind::UnknownApiVersion,
                "no mutually supported Produce API version"
            )
            .is_retriable()
        );
        assert!(
            !KrafkaError::protocol_kind(ProtocolErrorKind::InvalidUtf8, "invalid UTF-8 string")
                .is_retriable()
        );
    }

    #[test]
    fn test_krafka_error_protocol_error_kind_accessor() {
        let protocol = KrafkaError::protocol_kind(ProtocolErrorKind::CrcMismatch, "details");
        let timeout = KrafkaError::timeout("fetch");

        assert_eq!(
            protocol.protocol_error_kind(),
            Some(ProtocolErrorKind::CrcMismatch)
        );
        assert_eq!(timeout.protocol_error_kind(), None);
    }

    #[test]
    fn test_krafka_error_protocol_display_includes_kind() {
        let err = KrafkaError::protocol_kind(ProtocolErrorKind::CrcMismatch, "details");
        let s = err.to_string();
        assert!(s.contains("CrcMismatch"), "got: {s}");
        assert!(s.contains("details"), "got: {s}");
    }
}
