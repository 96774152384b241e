// A TypeScript agent whose tool runs in a separate Node process holding only
// its tool token (tool_process.ts). The session declares what the tool may
// touch; Generate on the local simulator calls the tool (the user text names
// it) and returns the call's token; the agent hands it to the tool process
// on stdin, checks the tool's staged writes stay invisible until it appends
// the call's response (the next Generate's input), then that they landed and
// that the token is revoked. Prints one JSON line (never the token); exits
// non-zero on any failure.
//
// Environment: AGENTCTX_TARGET, AGENTCTX_CA, AGENTCTX_CERT, AGENTCTX_KEY (the
// agent's certificate), AGENTCTX_TOOL_CERT, AGENTCTX_TOOL_KEY (the tool
// process's, which grants no app), AGENTCTX_APP (default "polyglot-tools").

import { spawn } from "node:child_process";
import { join } from "node:path";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";

import { ArtifactService } from "./gen/agentctx/context/v1/artifacts_pb.js";
import { ToolContextService } from "./gen/agentctx/context/v1/tool_context_pb.js";
import { type FunctionCall, PartSchema } from "./gen/agentctx/type/v1/content_pb.js";
import { EventSchema } from "./gen/agentctx/type/v1/event_pb.js";
import { ToolSchema } from "./gen/agentctx/type/v1/generation_pb.js";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { connect, grpcTransport } from "./transport.js";

const CALL = { timeoutMs: 30_000 };
const TOOL = "write_report";
const TOOLS = [create(ToolSchema, {
  functionDeclarations: [{ name: TOOL, description: "Writes a weather report for the session's city.",
    parameters: { type: "object", properties: { query: { type: "string" } } } }],
})];

/** Runs tool_process.js with ``token`` on its stdin; its JSON report. */
function runTool(token: string): Promise<Record<string, unknown>> {
  const script = join(__dirname, "tool_process.js");
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => { out += d.toString(); });
    child.stderr.on("data", (d: Buffer) => { err += d.toString(); });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) reject(new Error(`the tool process failed (${code}): ${err}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>);
    });
    child.stdin.end(token);
  });
}

async function main(): Promise<void> {
  const client = connect();
  const artifacts = createClient(ArtifactService, grpcTransport());
  const app = process.env["AGENTCTX_APP"] ?? "polyglot-tools";

  const session = await client.createSession({
    parent: `apps/${app}/users/ts-agent`,
    session: {
      config: { model: "local-sim-1", tools: [{ name: TOOL, capabilities: ["state_read", "state_write", "artifact_put"] }] },
      state: { city: "Oslo" },
    },
  }, CALL);

  const first = await client.generate({
    session: session.name,
    input: [create(EventSchema, { id: "tt-user", author: "user",
      content: { role: "user", parts: [{ data: { case: "text", value: `Please call ${TOOL} for Oslo.` } }] } })],
    invocationId: "tt-inv-1",
    tools: TOOLS,
  }, CALL);
  const call: FunctionCall | undefined = (first.reply?.content?.parts ?? [])
    .flatMap((p) => (p.data.case === "functionCall" ? [p.data.value] : []))[0];
  if (!call) throw new Error("the model did not call the tool");
  const token = first.toolTokens.find((t) => t.functionCallId === call.id);
  if (!token) throw new Error("Generate returned no token for the call");

  const tool = await runTool(token.token);

  // Staged: nobody but the tool sees its writes before the response.
  const before = {
    artifacts: (await artifacts.listArtifactNames({ parent: session.name }, CALL)).artifacts,
    state_has_report: "report_city" in ((await client.getSession({ name: session.name }, CALL)).state ?? {}),
  };

  const response = create(PartSchema, { data: { case: "functionResponse", value: {
    id: call.id, name: call.name, response: { ok: true },
  } } });
  const second = await client.generate({
    session: session.name,
    input: [create(EventSchema, { id: "tt-tool", author: "user", content: { role: "user", parts: [response] } })],
    invocationId: "tt-inv-2",
    tools: TOOLS,
  }, CALL);

  let report = "";
  for await (const item of artifacts.loadArtifact({ parent: session.name, artifact: "report.md" }, CALL)) {
    if (item.payload.case === "data") report += new TextDecoder().decode(item.payload.value);
  }
  const after = {
    artifacts: (await artifacts.listArtifactNames({ parent: session.name }, CALL)).artifacts,
    report,
    state_report_city: (await client.getSession({ name: session.name }, CALL)).state?.["report_city"] ?? null,
  };

  let revoked = "";
  try {
    await createClient(ToolContextService, grpcTransport()).getToolIdentity(
      {}, { ...CALL, headers: { "agentctx-tool-token": token.token } });
  } catch (err) {
    const error = ConnectError.from(err);
    revoked = `${Code[error.code]} ${error.findDetails(ErrorInfoSchema)[0]?.reason ?? ""}`;
  }

  console.log(JSON.stringify({
    ok: true,
    call: { name: call.name, id_matches: token.functionCallId === call.id },
    token: { tool: token.tool, capabilities: token.capabilities, has_deadline: token.expireTime !== undefined },
    tool,
    before,
    after,
    answer_tokens: second.toolTokens.length,
    revoked,
  }));
}

main().catch((err: unknown) => {
  const error = ConnectError.from(err);
  console.error(JSON.stringify({ ok: false, error: error.message, code: Code[error.code] }));
  process.exit(1);
});
