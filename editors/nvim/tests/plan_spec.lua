-- Plans, approval modes and rules: their wording, checked against protocol/schema.json, and
-- what a person does with them against a fake daemon that answers as protocol/plans.md
-- says: the live plan in the header, a planned turn's mark, plan mode's refusal said
-- plainly, the plan-mode toggle (session/mode), running a plan (session/plan/approve), a
-- reopened session's plans, and a rule offered in an approval.
local approvals = require("trellisd.approvals")
local daemon = require("trellisd.daemon")
local grants = require("trellisd.grants")
local modes = require("trellisd.modes")
local plan = require("trellisd.plan")
local sessions = require("trellisd.sessions")
local trellis = require("trellisd")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")
local plugin = vim.fn.fnamemodify(here .. "/..", ":p")
local schema =
  vim.fn.json_decode(table.concat(vim.fn.readfile(plugin .. "../../protocol/schema.json"), "\n"))

-- what the plugin tells the user, by level
local notes = {}
vim.notify = function(message, level)
  table.insert(notes, { message = message, level = level })
end

-- the folder conversations are opened over
local folder = vim.fn.tempname()
vim.fn.mkdir(folder, "p")
vim.cmd("cd " .. vim.fn.fnameescape(folder))

local ENTRIES = {
  { content = "read the parser", status = "completed" },
  { content = "fix the off-by-one", status = "in_progress", priority = "high" },
  { content = "run the tests", status = "pending" },
}

test("a plan entry shows its status icon and its priority; the plan how far it has come", function()
  eq("✓ read the parser", plan.entry_line(ENTRIES[1]))
  eq("◐ fix the off-by-one (high)", plan.entry_line(ENTRIES[2]))
  eq("○ run the tests", plan.entry_line(ENTRIES[3]))
  eq("1 of 3 done", plan.progress(ENTRIES))
  local section = plan.section({ turnId = "t-1", name = "“fix it”", entries = ENTRIES })
  eq({
    "",
    "## Plan of turn “fix it” · 1 of 3 done",
    "✓ read the parser",
    "◐ fix the off-by-one (high)",
    "○ run the tests",
  }, section)
  eq("> plan: 1 of 3 done (gR or :TrellisRunPlan runs it)", plan.mark({ step = 2, entries = ENTRIES }))
  eq("> carries out the plan of turn “fix it”", plan.follows_line("“fix it”"))
  eq("“fix it…”", plan.turn_name("t-1", "fix it\nplease"))
  eq("t-01234567…", plan.turn_name("t-0123456789abcdef"))
end)

test("every plan status and approval mode the plugin names is the schema's", function()
  local statuses = vim.tbl_keys(plan.ICONS)
  table.sort(statuses)
  local wanted = vim.list_slice(schema["$defs"].PlanStatus.enum)
  table.sort(wanted)
  eq(wanted, statuses)
  eq(schema["$defs"].ApprovalMode.enum, modes.ALL, "every mode, loosest first")
  for _, mode in ipairs(modes.ALL) do
    truthy(modes.DESCRIPTIONS[mode], "a description of " .. mode)
  end
  local decisions = {}
  for _, c in ipairs(approvals.choices({ "pytest", "**" })) do
    decisions[#decisions + 1] = c.decision
  end
  for _, d in ipairs(decisions) do
    truthy(vim.tbl_contains(schema.clientRequests["session/requestApproval"].result.properties.decision.enum, d), d)
  end
end)

test("a plan runs under the mode before plan mode, else ask", function()
  eq({ "ask", "acceptEdits", "auto" }, modes.run_choices(nil))
  eq({ "acceptEdits", "ask", "auto" }, modes.run_choices("acceptEdits"))
  eq({ "auto", "ask", "acceptEdits" }, modes.run_choices("auto"))
  eq({ "ask", "acceptEdits", "auto" }, modes.run_choices("never"))
  eq("approval: plan · read and plan only: every write, command and MCP tool call is refused", modes.line("plan"))
  eq(nil, modes.line(nil))
  eq("acceptEdits — writes and edits in the folder run without asking; commands and MCP tools ask (now)", modes.item("acceptEdits", "acceptEdits"))
end)

test("a plan mode refusal is told from the other refusals", function()
  truthy(
    plan.refused_by_plan_mode(
      "refused by the session's policy: write a.txt is refused: the session is in plan mode, where only reading"
    ),
    "plan mode"
  )
  truthy(not plan.refused_by_plan_mode("refused: the user did not approve this write (deny)"), "a denial")
  truthy(not plan.refused_by_plan_mode("the plan mode of the parser"), "a result that is no refusal")
end)

test("a proposed rule is offered for the session and the project, by its exact words", function()
  local q = approvals.question({
    sessionId = "s",
    tool = "run_command",
    arguments = { argv = { "pytest", "-k", "a" } },
    summary = "run_command wants to exec pytest -k a",
    proposedRule = { "pytest", "**" },
  }, nil, false)
  local labels, decisions = {}, {}
  for i, c in ipairs(q.choices) do
    labels[i], decisions[i] = c.label, c.decision
  end
  eq({
    "Allow once",
    "Allow always (this session)",
    "Allow always (this project)",
    "Always allow `pytest **` in this session",
    "Always allow `pytest **` for this project",
    "Deny",
  }, labels)
  eq({ "allow", "allowAlways", "allowAlwaysProject", "allowRule", "allowRuleProject", "deny" }, decisions)
  truthy(vim.tbl_contains(q.lines, "> rule offered: `pytest **`"), "the conversation says the rule")
  truthy(q.prompt:find("the rule `pytest **` would allow", 1, true), q.prompt)
  local plain = approvals.question({ tool = "write_file", arguments = { path = "a" } }, nil, false)
  eq(4, #plain.choices, "no rule for a write")
  eq("`npm run 'a b' **`", grants.rule_words({ "npm", "run", "a b", "**" }))
end)

test("a rule grant is listed by its words", function()
  eq(
    "rule `pytest **` · this project",
    grants.grant_label({ kind = "rule", target = '["pytest","**"]', rule = { "pytest", "**" }, scope = "project" })
  )
  eq("exec make · this session", grants.grant_label({ kind = "exec", target = "make", scope = "session" }))
end)

-- A fake daemon's store of one session: turns are played by `play(p, proc, m, t)`.
local function store(play)
  local s = { turns = {}, mode = "ask", modes = {}, approved = {} }
  s.session = {
    sessionId = "s-1",
    root = folder,
    title = "",
    head = vim.NIL,
    createdAt = "2026-01-01T00:00:00Z",
    updatedAt = "2026-01-01T00:00:00Z",
    provider = vim.empty_dict(),
    pinned = {},
  }
  local function policy()
    return { approval = s.mode, sandbox = "workspace-write", network = false, grants = {} }
  end
  local function new_turn(p, prompt)
    local n = #s.turns + 1
    local t = {
      turnId = "t-" .. n,
      runId = "r-" .. n,
      sessionId = "s-1",
      parentTurnId = s.session.head,
      prompt = prompt,
      reply = "",
      outcome = "running",
      tokens = { input = 1, output = 1, total = 2 },
      createdAt = "2026-01-01T00:00:00Z",
      model = "fake",
      cost = vim.NIL,
    }
    s.turns[n] = t
    s.session.head = t.turnId
    return t
  end
  s.methods = {
    ["session/open"] = function()
      return s.session
    end,
    ["session/policy"] = function()
      return policy()
    end,
    ["session/mode"] = function(p)
      s.mode = p.approval
      s.modes[#s.modes + 1] = p.approval
      return policy()
    end,
    ["session/reopen"] = function()
      return vim.tbl_extend("force", s.session, { history = s.turns, integrity = "ok" })
    end,
    ["session/history"] = function()
      return { turns = s.turns }
    end,
    ["run/steps"] = function()
      return { steps = {} }
    end,
    ["session/turn"] = function(p, proc, m)
      play(p, proc, m, new_turn(p, p.prompt))
    end,
    ["session/plan/approve"] = function(p, proc, m)
      s.approved[#s.approved + 1] = p
      s.mode = p.approval or "ask"
      local t = new_turn(p, "Carry out this plan")
      t.followsPlan = { turnId = p.turnId }
      play(p, proc, m, t)
    end,
  }
  function s.finish(proc, m, t, text)
    t.reply, t.outcome = text, "finished"
    proc.notify("session/token", { sessionId = "s-1", turnId = t.turnId, runId = t.runId, step = 1, text = text })
    proc.reply(m.id, { turnId = t.turnId, runId = t.runId, outcome = "finished", reply = text, tokens = t.tokens, steps = 1, model = "fake", cost = vim.NIL })
  end
  function s.plan(proc, t, entries, step)
    t.plan = { step = step, entries = entries }
    proc.notify("session/plan", { sessionId = "s-1", turnId = t.turnId, runId = t.runId, step = step, entries = entries })
  end
  return s
end

local function start(play)
  daemon.stop(200)
  local s = store(play)
  trellis.setup({ cmd = { "trellisd-fake" }, log_file = vim.fn.tempname(), flush_ms = 10 })
  daemon.spawn = Fake.new(s.methods).spawn
  sessions.open, sessions.current = {}, nil
  notes = {}
  return s
end

local function lines()
  local c = trellis.current()
  return c and vim.api.nvim_buf_get_lines(c.buf, 0, -1, false) or {}
end

local function has(line)
  return vim.tbl_contains(lines(), line)
end

local function wait_line(line)
  wait_for(function()
    return has(line)
  end, nil, line .. " in:\n" .. table.concat(lines(), "\n"))
end

local function idle()
  wait_for(function()
    return sessions.current_state() ~= nil and sessions.current_state().running == nil
  end, nil, "the turn to end")
end

local function errors()
  return vim.tbl_filter(function(n)
    return n.level == vim.log.levels.ERROR
  end, notes)
end

test("the plan is drawn live, plan mode's refusal plainly, and the plan runs in a new turn", function()
  local go
  local s
  s = start(function(p, proc, m, t)
    if t.followsPlan then
      s.plan(proc, t, vim.tbl_map(function(e)
        return vim.tbl_extend("force", e, { status = "completed" })
      end, ENTRIES), 1)
      s.finish(proc, m, t, "Done as planned.")
      return
    end
    s.plan(proc, t, { ENTRIES[1], ENTRIES[3] }, 1)
    go = function()
      s.plan(proc, t, ENTRIES, 2)
    proc.notify("session/step", {
      sessionId = "s-1",
      turnId = t.turnId,
      runId = t.runId,
      step = 3,
      decision = "tool",
      toolCall = { id = "c1", name = "write_file", arguments = { path = "a.txt", content = "x" } },
      result = "refused by the session's policy: write a.txt is refused: the session is in plan mode, where only reading, searching and update_plan run.",
    })
      s.finish(proc, m, t, "Here is the plan.")
    end
  end)
  vim.cmd("TrellisPlanMode")
  wait_for(function()
    return #notes > 0
  end, nil, "a word about there being no conversation")
  notes = {}
  vim.cmd("TrellisNew")
  wait_line("approval: ask · reads run; every write, command and MCP tool call asks")
  vim.cmd("TrellisPlanMode")
  wait_line("approval: plan · read and plan only: every write, command and MCP tool call is refused")
  eq({ "plan" }, s.modes)
  vim.cmd("Trellis plan the fix")
  wait_line("## Plan of turn “plan the fix” · 1 of 2 done")
  truthy(has("○ run the tests"), "the first plan's entries")
  go()
  wait_line("## Plan of turn “plan the fix” · 1 of 3 done")
  wait_line("◐ fix the off-by-one (high)")
  idle()
  wait_line("> plan: 1 of 3 done (gR or :TrellisRunPlan runs it)")
  wait_line(plan.REFUSED_LINE)
  eq({}, errors(), "no error for plan mode's refusal")
  eq(1, #vim.tbl_filter(function(l)
    return l:find("^## Plan of turn") ~= nil
  end, lines()), "one plan section")

  -- Run this plan, from the cursor on the planned turn: asked which mode, ask first
  local asked
  vim.ui.select = function(items, opts, on_choice)
    asked = { items = vim.tbl_map(opts.format_item, items), prompt = opts.prompt }
    vim.schedule(function()
      on_choice(items[2], 2)
    end)
  end
  vim.api.nvim_win_set_cursor(0, { vim.fn.index(lines(), "plan the fix") + 1, 0 })
  vim.cmd("normal gR")
  wait_line("> carries out the plan of turn “plan the fix” (approval: acceptEdits)")
  idle()
  eq("Run the plan of turn “plan the fix” under which approval mode?", asked.prompt)
  truthy(asked.items[1]:find("^ask — "), "ask first: " .. asked.items[1])
  eq({ sessionId = "s-1", turnId = "t-1", approval = "acceptEdits" }, s.approved[1])
  wait_line("Done as planned.")
  wait_line("## Plan of turn “plan the fix”, carried out · 3 of 3 done")
  wait_line("approval: acceptEdits · writes and edits in the folder run without asking; commands and MCP tools ask")
  eq({ "plan" }, s.modes, "the mode is set by session/plan/approve, not session/mode")

  -- reopened: the newest plan in the header, each planned turn marked, the follower named
  local c = trellis.current()
  vim.api.nvim_buf_delete(c.buf, { force = true })
  sessions.open, sessions.current = {}, nil
  require("trellisd.opening").reopen("s-1", sessions.show)
  wait_line("> carries out the plan of turn “plan the fix”")
  wait_line("## Plan of turn “plan the fix”, carried out · 3 of 3 done")
  eq(2, #vim.tbl_filter(plan.is_mark, lines()), "both planned turns marked")
  wait_line("approval: acceptEdits · writes and edits in the folder run without asking; commands and MCP tools ask")
  -- gR on the first turn runs its plan, not the newest
  local view = sessions.current_state().view
  eq("t-1", view:planned_at(vim.fn.index(lines(), "plan the fix") + 1))
  eq("t-2", view:planned_at(#lines()))
  eq(nil, view:planned_at(1), "the header is no turn")
  daemon.stop(500)
end)

test("the toggle goes back to the mode plan mode was switched on from", function()
  local s = start(function() end)
  s.mode = "acceptEdits"
  vim.cmd("TrellisNew")
  wait_line("approval: acceptEdits · writes and edits in the folder run without asking; commands and MCP tools ask")
  vim.cmd("TrellisPlanMode")
  wait_for(function()
    return s.mode == "plan"
  end, nil, "plan mode")
  vim.cmd("TrellisPlanMode")
  wait_for(function()
    return s.mode == "acceptEdits"
  end, nil, "back to acceptEdits")
  eq({ "plan", "acceptEdits" }, s.modes)
  vim.ui.select = function(items, opts, on_choice)
    eq(modes.ALL, items)
    eq("never — read-only: every write, command and MCP tool call is refused", opts.format_item("never"))
    vim.schedule(function()
      on_choice("never", 6)
    end)
  end
  vim.cmd("TrellisMode")
  wait_for(function()
    return s.mode == "never"
  end, nil, "the mode picked")
  vim.cmd("TrellisMode auto")
  wait_for(function()
    return s.mode == "auto"
  end, nil, "the mode named")
  vim.cmd("TrellisMode sometimes")
  truthy(notes[#notes].message:find("no approval mode “sometimes”", 1, true), notes[#notes].message)
  vim.cmd("TrellisRunPlan")
  truthy(notes[#notes].message:find("no turn of this conversation made a plan", 1, true), notes[#notes].message)
  daemon.stop(500)
end)
