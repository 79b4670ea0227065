// Drives mcp-mux's profiles with a real TypeScript client and prints one
// JSON line per check: {"check": name, "ok": bool, "detail": text}. The
// mux serves servers alpha and beta; KEY_A's caller is bound to the
// profile of alpha's tools, KEY_B's to beta's, KEY_C's to none.
//
//   node profiles.mjs sdk1|v2 legacy|modern BASE KEY_A KEY_B KEY_C
//
// BASE is the mux's URL without /mcp. sdk1 is @modelcontextprotocol/sdk
// (2025-11-25); v2 is @modelcontextprotocol/client with the given version
// negotiation mode (modern: 2026-07-28).

const [flavor, mode, base, keyA, keyB, keyC] = process.argv.slice(2);
if (!flavor || !mode || !base || !keyA || !keyB || !keyC) {
  console.error("usage: node profiles.mjs sdk1|v2 legacy|modern BASE KEY_A KEY_B KEY_C");
  process.exit(2);
}

const report = (check, ok, detail) =>
  process.stdout.write(JSON.stringify({ check, ok, detail: String(detail ?? "") }) + "\n");
const info = { name: `mux-profiles-${flavor}-${mode}`, version: "1.0.0" };

async function connect(path, key) {
  const requestInit = { headers: { Authorization: `Bearer ${key}` } };
  let client, transport;
  if (flavor === "sdk1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    client = new Client(info, { capabilities: {} });
    transport = new StreamableHTTPClientTransport(new URL(base + path), { requestInit });
  } else {
    const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
    client = new Client(info, { capabilities: {}, versionNegotiation: { mode } });
    transport = new StreamableHTTPClientTransport(new URL(base + path), { requestInit });
  }
  await client.connect(transport);
  return client;
}

const call = (client, name) =>
  flavor === "sdk1"
    ? client.callTool({ name, arguments: { text: "hi" } }, undefined, { timeout: 15000 })
    : client.callTool({ name, arguments: { text: "hi" } }, { timeout: 15000 });

async function check(name, fn) {
  try {
    report(name, true, await fn());
  } catch (e) {
    report(name, false, e?.stack ?? e);
  }
}

// refused calls name and returns the error's message; a result is a failure.
async function refused(client, name) {
  let res;
  try {
    res = await call(client, name);
  } catch (e) {
    return e?.message ?? String(e);
  }
  throw new Error(`${name} answered: ${JSON.stringify(res)}`);
}

async function tools(client) {
  const { tools } = await client.listTools();
  return tools.map((t) => t.name).sort().join(" ");
}

for (const [who, path, key, own, other] of [
  ["a", "/mcp", keyA, "alpha_echo", "beta_echo"],
  ["b", "/mcp", keyB, "beta_echo", "alpha_echo"],
  ["path_b", "/mcp/b", keyC, "beta_echo", "alpha_echo"],
]) {
  let client;
  await check(`${who}_connect`, async () => {
    client = await connect(path, key);
    return client.getServerVersion?.()?.name ?? "connected";
  });
  if (!client) continue;
  await check(`${who}_tools`, () => tools(client));
  await check(`${who}_own`, async () => {
    const res = await call(client, own);
    if (res.isError) throw new Error(JSON.stringify(res));
    return res.content.map((c) => c.text).join("");
  });
  await check(`${who}_refused`, () => refused(client, other));
  await client.close();
}

// A caller bound to profile a cannot open profile b by path.
await check("escape_refused", async () => {
  try {
    await connect("/mcp/b", keyA);
  } catch (e) {
    return e?.message ?? String(e);
  }
  throw new Error("connected to /mcp/b with profile a's key");
});
report("done", true, "");
