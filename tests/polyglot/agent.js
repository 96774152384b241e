// A tool-using agent written in Node.js: it loads agentctx's protos at run
// time (no generated code), connects over TLS with a client certificate, and
// runs a five-turn conversation through ContextService.Generate, answering
// the model's tool calls itself. It prints one JSON line and exits non-zero
// on any failure.
//
// Environment: AGENTCTX_TARGET (host:port), AGENTCTX_CA, AGENTCTX_CERT,
// AGENTCTX_KEY (PEM files), AGENTCTX_APP (default "polyglot").
"use strict";

const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const PROTOS = path.resolve(__dirname, "..", "..", "protos");

function loadContextService() {
  const definition = protoLoader.loadSync("agentctx/context/v1/context_service.proto", {
    includeDirs: [PROTOS],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(definition).agentctx.context.v1.ContextService;
}

// google.protobuf.Struct <-> plain objects, as proto-loader represents them.
function toValue(v) {
  if (v === null || v === undefined) return { nullValue: "NULL_VALUE" };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  return { structValue: toStruct(v) };
}
function toStruct(obj) {
  const fields = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = toValue(v);
  return { fields };
}
function fromValue(v) {
  switch (v.kind) {
    case "numberValue": return v.numberValue;
    case "stringValue": return v.stringValue;
    case "boolValue": return v.boolValue;
    case "structValue": return fromStruct(v.structValue);
    case "listValue": return v.listValue.values.map(fromValue);
    default: return null;
  }
}
function fromStruct(s) {
  const out = {};
  for (const [k, v] of Object.entries((s && s.fields) || {})) out[k] = fromValue(v);
  return out;
}

function call(client, method, request) {
  return new Promise((resolve, reject) => {
    const deadline = new Date(Date.now() + 30000);
    client[method](request, { deadline }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

// The agent's one tool.
const TOOLS = [{
  function_declarations: [{
    name: "get_weather",
    description: "Current weather for a city.",
    parameters: toStruct({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    }),
  }],
}];

function runTool(name, args) {
  if (name !== "get_weather") throw new Error(`unknown tool ${name}`);
  return { city: args.city || "unknown", forecast: "sunny", temperature_c: 21 };
}

async function main() {
  const target = process.env.AGENTCTX_TARGET;
  const creds = grpc.credentials.createSsl(
    fs.readFileSync(process.env.AGENTCTX_CA),
    fs.readFileSync(process.env.AGENTCTX_KEY),
    fs.readFileSync(process.env.AGENTCTX_CERT),
  );
  const ContextService = loadContextService();
  const client = new ContextService(target, creds, { "grpc.ssl_target_name_override": "localhost" });
  const app = process.env.AGENTCTX_APP || "polyglot";

  const session = await call(client, "CreateSession", {
    parent: `apps/${app}/users/node-agent`,
    session: { config: { model: "local-sim-1", cache: { enabled: true } } },
  });

  const userTurns = [
    "Hello! I am planning a trip and will ask about the weather.",
    "Please call get_weather for Paris.",
    null, // the tool result of the previous turn
    "Thanks. Summarize what you know so far in one sentence.",
    "Goodbye.",
  ];
  let pending = null; // the model's function call awaiting our result
  const log = [];
  let toolCalls = 0;
  for (let turn = 0; turn < userTurns.length; turn++) {
    let input;
    if (pending) {
      const result = runTool(pending.name, fromStruct(pending.args));
      input = { id: `node-t${turn}-tool`, author: "user", content: { role: "user", parts: [
        { function_response: { id: pending.id, name: pending.name, response: toStruct(result) } },
      ] } };
      pending = null;
    } else {
      const text = userTurns[turn] || "Please continue.";
      input = { id: `node-t${turn}-user`, author: "user", content: { role: "user", parts: [{ text }] } };
    }
    const reply = await call(client, "Generate", {
      session: session.name,
      input: [input],
      invocation_id: `node-inv-${turn}`,
      system_instruction: { role: "user", parts: [{ text: "You are a concise travel assistant." }] },
      tools: TOOLS,
    });
    const parts = (reply.reply && reply.reply.content && reply.reply.content.parts) || [];
    for (const part of parts) {
      if (part.function_call) {
        pending = part.function_call;
        toolCalls++;
      }
    }
    log.push({
      turn,
      sequence: reply.reply.sequence,
      tool_call: parts.some((p) => p.function_call),
      cache_state: reply.reply.cache_metadata ? reply.reply.cache_metadata.state : "",
      prompt_tokens: reply.reply.usage ? reply.reply.usage.prompt_tokens : 0,
    });
  }

  // The stored history keeps every call with its response.
  const events = await call(client, "ListEvents", { parent: session.name, page_size: 100 });
  const calls = new Set();
  const responses = new Set();
  for (const e of events.events) {
    for (const p of (e.content && e.content.parts) || []) {
      if (p.function_call) calls.add(p.function_call.id);
      if (p.function_response) responses.add(p.function_response.id);
    }
  }
  for (const id of responses) if (!calls.has(id)) throw new Error(`response ${id} has no call`);
  if (toolCalls < 1) throw new Error("the model never called the tool");

  const built = await call(client, "BuildContext", {
    session: session.name,
    input: [{ role: "user", parts: [{ text: "One more question." }] }],
  });
  console.log(JSON.stringify({
    ok: true,
    session: session.name,
    turns: log,
    events: events.events.length,
    tool_calls: toolCalls,
    built_contents: built.request.contents.length,
  }));
  client.close();
}

main().catch((err) => {
  console.error(JSON.stringify({ ok: false, error: String(err && err.message || err), code: err && err.code }));
  process.exit(1);
});
