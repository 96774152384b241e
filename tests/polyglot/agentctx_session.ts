// AgentCtxSession: the OpenAI Agents SDK's (@openai/agents) Session over the
// agentctx context service, on the stubs generated from protos/ (gen/).
// The same layout as the Python client (clients/openai-agents): each item is
// one event, its exact JSON in custom_metadata.openai_agents.item, and
// messages, function calls and their results also as agentctx content that
// builds and compaction read. popItem appends a retraction (an event whose
// retractsEventId names the item's event), which the server's builds and
// compaction honour too; nothing is deleted. A read is one ListEvents from
// the last event it saw (included, to notice a session deleted and created
// again), fetching only what came after.

import { create, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { AgentInputItem, Session } from "@openai/agents";

import { ContextService } from "./gen/agentctx/context/v1/context_service_pb.js";
import { type Content, ContentSchema } from "./gen/agentctx/type/v1/content_pb.js";
import { type Event, EventSchema } from "./gen/agentctx/type/v1/event_pb.js";

type ContextClient = Client<typeof ContextService>;
type Stored = { eventId: string; sequence: bigint; json: string };

const KEY = "openai_agents";
const CALL = { timeoutMs: 30_000 };
const NAME = /^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$/;

export class AgentCtxSession implements Session {
  readonly name: string;
  private live: Stored[] = [];
  private seen = 0n;
  private lastId = "";
  private created = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly client: ContextClient, readonly app: string, readonly user: string,
              readonly sessionId: string, private readonly model = "") {
    this.name = `apps/${app}/users/${user}/sessions/${sessionId}`;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  getItems(limit?: number): Promise<AgentInputItem[]> {
    return this.serially(async () => {
      await this.refresh();
      const live = limit === undefined ? this.live : limit > 0 ? this.live.slice(-limit) : [];
      return live.map((s) => JSON.parse(s.json) as AgentInputItem);
    });
  }

  addItems(items: AgentInputItem[]): Promise<void> {
    return this.serially(async () => {
      if (items.length === 0) return;
      await this.ensureSession();
      for (const item of items) {
        const json = JSON.stringify(item);
        const event = create(EventSchema, {
          id: `oa.${crypto.randomUUID().replaceAll("-", "")}`,
          author: isModelItem(item) ? "assistant" : "user",
          content: content(JSON.parse(json) as JsonObject),
          customMetadata: { [KEY]: { item: json } },
        });
        await this.client.appendEvent({ parent: this.name, event }, CALL);
      }
      await this.refresh();
    });
  }

  popItem(): Promise<AgentInputItem | undefined> {
    return this.serially(async () => {
      await this.refresh();
      const newest = this.live.at(-1);
      if (newest === undefined) return undefined;
      const event = create(EventSchema, { id: `${newest.eventId}.pop`, author: "user", retractsEventId: newest.eventId });
      await this.client.appendEvent({ parent: this.name, event }, CALL);
      await this.refresh();
      return JSON.parse(newest.json) as AgentInputItem;
    });
  }

  clearSession(): Promise<void> {
    return this.serially(async () => {
      try {
        await this.client.deleteSession({ name: this.name }, CALL);
      } catch (e) {
        if (!(e instanceof ConnectError && e.code === Code.NotFound)) throw e;
      }
      this.reset();
      this.created = false;
    });
  }

  private reset(): void {
    this.live = [];
    this.seen = 0n;
    this.lastId = "";
  }

  private serially<T>(step: () => Promise<T>): Promise<T> {
    const next = this.queue.then(step, step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async ensureSession(): Promise<void> {
    if (this.created) return;
    try {
      await this.client.createSession({
        parent: `apps/${this.app}/users/${this.user}`, sessionId: this.sessionId,
        session: { config: { model: this.model } },
      }, CALL);
    } catch (e) {
      if (!(e instanceof ConnectError && e.code === Code.AlreadyExists)) throw e;
    }
    this.created = true;
  }

  private async refresh(): Promise<void> {
    let events: Event[];
    try {
      events = await this.eventsFrom(this.seen > 0n ? this.seen - 1n : 0n);
      if (this.seen > 0n) {
        // The last event seen comes first, unless the session is another one now.
        if (events[0]?.sequence === this.seen && events[0]?.id === this.lastId) {
          events = events.slice(1);
        } else {
          this.reset();
          events = await this.eventsFrom(0n);
        }
      }
    } catch (e) {
      if (!(e instanceof ConnectError && e.code === Code.NotFound)) throw e;
      this.reset();
      this.created = false;
      return;
    }
    this.created = true;
    for (const event of events) this.replay(event);
  }

  private async eventsFrom(afterSequence: bigint): Promise<Event[]> {
    const out: Event[] = [];
    let pageToken = "";
    do {
      const page = await this.client.listEvents({ parent: this.name, afterSequence, pageToken, pageSize: 1000 }, CALL);
      out.push(...page.events);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }

  private replay(event: Event): void {
    if (event.sequence > this.seen) {
      this.seen = event.sequence;
      this.lastId = event.id;
    }
    if (event.retractsEventId) {
      const at = this.live.findLastIndex((s) => s.eventId === event.retractsEventId);
      if (at >= 0) this.live.splice(at, 1);
      return;
    }
    const meta = event.customMetadata?.[KEY];
    if (meta === null || typeof meta !== "object" || Array.isArray(meta)) return;
    if (typeof meta["item"] === "string") {
      this.live.push({ eventId: event.id, sequence: event.sequence, json: meta["item"] });
    }
  }
}

function isModelItem(item: AgentInputItem): boolean {
  return (item.type === "message" && item.role === "assistant") || item.type === "function_call";
}

// The agentctx content of an item a model can read; undefined for the rest
// (reasoning, hosted tool calls), stored and listed but never sent.
function content(item: JsonObject): Content | undefined {
  const kind = item["type"] ?? "message";
  const callId = typeof item["callId"] === "string" ? item["callId"] : "";
  const name = typeof item["name"] === "string" && NAME.test(item["name"]) ? item["name"] : "";
  if (kind === "message") {
    const parts = texts(item["content"]).map((text) => ({ data: { case: "text" as const, value: text } }));
    if (!parts.length) return undefined;
    return create(ContentSchema, { role: item["role"] === "assistant" ? "model" : "user", parts });
  }
  if (kind === "function_call" && name && callId) {
    return create(ContentSchema, { role: "model", parts: [{ data: { case: "functionCall", value: {
      id: callId, name, args: args(item["arguments"]) } } }] });
  }
  if (kind === "function_call_result" && name && callId) {
    return create(ContentSchema, { role: "user", parts: [{ data: { case: "functionResponse", value: {
      id: callId, name, response: { output: texts(item["output"]).join("") } } } }] });
  }
  return undefined;
}

function texts(value: unknown): string[] {
  if (typeof value === "string") return value ? [value] : [];
  const pieces = Array.isArray(value) ? value : value !== null && typeof value === "object" ? [value] : [];
  const out: string[] = [];
  for (const piece of pieces) {
    if (piece === null || typeof piece !== "object") continue;
    const p = piece as Record<string, unknown>;
    if (typeof p["text"] === "string" && p["text"]) out.push(p["text"]);
    else if (typeof p["refusal"] === "string") out.push(p["refusal"]);
  }
  return out;
}

function args(raw: unknown): JsonObject {
  if (typeof raw === "string") {
    try {
      const value: unknown = JSON.parse(raw);
      if (value !== null && typeof value === "object" && !Array.isArray(value)) return value as JsonObject;
    } catch {
      // not JSON: kept as the raw string below
    }
  }
  return { arguments: typeof raw === "string" ? raw : JSON.stringify(raw ?? null) };
}
