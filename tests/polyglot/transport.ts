// The context service's typed clients over Connect's gRPC transport, with
// TLS and the client certificate the environment names (AGENTCTX_TARGET,
// AGENTCTX_CA, AGENTCTX_CERT, AGENTCTX_KEY; a tool process names its own,
// which grants no app, in AGENTCTX_TOOL_CERT and AGENTCTX_TOOL_KEY).

import { readFileSync } from "node:fs";

import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { ContextService } from "./gen/agentctx/context/v1/context_service_pb.js";

export type ContextClient = Client<typeof ContextService>;

export function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** The TLS gRPC transport to the context service (AGENTCTX_TARGET, trusting
 * AGENTCTX_CA), which serves ContextService, ArtifactService, MemoryService
 * and ToolContextService, presenting the certificate and key the two
 * variables named hold. */
export function grpcTransport(certVar = "AGENTCTX_CERT", keyVar = "AGENTCTX_KEY"): Transport {
  return createGrpcTransport({
    baseUrl: `https://${env("AGENTCTX_TARGET")}`,
    nodeOptions: {
      ca: readFileSync(env("AGENTCTX_CA")),
      cert: readFileSync(env(certVar)),
      key: readFileSync(env(keyVar)),
      // The dev certificates name localhost; the target is an address.
      servername: "localhost",
    },
  });
}

export function connect(): ContextClient {
  return createClient(ContextService, grpcTransport());
}
