local config = require("trellisd.config")
local walls = require("trellisd.walls")

local function policy(mode, network)
  return {
    approval = "ask",
    sandbox = mode,
    network = network,
    walls = {
      mode = mode,
      network = network,
      writable = mode == "workspace-write" and { "/src/app", "/tmp" } or {},
      hidden = mode ~= "off" and { "/home/me/.ssh" } or {},
      protected = mode == "workspace-write" and { ".git/hooks" } or {},
      tempBytes = 268435456,
      processes = 1024,
    },
  }
end

test("the header's line says the mode and the network", function()
  eq("walls: workspace-write · network off", walls.line(policy("workspace-write", false)))
  eq("walls: read-only · network on", walls.line(policy("read-only", true)))
  eq(
    "walls: workspace-write · network: pypi.org:443, github.com:443",
    walls.line(policy("workspace-write", { "pypi.org:443", "github.com:443" }))
  )
  eq("walls: off · programs run unconfined", walls.line(policy("off", true)))
  -- a daemon without walls in its answer: the policy's own keys
  eq("walls: read-only · network off", walls.line({ sandbox = "read-only", network = false }))
end)

test("the details list what programs may write, may not read, may not change", function()
  local lines = walls.details("fix it", policy("workspace-write", false))
  eq("# The walls of “fix it”", lines[1])
  eq("approval: ask · reads run; every write, command and MCP tool call asks", lines[4])
  truthy(vim.tbl_contains(lines, "network off (the session's own loopback only)"), "the network")
  truthy(vim.tbl_contains(lines, "private /tmp: at most 256 MiB"), "the /tmp's size")
  local at = {}
  for i, l in ipairs(lines) do
    at[l] = i
  end
  eq("- /src/app", lines[at["## Writable"] + 1])
  eq("- /home/me/.ssh", lines[at["## Hidden (not even readable)"] + 1])
  eq("- .git/hooks", lines[at["## Protected (read-only in the root)"] + 1])
  local off = walls.details("loose", policy("off", true))
  truthy(off[3]:find("^mode: off: no walls"), "the mode off")
  truthy(not vim.tbl_contains(off, "## Writable"), "no paths listed without walls")
end)

test("an escalation is allowed once or denied, with its command and reason", function()
  local q = walls.escalation({
    sessionId = "s",
    tool = "run_command",
    arguments = { argv = { "pip", "install", "foo" }, escalate = true, reason = "x" },
    kind = "escalate",
    command = "pip install foo",
    reason = "it installs for the user",
  })
  eq("trellisd.escalation", q.kind)
  local decisions = vim.tbl_map(function(c)
    return c.decision
  end, q.choices)
  eq({ "allow", "deny" }, decisions, "no always")
  truthy(q.prompt:find("^⚠ Run OUTSIDE the walls%?"), "the prompt says it: " .. q.prompt)
  truthy(q.prompt:find("pip install foo", 1, true), "the command")
  truthy(q.prompt:find("it installs for the user", 1, true), "the reason")
  eq("> ⚠ escalation asked by the model: run OUTSIDE the walls: `pip install foo`", q.lines[1])
  eq("> reason: it installs for the user", q.lines[2])
  local child = walls.escalation({ command = "make", reason = "why" }, "child session “a” of “b”")
  truthy(child.prompt:find("the child session “a” of “b” asks to run", 1, true), child.prompt)
end)

test("setup's sandbox and network go into session/open's policy", function()
  config.set({})
  eq(nil, config.policy())
  config.set({ policy = { approval = "auto" } })
  eq({ approval = "auto" }, config.policy())
  config.set({ policy = { approval = "auto", sandbox = "off" }, sandbox = "read-only" })
  eq({ approval = "auto", sandbox = "read-only" }, config.policy())
  config.set({ network = false })
  eq({ network = false }, config.policy())
  config.set({ network = { "pypi.org:443" } })
  eq({ network = { "pypi.org:443" } }, config.policy())
  config.set({})
end)
