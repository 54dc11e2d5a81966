local commands = require("trellisd.commands")
local hooks = require("trellisd.hooks")
local turn = require("trellisd.turn")

test("a prompt /name args runs a command; another prompt starting with / does not", function()
  eq(
    { name = "fix-tests", arguments = "unit -k 'a b'" },
    commands.parse("/fix-tests unit -k 'a b'")
  )
  eq({ name = "review", arguments = "" }, commands.parse("  /review  "))
  eq(nil, commands.parse("/usr/bin is full"))
  eq(nil, commands.parse("/Fix it"))
  eq(nil, commands.parse(" / nothing"))
  eq(nil, commands.parse("fix /tests"))
end)

test("session/turn's params carry command and arguments in place of the prompt", function()
  local params = { sessionId = "s", prompt = "/check done.txt" }
  turn.as_command(params)
  eq({ sessionId = "s", command = "check", arguments = "done.txt" }, params)
  params = { sessionId = "s", prompt = "/check" }
  turn.as_command(params)
  eq({ sessionId = "s", command = "check" }, params)
  params = { sessionId = "s", prompt = "hello" }
  turn.as_command(params)
  eq({ sessionId = "s", prompt = "hello" }, params)
end)

test("the list says a command's settings and what a project's had narrowed", function()
  local lines = commands.lines({
    {
      name = "fix",
      source = "user",
      argumentHint = "[path]",
      description = "Fix the tests",
      settings = { verify = { "pytest", "$ARGUMENTS" }, budget = 0.5, maxSteps = 30 },
      shadowsProject = true,
    },
    {
      name = "deploy",
      source = "project",
      settings = {},
      narrowed = {
        { setting = "model", asked = "huge", applied = vim.NIL, reason = "not a model you named" },
        { setting = "maxSteps", asked = 500, applied = 100, reason = "the daemon's bound" },
      },
    },
  })
  eq({
    "# commands: /name [argument hint] · source · description (:Trellis /name runs one)",
    "/fix [path] · user · Fix the tests",
    "  settings: verify pytest $ARGUMENTS · maxSteps 30 · budget $0.5",
    "  used over the project's command of the same name",
    "/deploy · project",
    "  narrowed: model: asked huge, runs with the session's (not a model you named)",
    "  narrowed: maxSteps: asked 500, runs with 100 (the daemon's bound)",
  }, lines)
end)

test("a turn's events: the command it ran, the hooks that blocked or decided", function()
  local lines = hooks.run_lines({
    {
      kind = "command",
      detail = {
        name = "fix",
        source = "project",
        arguments = "unit",
        settings = { maxSteps = 5 },
      },
    },
    {
      kind = "hook",
      detail = { event = "postToolUse", command = { "notify" }, decision = "continue" },
    },
    {
      kind = "hook",
      detail = {
        event = "preToolUse",
        command = { "python3", "g.py" },
        decision = "block",
        reason = "no\nwrites\n",
      },
    },
    {
      kind = "hook",
      detail = { event = "permissionRequest", command = { "ok" }, decision = "allow" },
    },
    { kind = "step", detail = {} },
  })
  eq({
    "> ran the project command /fix unit · maxSteps 5",
    "> preToolUse hook blocked: no writes (python3 g.py)",
    "> permissionRequest hook allowed it (ok)",
  }, lines)
end)

test("a hook's line in :TrellisHooks", function()
  local function hook(event, matcher, source, state)
    local h = { event = event, matcher = matcher, command = { "python3", "g.py" }, source = source }
    h.approved, h.state = state == "approved", state
    return hooks.line(h)
  end
  eq(
    "preToolUse · write_* · python3 g.py · config · approved",
    hook("preToolUse", "write_*", "config", "approved")
  )
  eq("turnEnd · - · python3 g.py · project · declined", hook("turnEnd", nil, "project", "declined"))
  eq(
    "postToolUse · every tool · python3 g.py · project · awaiting approval",
    hook("postToolUse", nil, "project", "awaiting approval")
  )
end)

test("a userPromptSubmit hook's refusal is told from other conflicts", function()
  local err = {
    code = -32020,
    message = "a userPromptSubmit hook blocked the prompt: no",
    data = { sessionId = "s", hook = "sh guard", reason = "no" },
  }
  eq("no", turn.blocked_by_hook(err))
  eq(nil, turn.blocked_by_hook({ code = -32020, message = "busy", data = { sessionId = "s" } }))
  eq(nil, turn.blocked_by_hook({ code = -32020, message = "busy" }))
end)
