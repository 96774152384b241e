// A tool-using agent in TypeScript on the typed stubs generated from protos/
// (gen/, by `buf generate`): Connect's gRPC transport over TLS with a client
// certificate, a five-turn conversation through ContextService.Generate in
// which it answers the model's tool calls itself, then two errors decoded as
// ErrorInfo by the generated ErrorReason enum and its domain option. It
// prints one JSON line and exits non-zero on any failure.
//
// Environment: AGENTCTX_TARGET (host:port), AGENTCTX_CA, AGENTCTX_CERT,
// AGENTCTX_KEY (PEM files), AGENTCTX_APP (default "polyglot").

import { create, getOption, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import { ErrorReason, ErrorReasonSchema, error_domain, metadata_keys } from "./gen/agentctx/error/v1/error_reason_pb.js";
import { CacheStateSchema } from "./gen/agentctx/type/v1/cache_pb.js";
import { type FunctionCall, type Part, PartSchema } from "./gen/agentctx/type/v1/content_pb.js";
import { type Event, EventSchema } from "./gen/agentctx/type/v1/event_pb.js";
import { ToolSchema } from "./gen/agentctx/type/v1/generation_pb.js";
import { BadRequestSchema, type ErrorInfo, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { connect, type ContextClient } from "./transport.js";

const CALL = { timeoutMs: 30_000 };

// The agent's one tool.
const TOOLS = [create(ToolSchema, {
  functionDeclarations: [{
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  }],
})];

function runTool(call: FunctionCall): JsonObject {
  if (call.name !== "get_weather") throw new Error(`unknown tool ${call.name}`);
  const city = call.args?.["city"];
  return { city: typeof city === "string" ? city : "unknown", forecast: "sunny", temperature_c: 21 };
}

function functionCalls(parts: Part[]): FunctionCall[] {
  return parts.flatMap((p) => (p.data.case === "functionCall" ? [p.data.value] : []));
}

/** The ErrorReason an ErrorInfo names (ErrorInfo.reason is the value's proto
 * name), or undefined for a reason this client does not know. */
function reasonOf(info: ErrorInfo): ErrorReason | undefined {
  const value = ErrorReasonSchema.values.find((v) => v.name === info.reason);
  return value === undefined ? undefined : (value.number as ErrorReason);
}

const DOMAIN = getOption(ErrorReasonSchema, error_domain);

interface DecodedError {
  code: Code;
  reason: ErrorReason;
  metadata: Record<string, string>;
  violations: string[];
}

/** Runs a call that must fail, and decodes the failure's ErrorInfo. */
async function expectError(call: () => Promise<unknown>): Promise<DecodedError> {
  try {
    await call();
  } catch (err) {
    const error = ConnectError.from(err);
    const [info, ...more] = error.findDetails(ErrorInfoSchema).filter((i) => i.domain === DOMAIN);
    const reason = info && !more.length ? reasonOf(info) : undefined;
    if (!info || reason === undefined) throw new Error(`no known ${DOMAIN} ErrorInfo in: ${error.message}`);
    const metadata = info.metadata;
    const declared = getOption(ErrorReasonSchema.value[reason], metadata_keys);
    const undeclared = Object.keys(metadata).filter((k) => !declared.includes(k));
    if (undeclared.length) throw new Error(`${ErrorReason[reason]} carries undeclared metadata ${undeclared}`);
    const violations = error.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => v.field));
    return { code: error.code, reason, metadata, violations };
  }
  throw new Error("the call succeeded");
}

async function main(): Promise<void> {
  const client = connect();
  const app = process.env["AGENTCTX_APP"] ?? "polyglot";

  const session = await client.createSession({
    parent: `apps/${app}/users/ts-agent`,
    session: { config: { model: "local-sim-1", cache: { enabled: true } } },
  }, CALL);

  const userTurns: (string | null)[] = [
    "Hello! I am planning a trip and will ask about the weather.",
    "Please call get_weather for Paris.",
    null, // the tool result of the previous turn
    "Thanks. Summarize what you know so far in one sentence.",
    "Goodbye.",
  ];
  let pending: FunctionCall | undefined; // the model's call awaiting our result
  let toolCalls = 0;
  const turns = [];
  for (const [turn, text] of userTurns.entries()) {
    const part = pending
      ? create(PartSchema, { data: { case: "functionResponse", value: {
        id: pending.id, name: pending.name, response: runTool(pending),
      } } })
      : create(PartSchema, { data: { case: "text", value: text ?? "Please continue." } });
    const input = create(EventSchema, {
      id: `ts-t${turn}-${pending ? "tool" : "user"}`,
      author: "user",
      content: { role: "user", parts: [part] },
    });
    pending = undefined;
    const { reply } = await client.generate({
      session: session.name,
      input: [input],
      invocationId: `ts-inv-${turn}`,
      systemInstruction: { role: "user", parts: [{ data: { case: "text", value: "You are a concise travel assistant." } }] },
      tools: TOOLS,
    }, CALL);
    if (!reply) throw new Error(`turn ${turn} has no reply`);
    const calls = functionCalls(reply.content?.parts ?? []);
    pending = calls.at(-1);
    toolCalls += calls.length;
    turns.push({
      turn,
      sequence: Number(reply.sequence),
      tool_call: calls.length > 0,
      cache_state: reply.cacheMetadata ? CacheStateSchema.value[reply.cacheMetadata.state].name : "",
      prompt_tokens: Number(reply.usage?.promptTokens ?? 0n),
    });
  }

  // The stored history keeps every call with its response.
  const { events } = await client.listEvents({ parent: session.name, pageSize: 100 }, CALL);
  const parts = events.flatMap((e: Event) => e.content?.parts ?? []);
  const callIds = new Set(functionCalls(parts).map((c) => c.id));
  for (const p of parts) {
    if (p.data.case === "functionResponse" && !callIds.has(p.data.value.id)) {
      throw new Error(`response ${p.data.value.id} has no call`);
    }
  }
  if (toolCalls < 1) throw new Error("the model never called the tool");

  const built = await client.buildContext({
    session: session.name,
    input: [{ role: "user", parts: [{ data: { case: "text", value: "One more question." } }] }],
  }, CALL);

  // The etag from CreateSession is stale after five turns: the delete is
  // refused with ETAG_MISMATCH, whose metadata names the current etag.
  const stale = await expectError(() => client.deleteSession({ name: session.name, etag: session.etag }, CALL));
  if (stale.code !== Code.Aborted || stale.reason !== ErrorReason.ETAG_MISMATCH) {
    throw new Error(`stale etag: ${Code[stale.code]} ${ErrorReason[stale.reason]}`);
  }
  const current = await client.getSession({ name: session.name }, CALL);
  if (stale.metadata["current_etag"] !== current.etag) throw new Error("current_etag is not the session's etag");

  const badName = await expectError(() => client.getSession({ name: "sessions/not-a-session-name" }, CALL));
  if (badName.code !== Code.InvalidArgument || badName.reason !== ErrorReason.INVALID_NAME || !badName.violations.length) {
    throw new Error(`bad name: ${Code[badName.code]} ${ErrorReason[badName.reason]} ${badName.violations}`);
  }

  console.log(JSON.stringify({
    ok: true,
    session: session.name,
    turns,
    events: events.length,
    tool_calls: toolCalls,
    built_contents: built.request?.contents.length ?? 0,
    errors: [stale, badName].map((e) => ({
      code: Code[e.code],
      reason: ErrorReasonSchema.value[e.reason].name,
      domain: DOMAIN,
      metadata_keys: Object.keys(e.metadata),
      field_violations: e.violations,
    })),
  }));
}

main().catch((err: unknown) => {
  const error = ConnectError.from(err);
  console.error(JSON.stringify({ ok: false, error: error.message, code: Code[error.code] }));
  process.exit(1);
});
