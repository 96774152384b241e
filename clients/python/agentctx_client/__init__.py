"""An asyncio client for the agentctx context service.

Quick start::

    from agentctx_client import Content, FunctionDeclaration, TlsConfig, connect

    async with connect("127.0.0.1:50051", tls=TlsConfig(
            ca="certs/ca.pem", cert="certs/agent.pem", key="certs/agent.key", server_name="localhost")) as client:
        session = await client.create_session("my-app", "user-1", model="local-sim-1")
        turn = await client.generate(session.name, "What is the weather in Paris?", tools=[weather])
        for call in turn.function_calls:
            turn = await client.generate(session.name, Content.user(call.result(run_tool(call))), tools=[weather])
        print(turn.text)

The generated gRPC stubs ship with this distribution as the ``agentctx``
package (``agentctx.context.v1.context_service_pb2`` and friends); every
result keeps its message in ``.proto`` and ``client.stub`` is the raw
ContextServiceStub.

Retrying (what an agent should do)
----------------------------------
Give every turn stable ids and send the same ids again: the service stores
each input event once (by event id) and each reply once (by reply id), so a
repeated turn completes exactly once and answers ``deduplicated=True``.

- The client assigns the ids when you do not (events, invocation and reply
  id) before the first attempt, and retries Generate, StreamGenerate (until
  its first message), AppendEvent and the reads by itself on UNAVAILABLE,
  and on RESOURCE_EXHAUSTED that carries RetryInfo. It waits the server's
  RetryInfo delay, or a jittered exponential backoff, within the call's
  overall ``timeout`` and ``RetryPolicy.max_attempts``.
- When that is not enough (the error reached you, a stream broke after its
  first chunk, or your process restarted) retry the turn yourself with the
  same ids: build it once with ``client.turn_request(...)`` (or give your own
  ids, see ``new_id``) and pass that request to ``generate`` again, after
  ``err.retry_delay`` when it is set.
- Never retry INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED or a
  BudgetExceededError unchanged: fix the request (``field_violations``),
  shrink the input or compact first. On ConflictError (ABORTED) re-read the
  session (``current_etag``) and apply the change again.

Errors
------
Every failed call raises one exception per gRPC code, carrying ``reason``
(an ``ErrorReason`` value from agentctx.error.v1, or the raw string of a
reason this client does not know: then decide by the class), ``metadata``,
``retry_delay`` (seconds, from RetryInfo), ``field_violations`` and
``status`` (the google.rpc.Status)::

    AgentCtxError
    ├── InvalidArgumentError      INVALID_ARGUMENT (field_violations)
    ├── OutOfRangeError           OUT_OF_RANGE
    ├── NotFoundError             NOT_FOUND
    ├── AlreadyExistsError        ALREADY_EXISTS
    ├── ConflictError             ABORTED (current_etag)
    ├── FailedPreconditionError   FAILED_PRECONDITION
    ├── ResourceExhaustedError    RESOURCE_EXHAUSTED
    │   └── BudgetExceededError   ... a context budget or the model's window
    ├── PermissionDeniedError     PERMISSION_DENIED
    ├── UnauthenticatedError      UNAUTHENTICATED
    ├── UnavailableError          UNAVAILABLE (retry_delay)
    ├── DeadlineExceededError     DEADLINE_EXCEEDED
    ├── CallCancelledError        CANCELLED
    ├── UnimplementedError        UNIMPLEMENTED
    ├── InternalError             INTERNAL
    ├── DataLossError             DATA_LOSS
    └── UnknownError              UNKNOWN

``error_from_rpc`` decodes a grpc.aio.AioRpcError of a raw stub the same way.

Tools
-----
Each function call of a stored reply gets a tool token
(``GenerateResult.tool_tokens``, ``turn.tool_token(call)``, or
``client.mint_tool_tokens(session, event_id)`` for an event you appended
yourself). The tool that runs the call opens its context with the token
alone, in any process::

    async with ToolContext.connect(token, target, tls=TlsConfig(ca="certs/ca.pem")) as tool:
        state = await tool.state()
        await tool.save_artifact("report.txt", "...")

It may touch what the session's config declares for its tool
(``ContextConfig.tools``); its state updates and saves become visible with
the call's function response, which revokes the token.
"""

from agentctx.context.v1.context_service_pb2 import TURN_STORAGE_APPEND, TURN_STORAGE_NONE, TurnStorage
from agentctx.error.v1.error_reason_pb2 import ErrorReason
from agentctx.type.v1.cache_pb2 import CacheBypassReason, CacheState
from agentctx.type.v1.event_pb2 import CompactionTrigger
from agentctx_client._artifacts import Artifact, ArtifactRef, ArtifactVersion, user_parent
from agentctx_client._client import ContextClient, GenerateStream, connect, session_name
from agentctx_client._config import RetryPolicy, TlsConfig
from agentctx_client._errors import (
    ERROR_DOMAIN,
    AgentCtxError,
    AlreadyExistsError,
    BudgetExceededError,
    CallCancelledError,
    ConflictError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    PreconditionViolation,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    error_class,
    error_from_rpc,
)
from agentctx_client._tool_context import TOOL_TOKEN_METADATA_KEY, ToolContext
from agentctx_client._types import (
    Accounting,
    AppendResult,
    BuiltContext,
    CacheInvalidation,
    CacheMetadata,
    CompactResult,
    Content,
    ContextLifecycle,
    Event,
    FunctionCall,
    FunctionDeclaration,
    FunctionResponse,
    GenerateResult,
    InvalidationConfirmation,
    MemoryAdded,
    MemoryEntry,
    MemoryMatch,
    MemoryRetrieval,
    MemorySearch,
    Page,
    Part,
    Session,
    ToolIdentity,
    ToolState,
    ToolToken,
    Usage,
    new_id,
)

__version__ = "0.1.0"

__all__ = [
    "ERROR_DOMAIN",
    "TOOL_TOKEN_METADATA_KEY",
    "TURN_STORAGE_APPEND",
    "TURN_STORAGE_NONE",
    "Accounting",
    "AgentCtxError",
    "AlreadyExistsError",
    "AppendResult",
    "Artifact",
    "ArtifactRef",
    "ArtifactVersion",
    "BudgetExceededError",
    "BuiltContext",
    "CacheBypassReason",
    "CacheInvalidation",
    "CacheMetadata",
    "CacheState",
    "CallCancelledError",
    "CompactResult",
    "CompactionTrigger",
    "ConflictError",
    "Content",
    "ContextClient",
    "ContextLifecycle",
    "DataLossError",
    "DeadlineExceededError",
    "ErrorReason",
    "Event",
    "FailedPreconditionError",
    "FieldViolation",
    "FunctionCall",
    "FunctionDeclaration",
    "FunctionResponse",
    "GenerateResult",
    "GenerateStream",
    "InternalError",
    "InvalidArgumentError",
    "InvalidationConfirmation",
    "MemoryAdded",
    "MemoryEntry",
    "MemoryMatch",
    "MemoryRetrieval",
    "MemorySearch",
    "NotFoundError",
    "OutOfRangeError",
    "Page",
    "Part",
    "PermissionDeniedError",
    "PreconditionViolation",
    "ResourceExhaustedError",
    "RetryPolicy",
    "Session",
    "TlsConfig",
    "ToolContext",
    "ToolIdentity",
    "ToolState",
    "ToolToken",
    "TurnStorage",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "Usage",
    "connect",
    "error_class",
    "error_from_rpc",
    "new_id",
    "session_name",
    "user_parent",
]
