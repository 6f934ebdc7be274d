// A real MCP client that nobody here wrote: the TypeScript SDK (@modelcontextprotocol/sdk,
// pinned in package.json), driven by conformance_test.go against Toolwarden's /mcp or /sse.
//
//   node ts-client.mjs <endpoint URL> <token, or "" for none> <http|sse> <scenario> [<JSON>]
//
// Scenarios:
//   list             initialize, then tools/list page by page
//   calls <steps>    initialize, list the tools (printed; listing also makes the SDK
//                    check structured results against output schemas), then run each
//                    step of the JSON array in turn: {"name": tool, "arguments": {...}}
//                    is a tools/call; {"wait": label} prints a "waiting" event and
//                    reads one line from stdin before going on (the Go test changes
//                    something meanwhile)
//   resources <want> list resources (page by page), templates and prompts, read the
//                    resource want.read and get the prompt want.prompt with want.args
//   listen [<tool>]  initialize, list, open the session's stream, then wait for
//                    notifications/tools/list_changed and list again, until the list
//                    has the tool named (a JSON string) if one is given
//
// Every line on stdout is one JSON object with an "event" field; the last one is
// {"event":"done"}. Failures of the client (401, JSON-RPC errors, timeouts) are events
// too ({"event":"error"}), so the Go test checks them; the exit code is non-zero only
// when the script itself is used wrongly or fails unexpectedly.
import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

// Held calls wait for a person (TOOLWARDEN_MCP_HOLD, 50 s by default); the SDK's own
// request timeout is 60 s. Allow more than the hold, and more again on progress.
const CALL_TIMEOUT_MS = 120_000;
// How long "listen" waits for list_changed.
const LISTEN_TIMEOUT_MS = 20_000;

const [url, token, transportKind, scenario, json] = process.argv.slice(2);
if (!url || token === undefined || !["http", "sse"].includes(transportKind) || !scenario) {
  console.error("usage: node ts-client.mjs <endpoint URL> <token> <http|sse> <list|calls|listen> [<JSON>]");
  process.exit(2);
}

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + "\n");
}

// errorFields is what the Go test checks of an error: the HTTP status (code of a
// StreamableHTTPError or SseError) or the JSON-RPC error code (McpError), and the text.
function errorFields(err) {
  return { name: err?.constructor?.name ?? typeof err, code: err?.code ?? null, message: String(err?.message ?? err) };
}

// Resolves once the standalone GET stream of a streamable HTTP session is open, so a
// notification sent after that cannot be lost (the server drops what it cannot deliver).
let streamOpen;
const streamOpened = new Promise((resolve) => (streamOpen = resolve));
async function watchingFetch(input, init) {
  const res = await fetch(input, init);
  if ((init?.method ?? "GET") === "GET" && res.ok) streamOpen();
  return res;
}

// Both transports send requestInit's headers with every request, the SSE transport's
// event stream included.
const requestInit = token === "" ? {} : { headers: { Authorization: `Bearer ${token}` } };
const transport =
  transportKind === "http"
    ? new StreamableHTTPClientTransport(new URL(url), { requestInit, fetch: watchingFetch })
    : new SSEClientTransport(new URL(url), { requestInit, fetch: watchingFetch });

const client = new Client({ name: "toolwarden-conformance-ts", version: "1.0.0" });

async function listAll() {
  const tools = [];
  let cursor;
  let pages = 0;
  do {
    const res = await client.listTools(cursor === undefined ? {} : { cursor });
    pages++;
    tools.push(...res.tools);
    cursor = res.nextCursor;
  } while (cursor);
  return { pages, tools };
}

let stdinLines;
async function readLine() {
  stdinLines ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const { value, done } = await stdinLines.next();
  if (done) throw new Error("stdin closed while waiting");
  return value;
}

async function run() {
  try {
    await client.connect(transport);
  } catch (err) {
    emit("error", { stage: "connect", ...errorFields(err) });
    return;
  }
  emit("initialized", {
    protocolVersion: transport.protocolVersion ?? null,
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
  });

  switch (scenario) {
    case "list":
      emit("tools", await listAll());
      break;

    case "calls": {
      emit("tools", await listAll());
      for (const step of JSON.parse(json ?? "[]")) {
        if (step.wait !== undefined) {
          emit("waiting", { label: step.wait });
          await readLine();
          continue;
        }
        try {
          const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, {
            timeout: CALL_TIMEOUT_MS,
            resetTimeoutOnProgress: true,
            onprogress: (p) => emit("progress", { tool: step.name, message: p.message ?? null }),
          });
          emit("result", { tool: step.name, result });
        } catch (err) {
          emit("error", { stage: "call", tool: step.name, ...errorFields(err) });
        }
      }
      break;
    }

    case "listen": {
      // Every notification wakes the waiter; changes made elsewhere may send some
      // before the one the Go test causes, so this lists again after each until the
      // tool named in the JSON argument is there.
      const until = JSON.parse(json ?? "null");
      let wake = () => {};
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => wake());
      const before = await listAll();
      if (transportKind === "http") await streamOpened; // the SSE transport's stream is its connection
      emit("listening", { names: before.tools.map((t) => t.name) });
      const deadline = Date.now() + LISTEN_TIMEOUT_MS;
      for (;;) {
        const changed = await new Promise((resolve) => {
          wake = () => resolve(true);
          setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
        });
        if (!changed) {
          emit("error", { stage: "listen", message: `no notifications/tools/list_changed listing ${until} within ${LISTEN_TIMEOUT_MS} ms` });
          break;
        }
        const names = (await listAll()).tools.map((t) => t.name);
        emit("list_changed", { names });
        if (until === null || names.includes(until)) break;
      }
      break;
    }

    case "resources": {
      // {"read": uri, "prompt": name, "args": {...}}: list every resource, template and
      // prompt page by page, read one resource, get one prompt.
      const want = JSON.parse(json ?? "{}");
      const resources = [];
      let cursor;
      do {
        const res = await client.listResources(cursor === undefined ? {} : { cursor });
        resources.push(...res.resources);
        cursor = res.nextCursor;
      } while (cursor);
      const templates = (await client.listResourceTemplates()).resourceTemplates;
      const prompts = (await client.listPrompts()).prompts;
      emit("listed", { resources, templates, prompts });
      try {
        emit("read", { contents: (await client.readResource({ uri: want.read })).contents });
      } catch (err) {
        emit("error", { stage: "read", ...errorFields(err) });
      }
      try {
        emit("prompt", { messages: (await client.getPrompt({ name: want.prompt, arguments: want.args ?? {} })).messages });
      } catch (err) {
        emit("error", { stage: "prompt", ...errorFields(err) });
      }
      break;
    }

    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  await client.close();
}

try {
  await run();
  emit("done");
  process.exit(0);
} catch (err) {
  console.error(err?.stack ?? String(err));
  process.exit(1);
}
