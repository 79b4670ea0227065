// Calls one tool through mcp-mux with a real TypeScript client whose
// elicitation handler answers mcp-mux's approval question, and prints one
// JSON line: {"era", "isError", "text", "asked": [messages]}.
//
//   node approvals.mjs sdk1|v2 legacy|auto URL approve|decline TOOL PATH
//
// sdk1 is @modelcontextprotocol/sdk (2025-11-25); v2 is
// @modelcontextprotocol/client with the given version negotiation mode
// (auto takes 2026-07-28, where the question arrives in an input_required).

const [flavor, mode, url, answer, tool, path] = process.argv.slice(2);
if (!flavor || !mode || !url || !answer || !tool || !path) {
  console.error("usage: node approvals.mjs sdk1|v2 legacy|auto URL approve|decline TOOL PATH");
  process.exit(2);
}

const info = { name: `mux-approvals-${flavor}-${mode}`, version: "1.0.0" };
const capabilities = { elicitation: { form: {} } };
const asked = [];
const onElicit = (req) => {
  asked.push(req.params.message);
  return { action: "accept", content: { approve: answer === "approve" } };
};

let client, transport, call;
if (flavor === "sdk1") {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const t = await import("@modelcontextprotocol/sdk/types.js");
  client = new Client(info, { capabilities });
  client.setRequestHandler(t.ElicitRequestSchema, onElicit);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = () => client.callTool({ name: tool, arguments: { path } }, undefined, { timeout: 20000 });
} else {
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  client = new Client(info, { capabilities, versionNegotiation: { mode } });
  client.setRequestHandler("elicitation/create", onElicit);
  transport = new StreamableHTTPClientTransport(new URL(url));
  call = () => client.callTool({ name: tool, arguments: { path } }, { timeout: 20000 });
}

try {
  await client.connect(transport);
  const era = client.getNegotiatedProtocolVersion?.() ?? "2025-11-25";
  const res = await call();
  const text = (res?.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  process.stdout.write(JSON.stringify({ era, isError: !!res.isError, text, asked }) + "\n");
  await client.close();
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e?.stack ?? e), asked }) + "\n");
  process.exit(1);
}
