// Drives an MCP server (mcp-mux in front of server-everything, tools named
// everything_*) with a real TypeScript client and prints one JSON line per
// check: {"check": name, "ok": bool, "detail": text}. The Go test asserts
// the lines; this script only reports.
//
//   node everything.mjs sdk1|v2 legacy|auto URL
//
// sdk1 is @modelcontextprotocol/sdk (v1, what the Inspector and most agents
// use); v2 is @modelcontextprotocol/client with the given version
// negotiation mode (legacy is its default).

const [flavor, mode, url] = process.argv.slice(2);
if (!flavor || !mode || !url) {
  console.error("usage: node everything.mjs sdk1|v2 legacy|auto URL");
  process.exit(2);
}

const report = (check, ok, detail) =>
  process.stdout.write(JSON.stringify({ check, ok, detail: String(detail ?? "") }) + "\n");

const capabilities = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
};
const info = { name: `mux-test-${flavor}-${mode}`, version: "1.0.0" };

let roots = [{ uri: "file:///tmp/mux-root-a", name: "root-a" }];
const seen = { rootsParams: [], elicitParams: [], logs: [] };

async function makeClient() {
  if (flavor === "sdk1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const t = await import("@modelcontextprotocol/sdk/types.js");
    const client = new Client(info, { capabilities });
    const on = (method, handler) => {
      const schema = {
        "roots/list": t.ListRootsRequestSchema,
        "sampling/createMessage": t.CreateMessageRequestSchema,
        "elicitation/create": t.ElicitRequestSchema,
      }[method];
      client.setRequestHandler(schema, handler);
    };
    const onLog = (handler) => client.setNotificationHandler(t.LoggingMessageNotificationSchema, handler);
    return { client, on, onLog, transport: new StreamableHTTPClientTransport(new URL(url)) };
  }
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const client = new Client(info, { capabilities, versionNegotiation: { mode } });
  const on = (method, handler) => client.setRequestHandler(method, handler);
  const onLog = (handler) => client.setNotificationHandler("notifications/message", handler);
  return { client, on, onLog, transport: new StreamableHTTPClientTransport(new URL(url)) };
}

// callTool's options are its third argument in v1 and its second in v2.
const opts = (o = {}) => ({ timeout: 15000, ...o });
const call = (name, args, o) =>
  flavor === "sdk1"
    ? client.callTool({ name, arguments: args }, undefined, opts(o))
    : client.callTool({ name, arguments: args }, opts(o));

const text = (res) => (res?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

async function check(name, fn) {
  try {
    const detail = await fn();
    report(name, true, detail);
  } catch (e) {
    report(name, false, e?.stack ?? e);
  }
}

async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const { client, on, onLog, transport } = await makeClient();
on("roots/list", (req) => {
  seen.rootsParams.push(req.params === undefined ? "absent" : JSON.stringify(req.params));
  return { roots };
});
on("sampling/createMessage", (req) => {
  const last = req.params.messages.at(-1);
  return {
    model: "mux-test-model",
    role: "assistant",
    content: { type: "text", text: `sampled: ${last?.content?.text ?? ""}` },
  };
});
on("elicitation/create", (req) => {
  seen.elicitParams.push(JSON.stringify(req.params));
  if (req.params.mode === "url") return { action: "accept" };
  return { action: "accept", content: { name: "Ada Lovelace", check: true } };
});
onLog((n) => {
  seen.logs.push(n.params);
});

await check("connect", async () => {
  await client.connect(transport);
  return `server ${JSON.stringify(client.getServerVersion())}`;
});

// The protocol revision the client negotiated: 2026-07-28 has no
// roots/list_changed or logging/setLevel, and servers ask clients for input
// with input_required results instead of requests.
const era = client.getNegotiatedProtocolVersion?.() ?? "2025-11-25";
report("era", true, era);
const modern = era >= "2026-07-28";

await check("tools", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const want of [
    "everything_echo",
    "everything_get-roots-list",
    "everything_trigger-sampling-request",
    "everything_trigger-elicitation-request",
    "everything_trigger-url-elicitation",
    "everything_trigger-long-running-operation",
  ]) {
    if (!names.includes(want)) throw new Error(`missing ${want} in ${names.join(",")}`);
  }
  return `${names.length} tools`;
});

await check("roots", async () => {
  const res = await call("everything_get-roots-list", {});
  const t = text(res);
  if (res.isError || !t.includes("file:///tmp/mux-root-a")) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  if (seen.rootsParams.includes("null")) throw new Error(`roots/list arrived with params null`);
  return `roots/list params seen: ${seen.rootsParams.join(" ")}`;
});

if (!modern) await check("roots_list_changed", async () => {
  roots = [{ uri: "file:///tmp/mux-root-b", name: "root-b" }];
  const before = seen.rootsParams.length;
  await client.sendRootsListChanged();
  await until("the server to ask for roots again", () => seen.rootsParams.length > before);
  const res = await until("the new root in get-roots-list", async () => {
    const r = await call("everything_get-roots-list", {});
    return text(r).includes("file:///tmp/mux-root-b") ? r : null;
  });
  return text(res).split("\n")[0];
});

await check("sampling", async () => {
  const res = await call("everything_trigger-sampling-request", { prompt: "hello mux", maxTokens: 5 });
  const t = text(res);
  if (res.isError || !t.includes("sampled: ") || !t.includes("hello mux")) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  return "sampling round trip";
});

await check("elicitation_form", async () => {
  const res = await call("everything_trigger-elicitation-request", {});
  const t = text(res);
  if (res.isError || !t.includes("Ada Lovelace")) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  const p = JSON.parse(seen.elicitParams.at(-1));
  if ("mode" in p) throw new Error(`form elicitation arrived with a mode the server did not send: ${JSON.stringify(p.mode)}`);
  return "form elicitation round trip";
});

await check("elicitation_url", async () => {
  const res = await call("everything_trigger-url-elicitation", { url: "https://example.com/mux-consent", elicitationId: "mux-e-1" });
  const t = text(res);
  if (res.isError || !t.includes("completed the URL elicitation")) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  const p = JSON.parse(seen.elicitParams.at(-1));
  // On 2026-07-28 the v2 client parses an input request with that revision's
  // URL-mode schema, which has no elicitationId (the revision dropped it with
  // notifications/elicitation/complete), so the handler never sees it;
  // mcp-mux passes it through (TestModernURLElicitationKeepsItsID).
  const id = modern ? !("elicitationId" in p) || p.elicitationId === "mux-e-1" : p.elicitationId === "mux-e-1";
  if (p.mode !== "url" || p.url !== "https://example.com/mux-consent" || !id) {
    throw new Error(`url elicitation params changed: ${JSON.stringify(p)}`);
  }
  return `url elicitation round trip, params ${JSON.stringify(p)}`;
});

await check("progress", async () => {
  const got = [];
  const res = await call("everything_trigger-long-running-operation", { duration: 0.3, steps: 3 }, {
    onprogress: (p) => got.push(p.progress),
  });
  if (res.isError) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  if (got.length < 3) throw new Error(`got ${got.length} progress notifications: ${JSON.stringify(got)}`);
  return `progress ${got.join(",")}`;
});

if (!modern) await check("logging", async () => {
  await client.setLoggingLevel("debug");
  const before = seen.logs.length;
  const res = await call("everything_toggle-simulated-logging", {});
  if (res.isError) throw new Error(`unexpected result: ${JSON.stringify(res)}`);
  await until("a log message", () => seen.logs.length > before);
  await call("everything_toggle-simulated-logging", {});
  return `log: ${JSON.stringify(seen.logs.at(-1))}`;
});

await check("resources", async () => {
  const { resources } = await client.listResources();
  if (!resources.length) throw new Error("no resources");
  const r = resources.find((x) => x.uri.startsWith("demo://resource/static")) ?? resources[0];
  const read = await client.readResource({ uri: r.uri });
  if (!read.contents?.length || read.contents[0].uri !== r.uri) throw new Error(`read ${r.uri}: ${JSON.stringify(read)}`);
  const { resourceTemplates } = await client.listResourceTemplates();
  if (!resourceTemplates.length) throw new Error("no resource templates");
  return `${resources.length} resources, ${resourceTemplates.length} templates, read ${r.uri}`;
});

await check("prompts", async () => {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((p) => p.name);
  if (!names.includes("everything_simple-prompt")) throw new Error(`prompts: ${names.join(",")}`);
  const got = await client.getPrompt({ name: "everything_simple-prompt" });
  if (!JSON.stringify(got.messages).includes("simple prompt without arguments")) throw new Error(JSON.stringify(got));
  const args = await client.getPrompt({ name: "everything_args-prompt", arguments: { city: "Lyon" } });
  if (!JSON.stringify(args.messages).includes("Lyon")) throw new Error(JSON.stringify(args));
  return `${names.length} prompts`;
});

await check("completion", async () => {
  const res = await client.complete({
    ref: { type: "ref/prompt", name: "everything_completable-prompt" },
    argument: { name: "department", value: "Eng" },
  });
  if (!res.completion?.values?.includes("Engineering")) throw new Error(JSON.stringify(res));
  const dep = await client.complete({
    ref: { type: "ref/prompt", name: "everything_completable-prompt" },
    argument: { name: "name", value: "" },
    context: { arguments: { department: "Sales" } },
  });
  if (!dep.completion?.values?.includes("Eve")) throw new Error(JSON.stringify(dep));
  return `completion ${res.completion.values.join(",")} / ${dep.completion.values.join(",")}`;
});

await client.close().catch(() => {});
report("done", true, "");
process.exit(0);
