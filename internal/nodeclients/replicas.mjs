// Drives mcp-mux (usually through a load balancer in front of several
// replicas) with the TypeScript SDK client (@modelcontextprotocol/sdk) on
// the 2025-11-25 era, through the interactive flows of internal/replicaset's
// tests. Upstreams: "inter" (mcptest.NewFlowServer), "jobs" (a held
// mcptest.TaskServer) and, after a reload, "extra".
//
//   node replicas.mjs flows URL   every flow, one {"check", "ok", "detail"} line each
//   node replicas.mjs loop URL    calls until a "stop" line on stdin, then one "loop" line
//
// When a flow needs the test to act, the script prints {"need": what,
// "arg": ...} and waits for one line on stdin: "ok" or an error text.
//   config base|extra|tool_search   rewrite the shared config, wait until every replica applied it
//   release INPUT                   let the held job submitted with INPUT complete
// The script waits on conditions with deadlines, never on fixed sleeps.

import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, url] = process.argv.slice(2);
if (!["flows", "loop"].includes(mode) || !url) {
  console.error("usage: node replicas.mjs flows|loop URL");
  process.exit(2);
}

const print = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const report = (check, ok, detail) => print({ check, ok, detail: String(detail ?? "") });

// stdin, a line at a time.
const queue = [];
const readers = [];
readline.createInterface({ input: process.stdin }).on("line", (l) => {
  if (readers.length) readers.shift()(l);
  else queue.push(l);
});
const nextLine = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => readers.push(r)));

function deadline(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function need(what, arg) {
  print({ need: what, arg });
  const reply = await deadline(nextLine(), 60000, `the test's answer to ${what} ${arg}`);
  if (reply !== "ok") throw new Error(`${what} ${arg}: ${reply}`);
}

const ROOT = "file:///ts-root";
const FLOW_RESOURCE = "res://flow/doc";

// connect returns a connected client with handlers for sampling,
// elicitation and roots, and seen: what the server sent it, with waitFor
// resolving once a condition on seen holds.
async function connect(name) {
  const client = new Client(
    { name, version: "1.0.0" },
    { capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: { form: {} } } },
  );
  const seen = { progress: [], logs: [], updated: [], toolsChanged: 0 };
  const wakers = new Set();
  const changed = () => wakers.forEach((w) => w());
  seen.waitFor = (what, cond, ms = 20000) => {
    if (cond()) return Promise.resolve();
    let waker;
    const p = new Promise((resolve) => {
      waker = () => cond() && resolve();
      wakers.add(waker);
    });
    return deadline(p, ms, what).finally(() => wakers.delete(waker));
  };
  client.setRequestHandler(CreateMessageRequestSchema, (req) => ({
    model: "ts-model",
    role: "assistant",
    content: { type: "text", text: `ts-sampled: ${req.params.messages.at(-1)?.content?.text ?? ""}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, () => ({ action: "accept", content: { answer: "ts-answer" } }));
  client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: ROOT, name: "ts-root" }] }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    seen.logs.push(String(n.params.data));
    changed();
  });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    seen.updated.push(n.params.uri);
    changed();
  });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    seen.toolsChanged++;
    changed();
  });
  seen.progressed = (p) => {
    seen.progress.push(p.message ?? "");
    changed();
  };
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return { client, seen };
}

const text = (res) => (res?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

// call calls a tool and returns its text; a tool error throws.
async function call(client, name, args = {}, options = {}) {
  const res = await client.callTool({ name, arguments: args }, undefined, { timeout: 20000, ...options });
  if (res.isError) throw Object.assign(new Error(`${name}: tool error: ${text(res)}`), { result: res });
  return res;
}

async function expectText(promise, want) {
  const t = text(await promise);
  if (!t.includes(want)) throw new Error(`result ${JSON.stringify(t)}, want ${JSON.stringify(want)} in it`);
  return t;
}

const toolNames = async (client) => (await client.listTools()).tools.map((t) => t.name);

async function taskStatus(client, id) {
  const res = await call(client, "get_background_task", { task_id: id });
  return res.structuredContent?.status;
}

async function until(what, fn, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100)); // the next poll of a condition
  }
}

const flows = {
  async progress({ client, seen }) {
    await expectText(call(client, "inter_progress", { tag: "tsp" }, { onprogress: seen.progressed }), "progress done tsp");
    const got = () => seen.progress.filter((m) => m.startsWith("tsp "));
    await seen.waitFor("three progress notifications", () => got().length >= 3);
    if (got().join(",") !== "tsp 1,tsp 2,tsp 3") throw new Error(`progress messages ${JSON.stringify(got())}, want tsp 1, 2, 3 once each in order`);
    return got().join(", ");
  },
  async logging({ client, seen }) {
    await client.setLoggingLevel("info");
    await expectText(call(client, "inter_log", { tag: "tsl" }), "logged tsl");
    await seen.waitFor("the log message", () => seen.logs.includes("log tsl"));
    return "log message received";
  },
  sampling: ({ client }) => expectText(call(client, "inter_sample", { tag: "ts" }), "sampled ts-sampled: sample ts"),
  elicitation: ({ client }) => expectText(call(client, "inter_elicit", { tag: "ts" }), "elicited accept ts-answer"),
  roots: ({ client }) => expectText(call(client, "inter_roots"), `roots ${ROOT}`),
  async subscription({ client, seen }) {
    await client.subscribeResource({ uri: FLOW_RESOURCE });
    await expectText(call(client, "inter_touch", { uri: FLOW_RESOURCE }), "touched");
    await seen.waitFor("notifications/resources/updated", () => seen.updated.includes(FLOW_RESOURCE));
    await client.unsubscribeResource({ uri: FLOW_RESOURCE });
    return "resource updated";
  },
  async list_changed({ client, seen }) {
    for (const [config, listed] of [["extra", true], ["base", false]]) {
      const before = seen.toolsChanged;
      await need("config", config);
      await seen.waitFor("tools/list_changed", () => seen.toolsChanged > before);
      const names = await toolNames(client);
      if (names.includes("extra_ping") !== listed) throw new Error(`after the ${config} reload: tools ${names.join(",")}`);
    }
    return "list_changed on add and remove";
  },
  async tool_search() {
    await need("config", "tool_search");
    const s = await connect("ts-tool-search");
    try {
      let names = await toolNames(s.client);
      if (!names.includes("tool_search") || names.includes("inter_echo")) throw new Error(`tools before a search: ${names.join(",")}`);
      const deferred = await call(s.client, "inter_echo", { text: "x" }).then(() => "", (e) => String(e));
      if (!deferred.includes("deferred")) throw new Error(`calling a deferred tool: ${deferred || "it worked"}`);
      await expectText(call(s.client, "tool_search", { query: "select:inter_echo" }), "inter_echo");
      await s.seen.waitFor("tools/list_changed", () => s.seen.toolsChanged > 0);
      names = await toolNames(s.client);
      if (!names.includes("inter_echo")) throw new Error(`tools after the search: ${names.join(",")}`);
      return await expectText(call(s.client, "inter_echo", { text: "promoted" }), "promoted");
    } finally {
      await s.client.close().catch(() => {});
      await need("config", "base");
    }
  },
  async tasks({ client, seen }) {
    const sub = await call(client, "jobs_submit_job", { input: "ts-task" });
    const id = sub.structuredContent?.task_id;
    if (!id) throw new Error(`submit answered ${JSON.stringify(sub)}`);
    const uri = `mux://tasks/${id}`;
    await client.subscribeResource({ uri });
    const held = await taskStatus(client, id);
    if (held === "completed") throw new Error("the held task completed before its release");
    await need("release", "ts-task");
    await seen.waitFor("the task resource updated", () => seen.updated.includes(uri));
    await until("the task completed", async () => (await taskStatus(client, id)) === "completed");
    await expectText(call(client, "list_background_tasks", {}), id);
    return `${id}: ${held}, then completed`;
  },
};

async function runFlows() {
  let c;
  try {
    c = await connect("ts-flows");
    report("connect", true, `server ${JSON.stringify(c.client.getServerVersion())}`);
  } catch (e) {
    report("connect", false, e?.stack ?? e);
    return;
  }
  for (const [name, fn] of Object.entries(flows)) {
    try {
      report(name, true, await fn(c));
    } catch (e) {
      report(name, false, e?.stack ?? e);
    }
  }
  await c.client.close().catch(() => {});
}

// runLoop calls tools (plain and interactive) until the test says stop,
// printing a "tick" line every five answered calls, then makes one last
// call and reports what happened to them all: calls, ok, failed,
// session_not_found, unanswered (timed out), final_ok (the session still
// works) and the first errors.
async function runLoop() {
  const counts = { calls: 0, ok: 0, failed: 0, session_not_found: 0, unanswered: 0, final_ok: false, errors: [] };
  const fail = (e, prefix = "") => {
    counts.failed++;
    const msg = prefix + String(e?.message ?? e);
    if (/session not found/i.test(msg) || /\b404\b/.test(msg)) counts.session_not_found++;
    if (/timed out/i.test(msg)) counts.unanswered++;
    if (counts.errors.length < 10) counts.errors.push(msg);
  };
  let c;
  try {
    c = await connect("ts-loop");
  } catch (e) {
    fail(e, "connect: ");
    report("loop", false, JSON.stringify(counts));
    return;
  }
  let stop = false;
  nextLine().then(() => (stop = true));
  const once = async (i) => {
    if (i % 3 === 2) await expectText(call(c.client, "inter_sample", { tag: `ts${i}` }), `ts-sampled: sample ts${i}`);
    else await expectText(call(c.client, "inter_echo", { text: `ts${i}` }), `ts${i}`);
  };
  // Five failures in a row: the session is gone (final_ok tells).
  for (let i = 0, failing = 0; !stop && failing < 5; i++) {
    counts.calls++;
    try {
      await once(i);
      failing = 0;
      counts.ok++;
      if (counts.ok % 5 === 0) report("tick", true, counts.ok);
    } catch (e) {
      failing++;
      fail(e);
    }
  }
  counts.final_ok = await once(2).then(() => true, (e) => (counts.errors.push(`final: ${e?.message ?? e}`), false));
  await c.client.close().catch(() => {});
  report("loop", counts.failed === 0 && counts.final_ok, JSON.stringify(counts));
}

if (mode === "flows") await runFlows();
else await runLoop();
report("done", true, "");
process.exit(0);
