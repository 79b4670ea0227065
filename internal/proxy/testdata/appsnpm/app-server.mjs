import { McpServer } from "@modelcontextprotocol/server";
import { StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { registerAppTool, registerAppResource, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/server";
const name = process.argv[2] || "app";
const server = new McpServer({ name, version: "1.0.0" });
registerAppResource(server, "dashboard", "ui://dashboard", {}, async () => ({
  contents: [{ uri: "ui://dashboard", mimeType: RESOURCE_MIME_TYPE, text: `<html>${name}</html>` }],
}));
registerAppTool(server, "show_dashboard", { description: "d", _meta: { ui: { resourceUri: "ui://dashboard" } } },
  async () => ({ content: [{ type: "text", text: `${name} dashboard` }] }));
await server.connect(new StdioServerTransport());
