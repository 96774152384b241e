// An @openai/agents agent with a tool, run for three turns by the SDK's
// Runner on AgentCtxSession (agentctx_session.ts) and on the SDK's own
// MemorySession with the same scripted model: the two must hold the same
// items and send the model the same inputs. Also pop and clear, checked
// through a second session object (another process's view). Prints one
// JSON line; exits non-zero on any failure.
//
// Environment: AGENTCTX_TARGET, AGENTCTX_CA, AGENTCTX_CERT, AGENTCTX_KEY,
// AGENTCTX_APP (default "polyglot-oa").

import { Agent, type AgentInputItem, MemorySession, type Model, type ModelRequest, type ModelResponse, run,
  type Session, setTracingDisabled, tool, Usage } from "@openai/agents";
import { z } from "zod";

import { AgentCtxSession } from "./agentctx_session.js";
import { connect } from "./transport.js";

class ScriptedModel implements Model {
  calls = 0;
  inputs: string[] = [];

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.calls += 1;
    const input = typeof request.input === "string" ? [request.input] : request.input;
    this.inputs.push(JSON.stringify(input));
    const last = input.at(-1);
    if (typeof last === "object" && last.type === "function_call_result") {
      const output = last.output;
      const text = typeof output === "string" ? output : JSON.stringify(output);
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed",
        content: [{ type: "output_text", text: `Forecast ${text} (call ${this.calls}).` }] }] };
    }
    return { usage: new Usage(), output: [{ type: "function_call", callId: `call_${this.calls}`,
      name: "get_weather", arguments: JSON.stringify({ city: "Lyon", turn: this.calls }), status: "completed" }] };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not streamed");
  }
}

const getWeather = tool({
  name: "get_weather",
  description: "Current weather for a city.",
  parameters: z.object({ city: z.string(), turn: z.number() }),
  execute: async ({ city, turn }) => JSON.stringify({ city, forecast: "sunny", turn }),
});

async function conversation(session: Session): Promise<{ items: AgentInputItem[]; inputs: string[] }> {
  const model = new ScriptedModel();
  const agent = new Agent({ name: "planner", instructions: "Be brief.", model, tools: [getWeather] });
  for (const text of ["Weather in Lyon?", "And tomorrow?", "Thanks, and the day after?"]) {
    const result = await run(agent, text, { session });
    if (!result.finalOutput) throw new Error("no final output");
  }
  return { items: await session.getItems(), inputs: model.inputs };
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

async function main(): Promise<void> {
  setTracingDisabled(true);
  const client = connect();
  const app = process.env["AGENTCTX_APP"] ?? "polyglot-oa";
  const id = `ts${process.pid}`;
  const theirs = await conversation(new MemorySession());
  const session = new AgentCtxSession(client, app, "ts-agent", id, "local-sim-1");
  const ours = await conversation(session);
  check(JSON.stringify(ours.items) === JSON.stringify(theirs.items), "items differ from MemorySession's");
  check(JSON.stringify(ours.inputs) === JSON.stringify(theirs.inputs), "model inputs differ from MemorySession's");

  const other = new AgentCtxSession(client, app, "ts-agent", id);
  check(JSON.stringify(await other.getItems()) === JSON.stringify(ours.items), "another reader sees other items");
  const popped = await other.popItem();
  check(JSON.stringify(popped) === JSON.stringify(ours.items.at(-1)), "pop returned another item");
  check((await session.getItems()).length === ours.items.length - 1, "the retraction is not honoured");
  const { events } = await client.listEvents({ parent: session.name, pageSize: 100 }, { timeoutMs: 30_000 });
  const built = await client.buildContext({ session: session.name }, { timeoutMs: 30_000 });
  const parts = (built.request?.contents ?? []).flatMap((c) => c.parts);
  const calls = parts.filter((p) => p.data.case === "functionCall").length;
  const answers = parts.filter((p) => p.data.case === "functionResponse").length;
  // The popped answer is out of the built request too, by the server's own rule.
  const builtTexts = parts.flatMap((p) => (p.data.case === "text" ? [p.data.value] : []));
  const poppedText = JSON.stringify(popped).match(/"text":"([^"]+)"/)?.[1] ?? "";
  check(poppedText !== "" && !builtTexts.includes(poppedText), "the build shows the popped item");
  check(events.at(-1)?.retractsEventId !== "" && events.at(-1)?.content === undefined, "the pop is no retraction");
  await session.clearSession();
  check((await other.getItems()).length === 0, "clear left items");
  console.log(JSON.stringify({ ok: true, items: ours.items.length, model_calls: ours.inputs.length,
    events: events.length, built_calls: calls, built_answers: answers }));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
