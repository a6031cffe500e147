"""Kafka error codes (``org.apache.kafka.common.protocol.Errors``) and the codec's own errors."""

from __future__ import annotations

from enum import IntEnum

from kafkatool.formats.errors import UNCHECKED_ERRORS, CorruptRecordError, FormatError
from kafkatool.formats.schema import SchemaDecodeError, SchemaEncodeError, UnsupportedVersionError

__all__ = [
    "ErrorCode",
    "default_message",
    "exception_class",
    "is_retriable",
    "FrameTooLargeError",
    "ProtocolDecodeError",
    "SchemaEncodeError",
    "UnsupportedVersionError",
    "record_error_code",
]

#: The decode error of the wire codec: a FormatError (with .position) like every byte codec's.
ProtocolDecodeError = SchemaDecodeError


class FrameTooLargeError(SchemaDecodeError):
    """A size prefix above the configured maximum (Java closes the connection: socket.request.max.bytes)."""

    kind = "frame_too_large"


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


def is_retriable(code: int) -> bool:
    """Whether Kafka's exception for ``code`` is a RetriableException (an unknown code: no)."""
    return code in _RETRIABLE


def record_error_code(exc: FormatError) -> int:
    """Errors.forException of what Kafka throws where our record codecs raise ``exc``: no
    ApiException (formats.errors.UNCHECKED_ERRORS: IllegalArgumentException, a stream's
    KafkaException, LegacyRecord's ByteBuffer exceptions) is UNKNOWN_SERVER_ERROR,
    CorruptRecordException CORRUPT_MESSAGE, the rest InvalidRecordException's INVALID_RECORD."""
    if isinstance(exc, UNCHECKED_ERRORS):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if isinstance(exc, CorruptRecordError):
        return ErrorCode.CORRUPT_MESSAGE
    return ErrorCode.INVALID_RECORD


def read_error_code(exc: FormatError) -> int:
    """Errors.forException of what Kafka throws where reading a log's stored data raises
    ``exc`` (a fetch, a ListOffsets by time: ReplicaManager's catch-all answers the partition
    with it): CorruptRecordException's CORRUPT_MESSAGE for a damaged batch, else
    UNKNOWN_SERVER_ERROR (a damaged index: CorruptIndexException, no ApiException)."""
    return (
        ErrorCode.CORRUPT_MESSAGE if isinstance(exc, CorruptRecordError) else ErrorCode.UNKNOWN_SERVER_ERROR
    )


_ERRORS_PACKAGE = "org.apache.kafka.common.errors."
#: Errors.exception()'s class of each code (Kafka 3.7's Errors): the simple name of a class of
#: org.apache.kafka.common.errors, else the full name
_EXCEPTION_CLASSES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    ErrorCode.OFFSET_OUT_OF_RANGE: "OffsetOutOfRangeException",
    ErrorCode.CORRUPT_MESSAGE: "CorruptRecordException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
    ErrorCode.INVALID_FETCH_SIZE: "InvalidFetchSizeException",
    ErrorCode.LEADER_NOT_AVAILABLE: "LeaderNotAvailableException",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NotLeaderOrFollowerException",
    ErrorCode.REQUEST_TIMED_OUT: "TimeoutException",
    ErrorCode.BROKER_NOT_AVAILABLE: "BrokerNotAvailableException",
    ErrorCode.REPLICA_NOT_AVAILABLE: "ReplicaNotAvailableException",
    ErrorCode.MESSAGE_TOO_LARGE: "RecordTooLargeException",
    ErrorCode.STALE_CONTROLLER_EPOCH: "ControllerMovedException",
    ErrorCode.OFFSET_METADATA_TOO_LARGE: "OffsetMetadataTooLarge",
    ErrorCode.NETWORK_EXCEPTION: "NetworkException",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "CoordinatorLoadInProgressException",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "CoordinatorNotAvailableException",
    ErrorCode.NOT_COORDINATOR: "NotCoordinatorException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    ErrorCode.RECORD_LIST_TOO_LARGE: "RecordBatchTooLargeException",
    ErrorCode.NOT_ENOUGH_REPLICAS: "NotEnoughReplicasException",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "NotEnoughReplicasAfterAppendException",
    ErrorCode.INVALID_REQUIRED_ACKS: "InvalidRequiredAcksException",
    ErrorCode.ILLEGAL_GENERATION: "IllegalGenerationException",
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: "InconsistentGroupProtocolException",
    ErrorCode.INVALID_GROUP_ID: "InvalidGroupIdException",
    ErrorCode.UNKNOWN_MEMBER_ID: "UnknownMemberIdException",
    ErrorCode.INVALID_SESSION_TIMEOUT: "InvalidSessionTimeoutException",
    ErrorCode.REBALANCE_IN_PROGRESS: "RebalanceInProgressException",
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: "InvalidCommitOffsetSizeException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    ErrorCode.INVALID_TIMESTAMP: "InvalidTimestampException",
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: "UnsupportedSaslMechanismException",
    ErrorCode.ILLEGAL_SASL_STATE: "IllegalSaslStateException",
    ErrorCode.UNSUPPORTED_VERSION: "UnsupportedVersionException",
    ErrorCode.TOPIC_ALREADY_EXISTS: "TopicExistsException",
    ErrorCode.INVALID_PARTITIONS: "InvalidPartitionsException",
    ErrorCode.INVALID_REPLICATION_FACTOR: "InvalidReplicationFactorException",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "InvalidReplicaAssignmentException",
    ErrorCode.INVALID_CONFIG: "InvalidConfigurationException",
    ErrorCode.NOT_CONTROLLER: "NotControllerException",
    ErrorCode.INVALID_REQUEST: "InvalidRequestException",
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: "UnsupportedForMessageFormatException",
    ErrorCode.POLICY_VIOLATION: "PolicyViolationException",
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: "OutOfOrderSequenceException",
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: "DuplicateSequenceException",
    ErrorCode.INVALID_PRODUCER_EPOCH: "InvalidProducerEpochException",
    ErrorCode.INVALID_TXN_STATE: "InvalidTxnStateException",
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: "InvalidPidMappingException",
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: "InvalidTxnTimeoutException",
    ErrorCode.CONCURRENT_TRANSACTIONS: "ConcurrentTransactionsException",
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: "TransactionCoordinatorFencedException",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    ErrorCode.SECURITY_DISABLED: "SecurityDisabledException",
    ErrorCode.OPERATION_NOT_ATTEMPTED: "OperationNotAttemptedException",
    ErrorCode.KAFKA_STORAGE_ERROR: "KafkaStorageException",
    ErrorCode.LOG_DIR_NOT_FOUND: "LogDirNotFoundException",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "SaslAuthenticationException",
    ErrorCode.UNKNOWN_PRODUCER_ID: "UnknownProducerIdException",
    ErrorCode.REASSIGNMENT_IN_PROGRESS: "ReassignmentInProgressException",
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: "DelegationTokenDisabledException",
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: "DelegationTokenNotFoundException",
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: "DelegationTokenOwnerMismatchException",
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "UnsupportedByAuthenticationException",
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "DelegationTokenAuthorizationException",
    ErrorCode.DELEGATION_TOKEN_EXPIRED: "DelegationTokenExpiredException",
    ErrorCode.INVALID_PRINCIPAL_TYPE: "InvalidPrincipalTypeException",
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
    ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND: "FetchSessionIdNotFoundException",
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: "InvalidFetchSessionEpochException",
    ErrorCode.LISTENER_NOT_FOUND: "ListenerNotFoundException",
    ErrorCode.TOPIC_DELETION_DISABLED: "TopicDeletionDisabledException",
    ErrorCode.FENCED_LEADER_EPOCH: "FencedLeaderEpochException",
    ErrorCode.UNKNOWN_LEADER_EPOCH: "UnknownLeaderEpochException",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: "UnsupportedCompressionTypeException",
    ErrorCode.STALE_BROKER_EPOCH: "StaleBrokerEpochException",
    ErrorCode.OFFSET_NOT_AVAILABLE: "OffsetNotAvailableException",
    ErrorCode.MEMBER_ID_REQUIRED: "MemberIdRequiredException",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "PreferredLeaderNotAvailableException",
    ErrorCode.GROUP_MAX_SIZE_REACHED: "GroupMaxSizeReachedException",
    ErrorCode.FENCED_INSTANCE_ID: "FencedInstanceIdException",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "EligibleLeadersNotAvailableException",
    ErrorCode.ELECTION_NOT_NEEDED: "ElectionNotNeededException",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: "NoReassignmentInProgressException",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "GroupSubscribedToTopicException",
    ErrorCode.INVALID_RECORD: "org.apache.kafka.common.InvalidRecordException",
    ErrorCode.UNSTABLE_OFFSET_COMMIT: "UnstableOffsetCommitException",
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: "ThrottlingQuotaExceededException",
    ErrorCode.PRODUCER_FENCED: "ProducerFencedException",
    ErrorCode.RESOURCE_NOT_FOUND: "ResourceNotFoundException",
    ErrorCode.DUPLICATE_RESOURCE: "DuplicateResourceException",
    ErrorCode.UNACCEPTABLE_CREDENTIAL: "UnacceptableCredentialException",
    ErrorCode.INCONSISTENT_VOTER_SET: "InconsistentVoterSetException",
    ErrorCode.INVALID_UPDATE_VERSION: "InvalidUpdateVersionException",
    ErrorCode.FEATURE_UPDATE_FAILED: "FeatureUpdateFailedException",
    ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE: "PrincipalDeserializationException",
    ErrorCode.SNAPSHOT_NOT_FOUND: "SnapshotNotFoundException",
    ErrorCode.UNKNOWN_TOPIC_ID: "UnknownTopicIdException",
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: "DuplicateBrokerRegistrationException",
    ErrorCode.BROKER_ID_NOT_REGISTERED: "BrokerIdNotRegisteredException",
    ErrorCode.INCONSISTENT_TOPIC_ID: "InconsistentTopicIdException",
    ErrorCode.INCONSISTENT_CLUSTER_ID: "InconsistentClusterIdException",
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: "TransactionalIdNotFoundException",
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: "FetchSessionTopicIdException",
    ErrorCode.INELIGIBLE_REPLICA: "IneligibleReplicaException",
    ErrorCode.NEW_LEADER_ELECTED: "NewLeaderElectedException",
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: "OffsetMovedToTieredStorageException",
    ErrorCode.FENCED_MEMBER_EPOCH: "FencedMemberEpochException",
    ErrorCode.UNRELEASED_INSTANCE_ID: "UnreleasedInstanceIdException",
    ErrorCode.UNSUPPORTED_ASSIGNOR: "UnsupportedAssignorException",
    ErrorCode.STALE_MEMBER_EPOCH: "StaleMemberEpochException",
    ErrorCode.MISMATCHED_ENDPOINT_TYPE: "MismatchedEndpointTypeException",
    ErrorCode.UNSUPPORTED_ENDPOINT_TYPE: "UnsupportedEndpointTypeException",
    ErrorCode.UNKNOWN_CONTROLLER_ID: "UnknownControllerIdException",
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID: "UnknownSubscriptionIdException",
    ErrorCode.TELEMETRY_TOO_LARGE: "TelemetryTooLargeException",
    ErrorCode.INVALID_REGISTRATION: "InvalidRegistrationException",
}


def exception_class(code: int) -> str | None:
    """The class name Kafka's tools print for an error code (``Errors.forCode(code).exception()
    .getClass().getName()``): None for NONE, an unknown code's is UNKNOWN_SERVER_ERROR's."""
    if code == ErrorCode.NONE:
        return None
    name = _EXCEPTION_CLASSES.get(code, _EXCEPTION_CLASSES[ErrorCode.UNKNOWN_SERVER_ERROR])
    return name if "." in name else _ERRORS_PACKAGE + name


#: Errors.message() of every code (Kafka 3.7.1's Errors; TRANSACTION_ABORTABLE from 3.8.0): the text
#: of the exception a client makes of a code the broker sent without a message, and what a
#: response built from the Errors alone carries (ApiError(Errors), FindCoordinator's and
#: AlterClientQuotas' getErrorResponse ...)
_DEFAULT_MESSAGES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range of offsets maintained by the server.",
    ErrorCode.CORRUPT_MESSAGE: "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.INVALID_FETCH_SIZE: "The requested fetch size is invalid.",
    ErrorCode.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    ErrorCode.BROKER_NOT_AVAILABLE: "The broker is not available.",
    ErrorCode.REPLICA_NOT_AVAILABLE: "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.",
    ErrorCode.MESSAGE_TOO_LARGE: "The request included a message larger than the max message size the server will accept.",
    ErrorCode.STALE_CONTROLLER_EPOCH: "The controller moved to another broker.",
    ErrorCode.OFFSET_METADATA_TOO_LARGE: "The metadata field of the offset request was too large.",
    ErrorCode.NETWORK_EXCEPTION: "The server disconnected before a response was received.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    ErrorCode.RECORD_LIST_TOO_LARGE: "The request included message batch larger than the configured segment size on the server.",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Messages are written to the log, but to fewer in-sync replicas than required.",
    ErrorCode.INVALID_REQUIRED_ACKS: "Produce request specified an invalid value for required acks.",
    ErrorCode.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    ErrorCode.INVALID_SESSION_TIMEOUT: "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    ErrorCode.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: "The committing offset data size is not valid.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.INVALID_TIMESTAMP: "The timestamp of the message is out of acceptable range.",
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: "The broker does not support the requested SASL mechanism.",
    ErrorCode.ILLEGAL_SASL_STATE: "Request is not valid given the current SASL state.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    ErrorCode.INVALID_PARTITIONS: "Number of partitions is below 1.",
    ErrorCode.INVALID_REPLICATION_FACTOR: "Replication factor is below 1 or larger than the number of available brokers.",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    ErrorCode.INVALID_CONFIG: "Configuration is invalid.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The message format version on the broker does not support the request.",
    ErrorCode.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: "The broker received an out of order sequence number.",
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: "The broker received a duplicate sequence number.",
    ErrorCode.INVALID_PRODUCER_EPOCH: "Producer attempted to produce with an old epoch.",
    ErrorCode.INVALID_TXN_STATE: "The producer attempted a transactional operation in an invalid state.",
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
    ErrorCode.CONCURRENT_TRANSACTIONS: "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.SECURITY_DISABLED: "Security features are disabled.",
    ErrorCode.OPERATION_NOT_ATTEMPTED: "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.LOG_DIR_NOT_FOUND: "The user-specified log directory is not found in the broker config.",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
    ErrorCode.UNKNOWN_PRODUCER_ID: "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.",
    ErrorCode.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation Token feature is not enabled.",
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: "Delegation Token is not found on server.",
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: "Specified Principal is not valid Owner/Renewer.",
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.",
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Delegation Token authorization failed.",
    ErrorCode.DELEGATION_TOKEN_EXPIRED: "Delegation Token is expired.",
    ErrorCode.INVALID_PRINCIPAL_TYPE: "Supplied principalType is not supported.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND: "The fetch session ID was not found.",
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is invalid.",
    ErrorCode.LISTENER_NOT_FOUND: "There is no listener on the leader broker that matches the listener on which metadata request was processed.",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    ErrorCode.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    ErrorCode.UNKNOWN_LEADER_EPOCH: "The leader epoch in the request is newer than the epoch on the broker.",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: "The requesting client does not support the compression type of given partition.",
    ErrorCode.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    ErrorCode.OFFSET_NOT_AVAILABLE: "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    ErrorCode.MEMBER_ID_REQUIRED: "The group member needs to have a valid member id before actually entering a consumer group.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.GROUP_MAX_SIZE_REACHED: "The consumer group has reached its max size.",
    ErrorCode.FENCED_INSTANCE_ID: "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    ErrorCode.INVALID_RECORD: "This record has failed the validation on broker and hence will be rejected.",
    ErrorCode.UNSTABLE_OFFSET_COMMIT: "There are unstable offsets that need to be cleared.",
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
    ErrorCode.PRODUCER_FENCED: "There is a newer producer with the same transactionalId which fences the current one.",
    ErrorCode.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    ErrorCode.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    ErrorCode.UNACCEPTABLE_CREDENTIAL: "Requested credential would not meet criteria for acceptability.",
    ErrorCode.INCONSISTENT_VOTER_SET: "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters",
    ErrorCode.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    ErrorCode.FEATURE_UPDATE_FAILED: "Unable to update finalized features due to an unexpected server error.",
    ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE: "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.",
    ErrorCode.SNAPSHOT_NOT_FOUND: "Requested snapshot was not found",
    ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    ErrorCode.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    ErrorCode.INCONSISTENT_TOPIC_ID: "The log's topic ID did not match the topic ID in the request",
    ErrorCode.INCONSISTENT_CLUSTER_ID: "The clusterId in the request does not match that found on the server",
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: "The transactionalId could not be found",
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session encountered inconsistent topic ID usage",
    ErrorCode.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    ErrorCode.NEW_LEADER_ELECTED: "The AlterPartition request successfully updated the partition state but the leader has changed.",
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: "The requested offset is moved to tiered storage.",
    ErrorCode.FENCED_MEMBER_EPOCH: "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.",
    ErrorCode.UNRELEASED_INSTANCE_ID: "The instance ID is still used by another member in the consumer group. That member must leave first.",
    ErrorCode.UNSUPPORTED_ASSIGNOR: "The assignor or its version range is not supported by the consumer group.",
    ErrorCode.STALE_MEMBER_EPOCH: "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.",
    ErrorCode.MISMATCHED_ENDPOINT_TYPE: "The request was sent to an endpoint of the wrong type.",
    ErrorCode.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported yet.",
    ErrorCode.UNKNOWN_CONTROLLER_ID: "This controller ID is not known.",
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID: "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    ErrorCode.TELEMETRY_TOO_LARGE: "Client sent a push telemetry request larger than the maximum size the broker will accept.",
    ErrorCode.INVALID_REGISTRATION: "The controller has considered the broker registration to be invalid.",
    ErrorCode.TRANSACTION_ABORTABLE: "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
}


def default_message(code: int) -> str | None:
    """Errors.message() of ``code`` (None: NONE, or a code Kafka 3.8 does not know)."""
    return _DEFAULT_MESSAGES.get(code)
