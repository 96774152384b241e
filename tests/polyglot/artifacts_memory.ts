// Artifacts and memory in TypeScript on the typed stubs generated from
// protos/ (gen/): over the context service's TLS transport it saves a text
// artifact in two streamed messages and an image in one
// (ArtifactService.SaveArtifact, client streaming), loads the text back in
// chunks (LoadArtifact, server streaming), lists names and versions,
// attaches both to a BuildContext request, then adds two memory entries and
// searches them (MemoryService). It prints one JSON line and exits non-zero
// on any failure.
//
// Environment: as agent.ts (transport.ts), AGENTCTX_APP (default "polyglot").

import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";

import {
  ArtifactService,
  type ArtifactVersion,
  type SaveArtifactRequest,
  SaveArtifactRequestSchema,
} from "./gen/agentctx/context/v1/artifacts_pb.js";
import { ContextService } from "./gen/agentctx/context/v1/context_service_pb.js";
import { MemoryService } from "./gen/agentctx/memory/v1/memory_service_pb.js";
import { grpcTransport } from "./transport.js";

const CALL = { timeoutMs: 30_000 };
const APP = process.env["AGENTCTX_APP"] ?? "polyglot";
const USER = `apps/${APP}/users/ts-traveller`;
const PNG = Uint8Array.from({ length: 1024 }, (_, i) => i % 256);

/** A SaveArtifact stream: the header with the first text, then the rest. */
async function* textArtifact(parent: string, artifact: string, first: string, rest: string): AsyncIterable<SaveArtifactRequest> {
  yield create(SaveArtifactRequestSchema, {
    payload: {
      case: "header",
      value: { parent, artifact, part: { data: { case: "text", value: first } }, customMetadata: { by: "ts" } },
    },
  });
  yield create(SaveArtifactRequestSchema, { payload: { case: "data", value: new TextEncoder().encode(rest) } });
}

async function* imageArtifact(parent: string, artifact: string): AsyncIterable<SaveArtifactRequest> {
  yield create(SaveArtifactRequestSchema, {
    payload: {
      case: "header",
      value: { parent, artifact, part: { data: { case: "inlineData", value: { mimeType: "image/png", data: PNG } } } },
    },
  });
}

async function main(): Promise<void> {
  const transport = grpcTransport();
  const context = createClient(ContextService, transport);
  const artifacts = createClient(ArtifactService, transport);
  const memory = createClient(MemoryService, transport);

  const session = await context.createSession({ parent: USER, session: { config: { model: "local-sim-1" } } }, CALL);
  const first = await artifacts.saveArtifact(textArtifact(session.name, "plan.md", "Day 1: Belém. ", "Day 2: Sintra."), CALL);
  const second = await artifacts.saveArtifact(textArtifact(session.name, "plan.md", "Day 1: ", "Alfama."), CALL);
  const image = await artifacts.saveArtifact(imageArtifact(session.name, "user:map.png"), CALL);

  let loaded: ArtifactVersion | undefined;
  const chunks: Uint8Array[] = [];
  for await (const message of artifacts.loadArtifact({ parent: session.name, artifact: "plan.md", version: 0n }, CALL)) {
    if (message.payload.case === "artifact") loaded = message.payload.value;
    else if (message.payload.case === "data") chunks.push(message.payload.value);
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  const versions = await artifacts.listArtifactVersions({ parent: session.name, artifact: "plan.md" }, CALL);
  const names = await artifacts.listArtifactNames({ parent: session.name }, CALL);

  const built = await context.buildContext({
    session: session.name,
    input: [{ role: "user", parts: [{ data: { case: "text", value: "What is the plan?" } }] }],
    attachments: [{ name: "plan.md" }, { name: "user:map.png", version: 0n }],
  }, CALL);
  const contents = built.request?.contents ?? [];
  const attachedText = contents[0]?.parts[1]?.data;
  const attachedImage = contents[1]?.parts[1]?.data;

  await memory.addMemory({
    parent: USER, memoryId: "seat", memory: { text: "The traveller prefers aisle seats", metadata: { kind: "preference" } },
  }, CALL);
  await memory.addMemory({
    parent: USER, memoryId: "food", memory: { text: "The traveller eats no meat", metadata: { kind: "diet" } },
  }, CALL);
  const found = await memory.searchMemory({ parent: USER, query: "Which seats does the traveller like?", limit: 5 }, CALL);
  const filtered = await memory.searchMemory({
    parent: USER, query: "traveller", metadataFilter: { kind: "diet" }, limit: 5,
  }, CALL);

  console.log(JSON.stringify({
    ok: true,
    versions_saved: [first.artifact?.version, second.artifact?.version, image.artifact?.version].map(Number),
    sha256_matches: loaded?.sha256 === first.artifact?.sha256,
    loaded_text: text,
    loaded_metadata: loaded?.customMetadata ?? null,
    versions: versions.versions.map((v) => Number(v.sizeBytes)),
    names: names.artifacts,
    contents: contents.length,
    attached_text: attachedText?.case === "text" ? attachedText.value : null,
    attached_image: attachedImage?.case === "inlineData"
      ? { mime_type: attachedImage.value.mimeType, bytes: attachedImage.value.data.length } : null,
    attachment_bytes: Number(built.accounting?.attachments?.bytes ?? 0n),
    matches: found.matches.map((m) => m.memory?.name ?? ""),
    top_score_positive: (found.matches[0]?.score ?? 0) > 0,
    filtered: filtered.matches.map((m) => m.memory?.name ?? ""),
  }));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
