// One tool call run in a process of its own, with nothing but its tool
// token: the token arrives on stdin (never argv or the environment, which
// other processes can read), the connection is TLS with a certificate that
// grants no app (AGENTCTX_TOOL_CERT, AGENTCTX_TOOL_KEY). It reads its
// identity and the session's state through ToolContextService, stages a
// state key and saves an artifact (both visible once the agent appends the
// call's response), and checks what its token does not open: the agent's
// own ContextService and a capability its tool was not declared. Prints one
// JSON line (never the token); exits non-zero on any failure.
//
// Environment: AGENTCTX_TARGET, AGENTCTX_CA, AGENTCTX_TOOL_CERT,
// AGENTCTX_TOOL_KEY.

import { text } from "node:stream/consumers";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";

import { ContextService } from "./gen/agentctx/context/v1/context_service_pb.js";
import { type SaveToolArtifactRequest, SaveToolArtifactRequestSchema,
  ToolContextService } from "./gen/agentctx/context/v1/tool_context_pb.js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { grpcTransport } from "./transport.js";

const CALL = { timeoutMs: 30_000 };

/** The failure's code and ErrorInfo (reason, metadata) of a call that must fail. */
async function refusal(call: () => Promise<unknown>): Promise<{ code: string; reason: string; metadata: Record<string, string> }> {
  try {
    await call();
  } catch (err) {
    const error = ConnectError.from(err);
    const info = error.findDetails(ErrorInfoSchema)[0];
    return { code: Code[error.code], reason: info?.reason ?? "", metadata: info?.metadata ?? {} };
  }
  throw new Error("the call succeeded");
}

async function* chunks(artifact: string, content: string): AsyncIterable<SaveToolArtifactRequest> {
  yield create(SaveToolArtifactRequestSchema, { payload: { case: "header", value: {
    artifact, part: { data: { case: "text", value: "" } }, customMetadata: { by: "tool_process" },
  } } });
  const bytes = new TextEncoder().encode(content);
  for (let at = 0; at < bytes.length; at += 8) {
    yield create(SaveToolArtifactRequestSchema, { payload: { case: "data", value: bytes.subarray(at, at + 8) } });
  }
}

async function main(): Promise<void> {
  const token = (await text(process.stdin)).trim();
  if (!token) throw new Error("no tool token on stdin");
  const own = grpcTransport("AGENTCTX_TOOL_CERT", "AGENTCTX_TOOL_KEY");
  const tool = createClient(ToolContextService, own);
  const options = { ...CALL, headers: { "agentctx-tool-token": token } };

  const who = await tool.getToolIdentity({}, options);
  const seen = await tool.getToolState({}, options);
  const city = seen.state?.["city"];
  if (typeof city !== "string") throw new Error("the session's state has no city");
  const staged = await tool.updateToolState({ stateDelta: { session: { report_city: city } } }, options);
  const saved = await tool.saveToolArtifact(chunks("report.md", `# Weather in ${city}\nsunny, 21 C`), options);

  // Its certificate grants no app: the agent's own service stays closed,
  // token or not; and its token opens only what its tool declares.
  const agentCall = await refusal(() => createClient(ContextService, own).getSession({ name: who.session }, options));
  const undeclared = await refusal(() => tool.deleteToolArtifact({ artifact: "report.md" }, options));

  console.log(JSON.stringify({
    ok: true,
    identity: { session: who.session, function_call_id: who.functionCallId, tool: who.tool,
      capabilities: who.capabilities },
    city,
    staged_state: staged.state?.["report_city"] ?? null,
    saved: { artifact: saved.artifact?.artifact, version: Number(saved.artifact?.version ?? -1n),
      size_bytes: Number(saved.artifact?.sizeBytes ?? 0n) },
    refused: { agent_call: agentCall.code, undeclared },
  }));
}

main().catch((err: unknown) => {
  const error = ConnectError.from(err);
  console.error(JSON.stringify({ ok: false, error: error.message, code: Code[error.code] }));
  process.exit(1);
});
