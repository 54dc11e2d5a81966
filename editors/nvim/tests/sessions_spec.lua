-- The user's actions against a fake daemon that speaks the whole protocol, the methods
-- for steering, cancelling and approval included.
local daemon = require("trellisd.daemon")
local sessions = require("trellisd.sessions")
local trellis = require("trellisd")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")

local folder = vim.fn.tempname()
vim.fn.mkdir(folder, "p")
vim.cmd("cd " .. vim.fn.fnameescape(folder))
local root = (vim.uv or vim.loop).fs_realpath(folder)

local notes = {}
vim.notify = function(message, level)
  notes[#notes + 1] = { message = message, level = level }
end

-- An in-memory store behind the fake daemon. `turn` plays a turn: turn(p, proc, m, t)
-- where t is the new turn; it answers with proc.reply(m.id, result) when done.
local function store(turn)
  local s = { sessions = {}, turns = {}, n = 0 }
  local function id(prefix)
    s.n = s.n + 1
    return prefix .. "-" .. s.n
  end
  local function path(sid)
    local out, cursor = {}, s.sessions[sid].head
    while cursor ~= vim.NIL and cursor ~= nil do
      table.insert(out, 1, s.turns[cursor])
      cursor = s.turns[cursor].parentTurnId
    end
    return out
  end
  -- Copies of a path of turns, under new ids, become the session's path.
  local function copy_path(turns, session)
    for _, t in ipairs(turns) do
      local copy = vim.tbl_extend("force", t, { turnId = id("t"), sessionId = session.sessionId })
      copy.n, copy.parentTurnId = s.n, session.head
      s.turns[copy.turnId] = copy
      session.head = copy.turnId
    end
  end
  s.methods = {
    ["session/open"] = function(p)
      local sid = id("s")
      s.sessions[sid] = {
        sessionId = sid,
        root = p.root,
        title = p.title or "",
        head = vim.NIL,
        createdAt = "2026-01-01T00:00:00Z",
        updatedAt = "2026-01-01T00:00:00Z",
        provider = vim.empty_dict(),
      }
      return s.sessions[sid]
    end,
    ["session/reopen"] = function(p)
      return vim.tbl_extend("force", s.sessions[p.sessionId], { history = path(p.sessionId) })
    end,
    ["session/history"] = function(p)
      return { turns = path(p.sessionId) }
    end,
    ["session/turns"] = function(p)
      local out = {}
      for _, t in pairs(s.turns) do
        if t.sessionId == p.sessionId then
          out[#out + 1] = t
        end
      end
      table.sort(out, function(a, b)
        return a.n < b.n
      end)
      return { turns = out }
    end,
    ["session/branch"] = function(p)
      s.sessions[p.sessionId].head = p.turnId
      return s.sessions[p.sessionId]
    end,
    ["session/list"] = function(p)
      local out = {}
      for _, x in pairs(s.sessions) do
        local hit = vim.tbl_extend("force", x, { turns = #path(x.sessionId) })
        if p.query then
          hit.match = nil
          for _, t in ipairs(path(x.sessionId)) do
            if t.reply:find(p.query, 1, true) then
              hit.match = { turnId = t.turnId, snippet = "…" .. t.reply .. "…" }
            end
          end
        end
        if not p.query or hit.match then
          out[#out + 1] = hit
        end
      end
      table.sort(out, function(a, b)
        return a.sessionId < b.sessionId
      end)
      return { sessions = out }
    end,
    ["session/fork"] = function(p)
      local origin = s.sessions[p.sessionId]
      local fork = s.methods["session/open"]({ root = origin.root, title = origin.title })
      fork.forkedFrom = { sessionId = p.sessionId, turnId = p.turnId }
      local cursor, chain = p.turnId, {}
      while cursor ~= vim.NIL and cursor ~= nil do
        table.insert(chain, 1, s.turns[cursor])
        cursor = s.turns[cursor].parentTurnId
      end
      copy_path(chain, fork)
      return fork
    end,
    ["session/rename"] = function(p)
      s.sessions[p.sessionId].title = p.title
      return s.sessions[p.sessionId]
    end,
    ["session/delete"] = function(p)
      s.sessions[p.sessionId] = nil
      for tid, t in pairs(s.turns) do
        if t.sessionId == p.sessionId then
          s.turns[tid] = nil
        end
      end
      return vim.NIL
    end,
    ["session/export"] = function(p)
      local body = vim.fn.json_encode({ session = s.sessions[p.sessionId], turns = path(p.sessionId) })
      vim.fn.writefile({ body }, p.path)
      return { path = p.path, bytes = #body + 1, turns = #path(p.sessionId) }
    end,
    ["session/import"] = function(p)
      local file = vim.fn.json_decode(table.concat(vim.fn.readfile(p.path), "\n"))
      local old = file.session
      if s.sessions[old.sessionId] and not p.asNew then
        return nil,
          {
            code = -32020,
            message = "session " .. old.sessionId .. " is already in the store",
            data = { sessionId = old.sessionId },
          }
      end
      local new = s.methods["session/open"]({ root = old.root, title = old.title })
      new.importedFrom = { sessionId = old.sessionId, importedAt = "2026-01-02T00:00:00Z" }
      copy_path(file.turns, new)
      return new
    end,
    ["session/turn"] = function(p, proc, m)
      local session = s.sessions[p.sessionId]
      local t = {
        n = s.n,
        turnId = id("t"),
        runId = id("r"),
        sessionId = p.sessionId,
        parentTurnId = session.head,
        prompt = p.prompt,
        reply = "",
        outcome = "running",
        tokens = { input = 1, output = 1, total = 2, cached = vim.NIL },
        createdAt = "2026-01-01T00:00:00Z",
      }
      s.turns[t.turnId] = t
      session.head = t.turnId
      if session.title == "" then
        session.title = p.prompt
      end
      s.running = { t = t, m = m, proc = proc }
      turn(p, proc, m, t)
    end,
  }
  -- For a turn: stream text, then finish.
  function s.token(proc, t, text, step)
    t.reply = t.reply .. text
    proc.notify(
      "session/token",
      { sessionId = t.sessionId, turnId = t.turnId, runId = t.runId, step = step or 1, text = text }
    )
  end
  function s.finish(proc, m, t, outcome, extra)
    t.outcome = outcome or "finished"
    s.running = nil
    proc.reply(
      m.id,
      vim.tbl_extend("force", {
        turnId = t.turnId,
        runId = t.runId,
        outcome = t.outcome,
        reply = t.reply,
        tokens = t.tokens,
        steps = 1,
        cost = 0.0005,
      }, extra or {})
    )
  end
  return s
end

local function start(turn, extra_methods)
  daemon.stop(200) -- a test that failed may have left its daemon
  local s = store(turn)
  for k, v in pairs(extra_methods or {}) do
    s.methods[k] = v
  end
  trellis.setup({ cmd = { "trellisd-fake" }, log_file = vim.fn.tempname(), flush_ms = 10 })
  local fake = Fake.new(s.methods)
  daemon.spawn = fake.spawn
  sessions.open, sessions.current = {}, nil
  notes = {}
  return s, fake
end

local function finish_test()
  daemon.stop(500)
end

local function lines()
  local c = trellis.current()
  return vim.api.nvim_buf_get_lines(c.buf, 0, -1, false)
end

local function text()
  return table.concat(lines(), "\n")
end

local function wait_text(pattern, what)
  local ok = vim.wait(SAFETY_MS, function()
    return trellis.current() and text():find(pattern, 1, true) ~= nil
  end, 5)
  if not ok then
    error(
      ("timed out waiting for %s in:\n%s"):format(
        what or pattern,
        trellis.current() and text() or "(no conversation)"
      ),
      2
    )
  end
end

local function idle()
  wait_for(function()
    local c = trellis.current()
    return c and not c.running
  end, nil, "the turn to end")
end

test("a prompt opens a conversation over the folder and streams the reply into it", function()
  local s
  s = start(function(_, proc, m, t)
    local words = { "Hello ", "from ", "the ", "fake.\n", "Bye." }
    local i = 0
    local timer = (vim.uv or vim.loop).new_timer()
    timer:start(
      5,
      5,
      vim.schedule_wrap(function()
        i = i + 1
        if i <= #words then
          s.token(proc, t, words[i])
        elseif not timer:is_closing() then
          timer:close()
          s.finish(proc, m, t)
        end
      end)
    )
  end)
  vim.cmd("Trellis say hello")
  wait_for(function()
    return trellis.statusline():find("streaming") ~= nil
  end, nil, "the statusline to say streaming")
  idle()
  eq({
    "# say hello",
    root:gsub("^" .. vim.pesc(vim.env.HOME or "~") .. "/", "~/") .. " · s-1",
    "",
    "### You",
    "say hello",
    "",
    "### trellisd",
    "",
    "Hello from the fake.",
    "Bye.",
    "",
    "*finished · 2 tokens (in 1, out 1) · $0.0005*",
  }, lines())
  eq("trellis: idle", trellis.statusline())
  eq("trellis://s-1", vim.api.nvim_buf_get_name(0), "the conversation is shown")
  eq(root, trellis.current().root)
  finish_test()
end)

test("an approval is asked with vim.ui.select and answered with the choice", function()
  local asked, decision
  local s
  s = start(function(p, proc, m, t)
    proc.request("session/requestApproval", {
      sessionId = p.sessionId,
      turnId = t.turnId,
      runId = t.runId,
      tool = "write_file",
      arguments = { path = "notes.txt", content = "hi" },
      summary = "write 2 bytes to notes.txt",
    }, function(answer)
      decision = answer.result.decision
      s.finish(proc, m, t)
    end)
  end)
  vim.ui.select = function(items, opts, on_choice)
    asked = { items = items, prompt = opts.prompt }
    vim.defer_fn(function()
      on_choice(items[2], 2)
    end, 50)
  end
  vim.cmd("Trellis write a note")
  wait_for(function()
    return asked
  end, nil, "the approval question")
  eq({
    "Allow once",
    "Allow always (this session)",
    "Allow always (this project)",
    "Deny",
  }, asked.items)
  eq(
    "trellisd asks to run write_file path: notes.txt, content: hi (write 2 bytes to notes.txt)",
    asked.prompt
  )
  truthy(asked.prompt:find("write 2 bytes to notes.txt", 1, true), asked.prompt)
  eq("trellis: approval needed", trellis.statusline())
  idle()
  eq("allowAlways", decision)
  wait_text("> allowed always for this session")
  wait_text("> write 2 bytes to notes.txt")
  finish_test()
end)

test("an approval for a write shows its diff with the diff filetype until it is answered", function()
  local shown, decision
  local s
  s = start(function(p, proc, m, t)
    proc.request("session/requestApproval", {
      sessionId = p.sessionId,
      turnId = t.turnId,
      runId = t.runId,
      tool = "edit_file",
      arguments = { path = "a.txt", old = "one", new = "two" },
      summary = "edit_file wants to write a.txt",
      diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n",
    }, function(answer)
      decision = answer.result.decision
      s.finish(proc, m, t)
    end)
  end)
  local function diff_windows()
    local found = {}
    for _, win in ipairs(vim.api.nvim_list_wins()) do
      local buf = vim.api.nvim_win_get_buf(win)
      if vim.bo[buf].filetype == "diff" then
        table.insert(found, vim.api.nvim_buf_get_lines(buf, 0, -1, false))
      end
    end
    return found
  end
  vim.ui.select = function(items, _, on_choice)
    shown = diff_windows()
    vim.defer_fn(function()
      on_choice(items[1], 1)
    end, 50)
  end
  vim.cmd("Trellis change a")
  wait_for(function()
    return shown
  end, nil, "the approval question")
  eq({ { "--- a/a.txt", "+++ b/a.txt", "@@ -1 +1 @@", "-one", "+two" } }, shown)
  idle()
  eq("allow", decision)
  eq({}, diff_windows())
  finish_test()
end)

test("a dismissed approval question denies", function()
  local decision
  local s
  s = start(function(p, proc, m, t)
    proc.request("session/requestApproval", {
      sessionId = p.sessionId,
      turnId = t.turnId,
      runId = t.runId,
      tool = "run_command",
      arguments = { command = "rm -rf build" },
      summary = "run rm -rf build",
    }, function(answer)
      decision = answer.result.decision
      s.finish(proc, m, t)
    end)
  end)
  vim.ui.select = function(_, _, on_choice)
    on_choice(nil, nil)
  end
  vim.cmd("Trellis clean")
  idle()
  eq("deny", decision)
  wait_text("> denied")
  finish_test()
end)

test("steers: queued in the statusline, shown when delivered or returned", function()
  local s
  s = start(function(_, proc, m, t)
    s.token(proc, t, "Working")
  end, {
    ["session/steer"] = function(p, proc)
      local t = s.running.t
      vim.defer_fn(function()
        proc.notify("session/steered", {
          sessionId = p.sessionId,
          turnId = t.turnId,
          runId = t.runId,
          step = 2,
          text = p.text,
          clientMsgId = p.clientMsgId,
          delivered = p.text ~= "too late",
        })
        if p.text == "too late" then
          s.finish(s.running.proc, s.running.m, t)
        end
      end, 100)
      return { turnId = t.turnId, runId = t.runId, queued = true }
    end,
  })
  vim.cmd("Trellis go")
  wait_text("Working")
  vim.cmd("TrellisSteer use the left door")
  wait_for(function()
    return trellis.statusline():find("1 steer queued", 1, true)
  end, nil, "the statusline to count the steer")
  wait_text("> steer (step 2): use the left door")
  eq("trellis: streaming 1 tok", trellis.statusline())
  vim.cmd("TrellisSteer too late")
  wait_text("> steer not delivered, the turn ended first: too late")
  idle()
  truthy(notes[#notes].message:find("not delivered"), vim.inspect(notes))
  finish_test()
end)

test("cancel uses session/cancel, or $/cancelRequest on a daemon without it", function()
  local s, fake
  s, fake = start(function(_, proc, _, t)
    s.token(proc, t, "Thinking")
  end)
  vim.cmd("Trellis a long task")
  wait_text("Thinking")
  vim.cmd("TrellisCancel")
  wait_for(function()
    return #fake.sent("$/cancelRequest") == 1
  end, nil, "$/cancelRequest")
  local turn_request = fake.sent("session/turn")[1]
  eq(turn_request.id, fake.sent("$/cancelRequest")[1].params.id)
  s.running.proc.reply(s.running.m.id, nil, { code = -32800, message = "Request cancelled" })
  idle()
  wait_text("*cancelled*")
  finish_test()

  local cancelled
  s, fake = start(function(_, proc, _, t)
    s.token(proc, t, "Thinking")
  end, {
    ["session/cancel"] = function()
      cancelled = true
      s.finish(s.running.proc, s.running.m, s.running.t, "cancelled")
      return { cancelled = true }
    end,
  })
  vim.cmd("Trellis another long task")
  wait_text("Thinking")
  vim.cmd("TrellisCancel")
  idle()
  eq(true, cancelled)
  eq(0, #fake.sent("$/cancelRequest"))
  wait_text("*cancelled · 2 tokens")
  finish_test()
end)

test("a daemon that dies mid-turn: interrupted, then restarted and the session reopened", function()
  local s, fake
  s, fake = start(function(p, proc, m, t)
    if p.prompt == "crash" then
      s.token(proc, t, "partial")
      vim.defer_fn(function()
        t.outcome = "interrupted"
        proc.stderr("Segmentation fault\n")
        proc.exit(139)
      end, 30)
    else
      s.token(proc, t, "fine")
      s.finish(proc, m, t)
    end
  end)
  vim.cmd("Trellis crash")
  wait_text("*interrupted: the trellisd daemon exited (code 139)*")
  truthy(
    notes[1].message:find("exited with code 139: Segmentation fault", 1, true),
    vim.inspect(notes)
  )
  vim.cmd("Trellis again")
  wait_text("### You\nagain")
  idle()
  eq(2, #fake.procs)
  local order = {}
  for _, m in ipairs(fake.received) do
    if m.method == "session/reopen" or m.method == "session/turn" then
      order[#order + 1] = m.method
    end
  end
  eq({ "session/turn", "session/reopen", "session/turn" }, order)
  wait_text("### You\nagain")
  finish_test()
end)

test("a failed turn is said in the footer and in a notification", function()
  local s
  s = start(function(_, proc, m, t)
    s.finish(
      proc,
      m,
      t,
      "error",
      { error = "401 Unauthorized: the API key was refused", cost = vim.NIL }
    )
  end)
  vim.cmd("Trellis hi")
  idle()
  wait_text("*error: 401 Unauthorized: the API key was refused · 2 tokens (in 1, out 1)*")
  eq("trellis: the turn failed: 401 Unauthorized: the API key was refused", notes[#notes].message)
  eq(vim.log.levels.ERROR, notes[#notes].level)
  finish_test()
end)

test("branch: the picker shows the tree, the buffer then shows the new path", function()
  local s
  s = start(function(p, proc, m, t)
    s.token(proc, t, "re: " .. p.prompt)
    s.finish(proc, m, t)
  end)
  for _, prompt in ipairs({ "one", "two", "three" }) do
    vim.cmd("Trellis " .. prompt)
    idle()
  end
  local shown
  vim.ui.select = function(items, opts, on_choice)
    if opts.kind == "trellisd.restore" then
      on_choice(items[2], 2) -- leave the files as they are
      return
    end
    shown = vim.tbl_map(opts.format_item, items)
    on_choice(items[2], 2)
  end
  vim.cmd("TrellisBranch")
  wait_for(function()
    return not text():find("three", 1, true)
  end, nil, "the new path")
  eq({ "◇ (start: an empty conversation)", "● one", "● two", "● three  ← head" }, shown)
  wait_text("re: one")
  vim.cmd("Trellis four")
  idle()
  vim.cmd("TrellisTree")
  wait_for(function()
    return vim.api.nvim_buf_get_name(0):find("/tree$")
  end, nil, "the tree buffer")
  eq({
    "◇ (start: an empty conversation)",
    "● one",
    "├─ ● four  ← head",
    "└─ ○ two",
    "   ○ three",
  }, vim.api.nvim_buf_get_lines(0, 4, -1, false))
  finish_test()
end)

test("branch asks whether to restore files, and to overwrite the ones a person changed", function()
  local s
  s = start(function(p, proc, m, t)
    s.token(proc, t, "re: " .. p.prompt)
    s.finish(proc, m, t)
  end)
  local sent = {}
  local branch = s.methods["session/branch"]
  s.methods["session/branch"] = function(p, proc, m)
    table.insert(sent, { restoreFiles = p.restoreFiles, force = p.force })
    if p.restoreFiles and not p.force then
      return nil,
        {
          code = -32020,
          message = "1 file(s) changed since the agent last wrote them: a.txt",
          data = { paths = { "a.txt" } },
        }
    end
    local session = branch(p, proc, m)
    return vim.tbl_extend("force", session, { files = { restored = { "a.txt" }, skipped = {} } })
  end
  for _, prompt in ipairs({ "one", "two" }) do
    vim.cmd("Trellis " .. prompt)
    idle()
  end
  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    if opts.kind == "trellisd.restore" then
      table.insert(asked, opts.prompt)
      on_choice(items[1], 1) -- restore; then overwrite
      return
    end
    on_choice(items[2], 2)
  end
  vim.cmd("TrellisBranch")
  wait_for(function()
    return not text():find("re: two", 1, true)
  end, nil, "the new path")
  eq({
    "branch: restore the files the turns changed?",
    "changed since the agent wrote them: a.txt",
  }, asked)
  eq({ { restoreFiles = true, force = false }, { restoreFiles = true, force = true } }, sent)
  finish_test()
end)

test(":TrellisChanges shows the last turn's diffs; R reverts it, overwriting when told", function()
  local s
  s = start(function(p, proc, m, t)
    s.token(proc, t, "re: " .. p.prompt)
    s.finish(proc, m, t)
  end)
  local reverted = {}
  s.methods["turn/changes"] = function(p)
    eq(s.sessions[next(s.sessions)].head, p.turnId, "the last turn's changes")
    return {
      files = {
        { path = "a.txt", status = "modified", diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n" },
        { path = "i.png", status = "added", diff = "", binary = true },
      },
    }
  end
  s.methods["turn/revert"] = function(p)
    table.insert(reverted, p.force)
    if not p.force then
      return nil, { code = -32020, message = "conflict", data = { paths = { "a.txt" } } }
    end
    return { turnId = p.turnId, restored = { "a.txt" }, skipped = {} }
  end
  vim.cmd("Trellis change a")
  idle()
  vim.cmd("TrellisChanges")
  wait_for(function()
    return vim.api.nvim_buf_get_name(0):find("/changes$")
  end, nil, "the changes buffer")
  eq("diff", vim.bo.filetype)
  eq({
    "--- a/a.txt",
    "+++ b/a.txt",
    "@@ -1 +1 @@",
    "-a",
    "+b",
    "# i.png added (binary)",
  }, vim.api.nvim_buf_get_lines(0, 0, -1, false))
  local asked
  vim.ui.select = function(items, opts, on_choice)
    asked = opts.prompt
    on_choice(items[1], 1)
  end
  vim.api.nvim_feedkeys("R", "x", false)
  wait_for(function()
    return #reverted == 2
  end, nil, "the forced revert")
  eq("changed since the agent wrote them: a.txt", asked)
  eq({ false, true }, reverted)
  finish_test()
end)

test("a session another daemon writes can be taken over, and the prompt goes through", function()
  local s, fake
  local held = true
  s, fake = start(function(_, proc, m, t)
    s.token(proc, t, "after the takeover")
    s.finish(proc, m, t)
  end, {
    ["session/takeover"] = function(p)
      held = false
      return s.sessions[p.sessionId]
    end,
  })
  local turn = s.methods["session/turn"]
  s.methods["session/turn"] = function(p, proc, m)
    if held then
      return nil,
        {
          code = -32030,
          message = "session " .. p.sessionId .. " is written by another trellisd (pid 777)",
          data = { sessionId = p.sessionId, ownerPid = 777 },
        }
    end
    return turn(p, proc, m)
  end
  local asked
  vim.ui.select = function(items, opts, on_choice)
    asked = opts.prompt
    on_choice(items[1], 1)
  end
  vim.cmd("Trellis hello")
  wait_text("after the takeover")
  idle()
  eq("another trellisd (pid 777) is writing this session. Take it over?", asked)
  truthy(
    text():find("*not sent: session s-1 is written by another trellisd (pid 777)*", 1, true),
    text()
  )
  eq(1, #fake.sent("session/takeover"))
  eq(2, #fake.sent("session/turn"))
  finish_test()
end)

test("an interrupted last turn is announced on reopen and :TrellisResume continues it", function()
  local s, fake
  s, fake = start(function(_, proc, m, t)
    s.finish(proc, m, t)
  end, {
    ["session/resume"] = function(p, proc, m)
      local t = s.turns[p.turnId]
      s.token(proc, t, " and the rest")
      t.outcome = "finished"
      proc.reply(m.id, {
        turnId = t.turnId,
        runId = t.runId,
        outcome = "finished",
        reply = t.reply,
        tokens = t.tokens,
        steps = 2,
      })
    end,
  })
  vim.cmd("Trellis long job")
  idle()
  local only = s.sessions["s-1"].head
  s.turns[only].outcome = "interrupted"
  s.turns[only].reply = "half"
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1], 1)
  end
  vim.cmd("TrellisSessions")
  wait_for(function()
    for _, n in ipairs(notes) do
      if n.message:find(":TrellisResume continues it", 1, true) then
        return true
      end
    end
  end, nil, "the notification about the interrupted turn")
  vim.cmd("TrellisResume")
  wait_text("### trellisd (resumed)\n\n and the rest\n\n*finished · 2 tokens")
  eq(only, fake.sent("session/resume")[1].params.turnId)
  finish_test()
end)

test("two prompts before the daemon is up: one session, the second queued behind the first", function()
  local s, fake
  local turns = {}
  s, fake = start(function(p, proc, m, t)
    turns[#turns + 1] = { p = p, proc = proc, m = m, t = t }
  end)
  vim.cmd("silent! only!")
  vim.cmd("enew")
  vim.cmd("Trellis first")
  vim.cmd("Trellis second")
  wait_for(function()
    return #turns >= 2
  end, nil, "both turns asked for")
  eq(1, #fake.sent("session/open"), "one session is opened")
  eq(vim.NIL, turns[1].p.queue or vim.NIL, "the first prompt is not queued")
  eq(true, turns[2].p.queue, "the second prompt is queued in the daemon")
  eq(turns[1].p.sessionId, turns[2].p.sessionId)
  local ref = { sessionId = turns[2].p.sessionId, queueId = "q-1" }
  turns[1].proc.notify(
    "session/queued",
    vim.tbl_extend("force", ref, { position = 1, prompt = "second", queuedAt = "2026-01-01T00:00:00Z" })
  )
  wait_for(function()
    return trellis.statusline():find("1 prompt queued", 1, true) ~= nil
  end, nil, "the statusline to count the queued prompt")
  s.token(turns[1].proc, turns[1].t, "one")
  s.finish(turns[1].proc, turns[1].m, turns[1].t)
  turns[1].proc.notify("session/dequeued", vim.tbl_extend("force", ref, { reason = "started" }))
  wait_text("### You\nsecond")
  s.token(turns[2].proc, turns[2].t, "two")
  s.finish(turns[2].proc, turns[2].m, turns[2].t)
  wait_text("two\n\n*finished")
  idle()
  local shown = 0
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win)):match("^trellis://") then
      shown = shown + 1
    end
  end
  eq(1, shown, "one window shows the conversation")
  finish_test()
end)

test("a buffer of a file a step wrote is checked against the disk", function()
  local file = root .. "/notes.txt"
  vim.fn.writefile({ "old" }, file)
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local s
  s = start(function(p, proc, m, t)
    vim.fn.writefile({ "new" }, file)
    proc.notify("session/step", {
      sessionId = p.sessionId,
      turnId = t.turnId,
      runId = t.runId,
      step = 1,
      decision = "tool",
      prompt = p.prompt,
      text = "",
      toolCall = { id = "c1", name = "write_file", arguments = { path = "notes.txt" } },
      result = "wrote notes.txt",
      tokens = t.tokens,
    })
    s.finish(proc, m, t)
  end)
  vim.cmd("Trellis rewrite the notes")
  idle()
  wait_for(function()
    return vim.api.nvim_buf_get_lines(buf, 0, -1, false)[1] == "new"
  end, nil, "the buffer to show what the step wrote")
  finish_test()
end)

-- A turn another window started, running in the shared daemon: a session with that turn at
-- its head, and the reopen answer the daemon gives while it runs.
local function running_elsewhere(s, text_so_far)
  local session = s.methods["session/open"]({ root = root, title = "shared" })
  local t = {
    n = 0,
    turnId = "t-elsewhere",
    runId = "r-elsewhere",
    sessionId = session.sessionId,
    parentTurnId = vim.NIL,
    prompt = "count for me",
    reply = "",
    outcome = "running",
    tokens = { input = 1, output = 1, total = 2, cached = vim.NIL },
    createdAt = "2026-01-01T00:00:00Z",
  }
  s.turns[t.turnId] = t
  session.head = t.turnId
  local reopen = s.methods["session/reopen"]
  s.methods["session/reopen"] = function(p)
    local result = reopen(p)
    if t.outcome == "running" then
      result.running = {
        sessionId = t.sessionId,
        turnId = t.turnId,
        runId = t.runId,
        step = 1,
        text = text_so_far,
      }
    end
    return result
  end
  vim.ui.select = function(items, _, on_choice)
    on_choice(items[1], 1)
  end
  return t
end

local function step(proc, t, decision, text)
  proc.notify("session/step", {
    sessionId = t.sessionId,
    turnId = t.turnId,
    runId = t.runId,
    step = 1,
    decision = decision,
    prompt = t.prompt,
    text = text,
    toolCall = vim.NIL,
    result = vim.NIL,
    tokens = t.tokens,
  })
end

-- The daemon tells every window following the session that the turn ended.
local function ended(proc, t)
  proc.notify("session/turnEnded", {
    sessionId = t.sessionId,
    turnId = t.turnId,
    runId = t.runId,
    outcome = t.outcome,
    reply = t.reply,
    tokens = t.tokens,
    cost = vim.NIL,
    recovery = t.recovery,
  })
end

test("a turn running in another window is drawn on reopen and followed to its end", function()
  local s, fake = start(function() end)
  local t = running_elsewhere(s, "one two ")
  vim.cmd("TrellisSessions")
  wait_text("### You\ncount for me\n\n### trellisd\n\none two ")
  eq(true, trellis.current().running, "the turn shows as running")
  truthy(not text():find("*running", 1, true), text())
  s.token(fake.proc, t, "three")
  wait_text("one two three")
  -- a token of another turn is not this one's
  local other = { sessionId = t.sessionId, turnId = "t-other", runId = "r-other", reply = "" }
  s.token(fake.proc, other, "NOT THIS")
  t.reply, t.outcome = "one two three", "finished"
  step(fake.proc, t, "reply", "one two three")
  eq(true, trellis.current().running, "a reply step alone does not end it")
  ended(fake.proc, t)
  idle()
  wait_text("one two three\n\n*finished · 2 tokens (in 1, out 1)*")
  truthy(not text():find("NOT THIS", 1, true), text())
  eq("trellis: idle", trellis.statusline())
  finish_test()
end)

test("a followed turn is steered and cancelled with the usual commands", function()
  local s, fake
  local t
  s, fake = start(function() end, {
    ["session/steer"] = function(p, proc)
      proc.notify("session/steered", {
        sessionId = p.sessionId,
        turnId = t.turnId,
        runId = t.runId,
        step = 2,
        text = p.text,
        clientMsgId = p.clientMsgId,
        delivered = true,
      })
      return { turnId = t.turnId, runId = t.runId, queued = true }
    end,
    ["session/cancel"] = function(_, proc)
      t.outcome = "cancelled"
      step(proc, t, "cancelled", "so far")
      return { cancelled = true }
    end,
  })
  t = running_elsewhere(s, "so far")
  vim.cmd("TrellisSessions")
  wait_text("so far")
  vim.cmd("TrellisSteer faster please")
  wait_text("> steer (step 2): faster please")
  vim.cmd("TrellisCancel")
  wait_text("*cancelled · 2 tokens")
  idle()
  eq(1, #fake.sent("session/cancel"))
  eq(0, #fake.sent("$/cancelRequest"), "the turn's request is another window's")
  finish_test()
end)

test("a reopen between two steps does not draw the committed step twice", function()
  local s = start(function() end)
  local t = running_elsewhere(s, "Step one.")
  t.reply = "Step one."
  vim.cmd("TrellisSessions")
  wait_text("### trellisd\n\nStep one.")
  local view = sessions.current_state().view
  eq({}, view.pending, "nothing more is to be painted")
  local _, count = text():gsub("Step one%.", "")
  eq(1, count, text())
  finish_test()
end)

test("an approval answered in another window closes the question here", function()
  local s, fake
  local answered = false
  s, fake = start(function(p, proc, _, t)
    proc.request("session/requestApproval", {
      sessionId = p.sessionId,
      turnId = t.turnId,
      runId = t.runId,
      tool = "write_file",
      arguments = { path = "notes.txt", content = "hi" },
      summary = "write 2 bytes to notes.txt",
    }, function()
      answered = true
    end)
  end)
  -- a picker in a floating window, as telescope or dressing open one; never answered here
  local picker
  vim.ui.select = function(_, _, on_choice)
    local buf = vim.api.nvim_create_buf(false, true)
    picker = vim.api.nvim_open_win(buf, true, {
      relative = "editor",
      row = 1,
      col = 1,
      width = 30,
      height = 3,
    })
    _G.picker_choice = on_choice
  end
  vim.cmd("Trellis write a note")
  wait_for(function()
    return picker ~= nil
  end, nil, "the approval question")
  eq(picker, vim.api.nvim_get_current_win())
  fake.proc.notify("$/cancelRequest", { id = 1 })
  wait_for(function()
    return not vim.api.nvim_win_is_valid(picker)
  end, nil, "the picker to close")
  wait_text("> approval withdrawn: answered in another window")
  eq("trellis: streaming 0 tok", trellis.statusline())
  _G.picker_choice(nil, nil) -- a picker that reports its closing: no answer goes out
  eq(false, answered, "a withdrawn question is not answered")
  eq(0, #vim.tbl_filter(function(m)
    return m.method == nil and m.id == 1
  end, fake.received), "no answer was sent")
  s.finish(s.running.proc, s.running.m, s.running.t)
  idle()
  finish_test()
end)

test("a turn another window starts in a session open here is drawn and followed", function()
  local s, fake = start(function() end)
  local t = running_elsewhere(s, "")
  t.outcome = "finished" -- the session is open here before the other window's turn
  vim.cmd("TrellisSessions")
  wait_text("*finished")
  local other = vim.tbl_extend("force", {}, t)
  other.turnId, other.runId, other.parentTurnId = "t-next", "r-next", t.turnId
  other.prompt, other.outcome = "and now?", "running"
  s.turns[other.turnId] = other
  s.sessions[t.sessionId].head = other.turnId
  t = other
  -- the first pieces came before this window reopened the session: they are in its answer
  local reopen = s.methods["session/reopen"]
  s.methods["session/reopen"] = function(p)
    return vim.tbl_extend("force", reopen(p), {
      running = { sessionId = t.sessionId, turnId = t.turnId, runId = t.runId, step = 1, text = "Now " },
    })
  end
  s.token(fake.proc, t, "Now ")
  t.reply = "" -- no step is committed yet: the text so far is in the reopen's answer only
  wait_text("### You\nand now?\n\n### trellisd\n\nNow ")
  eq(true, trellis.current().running)
  s.token(fake.proc, t, "then.")
  t.reply, t.outcome = "Now then.", "finished"
  step(fake.proc, t, "reply", "Now then.")
  ended(fake.proc, t)
  idle()
  wait_text("Now then.\n\n*finished · 2 tokens")
  local _, count = text():gsub("Now ", "")
  eq(1, count, text())
  finish_test()
end)

-- The session's life: fork, rename, delete, export and import, search.

local function echo_store()
  local s, fake
  s, fake = start(function(p, proc, m, t)
    s.token(proc, t, "re: " .. p.prompt)
    s.finish(proc, m, t)
  end)
  return s, fake
end

local function answer_select(...)
  local picks = { ... }
  local asked = {}
  vim.ui.select = function(items, opts, on_choice)
    local shown = vim.tbl_map(opts.format_item or tostring, items)
    asked[#asked + 1] = { prompt = opts.prompt, items = shown }
    local want = table.remove(picks, 1)
    for i, item in ipairs(shown) do
      if want and item:find(want, 1, true) then
        return on_choice(items[i], i)
      end
    end
    on_choice(nil, nil)
  end
  return asked
end

test("fork: a new session from the picked turn, in its own buffer, saying where it came from", function()
  local s, fake = echo_store()
  for _, prompt in ipairs({ "one", "two", "three" }) do
    vim.cmd("Trellis " .. prompt)
    idle()
  end
  local origin = trellis.current()
  local asked = answer_select("● two")
  vim.cmd("TrellisFork")
  wait_for(function()
    return trellis.current().sessionId ~= origin.sessionId
  end, nil, "the fork to open: " .. vim.inspect(notes))
  local fork = trellis.current()
  eq("trellis://" .. fork.sessionId, vim.api.nvim_buf_get_name(fork.buf))
  eq(vim.api.nvim_get_current_buf(), fork.buf, "the fork is shown")
  wait_text("forked from “one” at turn 2")
  eq("forked from “one” at turn 2", lines()[3])
  truthy(text():find("re: two", 1, true) and not text():find("three", 1, true), text())
  eq("● three  ← head", asked[1].items[4])
  local sent = fake.sent("session/fork")[1].params
  eq({ origin.sessionId, s.turns[sent.turnId].prompt }, { sent.sessionId, "two" })
  -- the origin's buffer is as it was
  local before = table.concat(vim.api.nvim_buf_get_lines(origin.buf, 0, -1, false), "\n")
  truthy(before:find("re: three", 1, true), before)
  -- the fork goes on from "two"
  vim.cmd("Trellis four")
  idle()
  truthy(text():find("re: four", 1, true), text())
  finish_test()
end)

test("fork from the tree buffer: f on a turn; before the first turn, an empty fork", function()
  echo_store()
  vim.cmd("Trellis one")
  idle()
  local origin = trellis.current()
  vim.cmd("TrellisTree")
  wait_for(function()
    return vim.api.nvim_buf_get_name(0):find("/tree$")
  end, nil, "the tree buffer")
  vim.api.nvim_win_set_cursor(0, { 5, 0 }) -- "◇ (start: an empty conversation)"
  vim.api.nvim_feedkeys("f", "x", false)
  wait_for(function()
    return trellis.current().sessionId ~= origin.sessionId
  end, nil, "the fork to open: " .. vim.inspect(notes))
  wait_text("before its first turn")
  eq("forked from “one” before its first turn", lines()[3])
  finish_test()
end)

test("a fork whose origin was deleted says so", function()
  local s = echo_store()
  vim.cmd("Trellis one")
  idle()
  local origin = trellis.current().sessionId
  answer_select("● one")
  vim.cmd("TrellisFork")
  wait_text("forked from “one” at turn 1")
  local fork = trellis.current().sessionId
  s.methods["session/delete"]({ sessionId = origin })
  sessions.open[fork] = nil
  local asked = answer_select("a fork")
  vim.cmd("TrellisSessions")
  wait_text("forked from a session that was deleted")
  eq(1, #asked[1].items)
  truthy(asked[1].items[1]:find("^one · .* · a fork$"), asked[1].items[1])
  finish_test()
end)

test("rename: the header shows the new title; without a title it is asked for", function()
  local _, fake = echo_store()
  vim.cmd("Trellis one")
  idle()
  vim.cmd("TrellisRename A better name")
  wait_text("# A better name")
  eq("# A better name", lines()[1])
  local default
  vim.ui.input = function(opts, on_confirm)
    default = opts.default
    on_confirm("Third name")
  end
  vim.cmd("TrellisRename")
  wait_text("# Third name")
  eq("A better name", default)
  eq({ "A better name", "Third name" }, vim.tbl_map(function(m)
    return m.params.title
  end, fake.sent("session/rename")))
  finish_test()
end)

test("delete: asked first; kept when the answer is no; deleted and its buffer gone when yes", function()
  local s, fake = echo_store()
  vim.cmd("TrellisNew other")
  wait_text("# other")
  vim.cmd("TrellisNew doomed")
  wait_text("# doomed")
  vim.cmd("Trellis hello")
  idle()
  local doomed = trellis.current()
  local asked = answer_select("doomed", "Keep it")
  vim.cmd("TrellisDelete")
  wait_for(function()
    return #asked == 2
  end, nil, "the confirmation")
  truthy(asked[1].items[1]:find("^● doomed · .* %(open%)$"), asked[1].items[1])
  eq("Delete “doomed” and all its turns for good? (its forks are kept)", asked[2].prompt)
  eq(0, #fake.sent("session/delete"))
  asked = answer_select("doomed", "Delete it")
  vim.cmd("TrellisDelete")
  wait_for(function()
    return trellis.current() == nil
  end, nil, "the session to go")
  eq(1, #fake.sent("session/delete"))
  eq(nil, s.sessions[doomed.sessionId])
  eq(false, vim.api.nvim_buf_is_valid(doomed.buf))
  finish_test()
end)

test("export then import: a path prompt each; a session already here imports as a copy", function()
  local _, fake = echo_store()
  vim.cmd("Trellis keep this")
  idle()
  local first = trellis.current()
  local file = vim.fn.tempname() .. ".trellisd"
  local default
  vim.ui.input = function(opts, on_confirm)
    default = opts.default
    on_confirm(file)
  end
  vim.cmd("TrellisExport")
  wait_for(function()
    return vim.fn.filereadable(file) == 1
  end, nil, "the export")
  eq(vim.fn.getcwd() .. "/keep-this.trellisd", default)
  eq({ sessionId = first.sessionId, path = file }, fake.sent("session/export")[1].params)
  local asked = answer_select("as a copy")
  vim.cmd("TrellisImport " .. vim.fn.fnameescape(file))
  wait_for(function()
    return trellis.current().sessionId ~= first.sessionId
  end, nil, "the copy to open")
  truthy(asked[1].prompt:find("is already in the store. Import it as a copy", 1, true), asked[1].prompt)
  wait_text("imported as a copy")
  truthy(text():find("re: keep this", 1, true), text())
  eq({ { path = file }, { path = file, asNew = true } }, vim.tbl_map(function(m)
    return m.params
  end, fake.sent("session/import")))
  finish_test()
end)

test(":TrellisSessions with words lists the sessions that match, with what matched", function()
  local _, fake = echo_store()
  vim.cmd("Trellis about the parser")
  idle()
  vim.cmd("TrellisNew unrelated")
  wait_text("# unrelated")
  local asked = answer_select("parser")
  vim.cmd("TrellisSessions parser")
  wait_text("re: about the parser")
  eq({ limit = 100, query = "parser" }, fake.sent("session/list")[1].params)
  eq("Sessions matching “parser”:", asked[1].prompt)
  eq(1, #asked[1].items)
  truthy(asked[1].items[1]:find(" — …re: about the parser…$"), asked[1].items[1])
  finish_test()
end)

test("a prompt over the checkout goes to the same folder of a session's worktree", function()
  local wt = { path = "/d/wt/fix", checkout = "/src/app", branch = "trellisd/fix", base = "main" }
  local function over(root, folder, worktree)
    return sessions.works_over({ root = root, session = { worktree = worktree } }, folder)
  end
  eq(true, over("/d/wt/fix", "/src/app", wt))
  eq(true, over("/d/wt/fix/lib", "/src/app/lib", wt))
  eq(false, over("/d/wt/fix/lib", "/src/app", wt))
  eq(false, over("/d/wt/fixed", "/src/appd", wt))
  eq(false, over("/d/wt/fix", "/src/app", vim.NIL))
  eq(true, over("/src/app", "/src/app", nil))
end)
