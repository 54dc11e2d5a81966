// Drives `trellisd acp` with the TypeScript ACP SDK's ClientSideConnection, as an editor
// would: initialize, new, a prompt with streamed chunks, a tool call needing permission,
// cancel, list; then a new agent process on the same store: load with replay, resume, a
// prompt after the restart, fork. The model server the test runs queues the replies.
//
//   node drive.mjs <python> <db> <cwd> <sent.jsonl>
// prints one JSON object saying what it saw; every line the agents sent goes to sent.jsonl.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Writable } from "node:stream";
import { ClientSideConnection, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [python, db, cwd, sentFile] = process.argv.slice(2);
const updates = [];
const asked = [];
let onUpdate = () => {};

function start() {
  const child = spawn(python, ["-m", "trellisd", "acp", "--db", db], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (chunk) => {
        appendFileSync(sentFile, chunk);
        controller.enqueue(new Uint8Array(chunk));
      });
      child.stdout.on("end", () => controller.close());
    },
  });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), input);
  const conn = new ClientSideConnection(
    () => ({
      async sessionUpdate(params) {
        updates.push(params);
        onUpdate(params);
      },
      async requestPermission(params) {
        asked.push(params);
        const once = params.options.find((o) => o.kind === "allow_once");
        return { outcome: { outcome: "selected", optionId: once.optionId } };
      },
    }),
    stream,
  );
  return { child, conn };
}

async function stop({ child }) {
  child.stdin.end();
  await new Promise((resolve) => child.on("exit", resolve));
}

const text = (sessionId, kind) =>
  updates
    .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === kind)
    .map((u) => u.update.content.text)
    .join("");

const out = {};
let agent = start();
const init = await agent.conn.initialize({
  protocolVersion: PROTOCOL_VERSION,
  clientCapabilities: {},
});
out.protocolVersion = init.protocolVersion;
out.capabilities = init.agentCapabilities;
const { sessionId } = await agent.conn.newSession({ cwd, mcpServers: [] });
out.sessionId = sessionId;

// The test holds the reply after its first piece until this says the piece arrived.
onUpdate = (u) => {
  if (u.update.sessionUpdate === "agent_message_chunk") {
    onUpdate = () => {};
    process.stderr.write("streaming\n");
  }
};
let reply = await agent.conn.prompt({ sessionId, prompt: [{ type: "text", text: "hello" }] });
out.hello = { stopReason: reply.stopReason, text: text(sessionId, "agent_message_chunk") };
out.firstChunk = updates.find((u) => u.update.sessionUpdate === "agent_message_chunk").update
  .content.text;

reply = await agent.conn.prompt({ sessionId, prompt: [{ type: "text", text: "write" }] });
out.write = {
  stopReason: reply.stopReason,
  asked: asked.length,
  statuses: updates
    .filter((u) => u.update.sessionUpdate.startsWith("tool_call"))
    .map((u) => u.update.status),
};

let cancelled = false;
onUpdate = (u) => {
  if (!cancelled && u.update.sessionUpdate === "agent_message_chunk") {
    cancelled = true;
    agent.conn.cancel({ sessionId });
  }
};
reply = await agent.conn.prompt({ sessionId, prompt: [{ type: "text", text: "slow" }] });
onUpdate = () => {};
out.cancel = reply.stopReason;

const listed = await agent.conn.listSessions({ cwd });
out.listed = listed.sessions.map((s) => s.sessionId);
await stop(agent);

updates.length = 0;
agent = start();
await agent.conn.initialize({ protocolVersion: PROTOCOL_VERSION, clientCapabilities: {} });
await agent.conn.loadSession({ sessionId, cwd, mcpServers: [] });
out.replayed = updates
  .filter((u) => u.update.sessionUpdate === "user_message_chunk")
  .map((u) => u.update.content.text);
await agent.conn.resumeSession({ sessionId, cwd });
reply = await agent.conn.prompt({ sessionId, prompt: [{ type: "text", text: "after restart" }] });
out.afterRestart = reply.stopReason;
const fork = await agent.conn.unstable_forkSession({ sessionId, cwd });
out.fork = fork.sessionId;
await stop(agent);
console.log(JSON.stringify(out));
