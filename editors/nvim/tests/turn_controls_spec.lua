-- Paging a long conversation, every step's text in the history, the decision about a
-- command killed mid-run, pins and forks after a step, against a fake daemon that answers
-- as protocol/README.md says.
local daemon = require("trellisd.daemon")
local sessions = require("trellisd.sessions")
local trellis = require("trellisd")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")

local folder = vim.fn.tempname()
vim.fn.mkdir(folder, "p")
vim.cmd("cd " .. vim.fn.fnameescape(folder))

local notes = {}
vim.notify = function(message, level)
  notes[#notes + 1] = { message = message, level = level }
end

local TOKENS = { input = 1, output = 1, total = 2, cached = vim.NIL }

-- A session of `count` turns on one path (t-1 … t-count), each of two steps: "looking at N"
-- (a tool call), then its reply "reply N", which is the last step's text.
local function paged_store(count, session_extra)
  local s = { turns = {}, pinned = {} }
  for i = 1, count do
    s.turns[i] = {
      turnId = "t-" .. i,
      runId = "r-" .. i,
      sessionId = "s-1",
      parentTurnId = i > 1 and ("t-" .. (i - 1)) or vim.NIL,
      prompt = "prompt " .. i,
      reply = "reply " .. i,
      outcome = "finished",
      tokens = TOKENS,
      createdAt = "2026-01-01T00:00:00Z",
      model = "scripted",
      cost = vim.NIL,
    }
  end
  local function session()
    return vim.tbl_extend("force", {
      sessionId = "s-1",
      root = folder,
      title = "long",
      head = count > 0 and ("t-" .. count) or vim.NIL,
      createdAt = "2026-01-01T00:00:00Z",
      updatedAt = "2026-01-01T00:00:00Z",
      provider = vim.empty_dict(),
      pinned = s.pinned,
    }, session_extra or {})
  end
  s.session = session
  local function page(last, limit)
    local first = limit and math.max(1, last - limit + 1) or 1
    return vim.list_slice(s.turns, first, last), first > 1 and ("before-" .. first) or nil
  end
  s.methods = {
    ["session/list"] = function()
      return { sessions = { vim.tbl_extend("force", session(), { turns = count }) } }
    end,
    ["session/reopen"] = function(p)
      local history, cursor = page(count, p.limit)
      return vim.tbl_extend("force", session(), { history = history, historyCursor = cursor })
    end,
    ["session/history"] = function(p)
      local last = p.cursor and (tonumber(p.cursor:match("%d+")) - 1) or count
      local turns, cursor = page(last, p.limit)
      return { turns = turns, nextCursor = cursor }
    end,
    ["session/turns"] = function()
      return { turns = s.turns }
    end,
    ["run/steps"] = function(p)
      local n = p.runId:match("%d+")
      return {
        steps = {
          {
            step = 1,
            decision = "tool",
            prompt = "prompt " .. n,
            text = "looking at " .. n,
            toolCall = { id = "c", name = "read_file", arguments = { path = "notes.md" } },
            result = "notes",
            tokens = TOKENS,
          },
          {
            step = 2,
            decision = "reply",
            prompt = vim.NIL,
            text = "reply " .. n,
            toolCall = vim.NIL,
            result = vim.NIL,
            tokens = TOKENS,
          },
        },
      }
    end,
  }
  return s
end

local function start(s, extra)
  daemon.stop(200)
  for k, v in pairs(extra or {}) do
    s.methods[k] = v
  end
  trellis.setup({ cmd = { "trellisd-fake" }, log_file = vim.fn.tempname(), flush_ms = 10 })
  local fake = Fake.new(s.methods)
  daemon.spawn = fake.spawn
  sessions.open, sessions.current = {}, nil
  notes = {}
  return fake
end

local function text()
  local c = trellis.current()
  return c and table.concat(vim.api.nvim_buf_get_lines(c.buf, 0, -1, false), "\n") or ""
end

local function wait_text(pattern, what)
  wait_for(function()
    return text():find(pattern, 1, true) ~= nil
  end, nil, (what or pattern) .. " in:\n" .. text())
end

local function count(pattern)
  local _, n = text():gsub(pattern, "")
  return n
end

-- vim.ui.select answers with the item whose label holds `want`; the labels asked are kept.
local asked = {}
local function answer_select(want)
  asked = {}
  vim.ui.select = function(items, opts, on_choice)
    local labels = {}
    for i, item in ipairs(items) do
      labels[i] = opts.format_item and opts.format_item(item) or item
    end
    asked[#asked + 1] = { prompt = opts.prompt, labels = labels }
    for i, label in ipairs(labels) do
      if want and label:find(want, 1, true) then
        on_choice(items[i], i)
        return
      end
    end
    on_choice(nil, nil)
  end
end

local function reopen()
  answer_select("long")
  vim.cmd("TrellisSessions")
  wait_text("### You")
end

test("a long conversation opens with its newest 50 turns; [[ puts the 50 before above them", function()
  local fake = start(paged_store(10000))
  reopen()
  eq(50, fake.sent("session/reopen")[1].params.limit)
  eq(0, #fake.sent("session/history"), "the whole history is not read")
  wait_text("prompt 10000")
  eq(50, count("### You\n"))
  wait_text("### You\nprompt 9951\n")
  truthy(not text():find("prompt 9950\n", 1, true), "older turns wait")
  wait_text("↑ earlier turns")
  vim.api.nvim_feedkeys("[[", "x", false)
  wait_text("### You\nprompt 9901\n")
  eq({ sessionId = "s-1", cursor = "before-9951", limit = 50 }, fake.sent("session/history")[1].params)
  eq(100, count("### You\n"))
  truthy(text():find("prompt 9950\n", 1, true) < text():find("prompt 9951\n", 1, true), text())
  truthy(text():find("↑ earlier turns", 1, true) < text():find("prompt 9901", 1, true), "still offered, on top")
  daemon.stop(500)
end)

test("the last page takes the offer away; a short conversation never has it", function()
  start(paged_store(60))
  reopen()
  wait_text("↑ earlier turns")
  vim.cmd("TrellisEarlier")
  wait_text("### You\nprompt 1\n")
  wait_for(function()
    return not text():find("↑ earlier turns", 1, true)
  end, nil, "the offer to go")
  eq(60, count("### You\n"))
  daemon.stop(500)

  start(paged_store(10))
  reopen()
  eq(10, count("### You\n"))
  truthy(not text():find("↑ earlier turns", 1, true), text())
  daemon.stop(500)
end)

test("a turn of the history shows every step's text, not only its reply (the last step's)", function()
  start(paged_store(3))
  reopen()
  wait_text("### You\nprompt 2\n\n### trellisd\n\nlooking at 2\n\nreply 2\n\n*finished")
  daemon.stop(500)
end)

local PENDING = { turnId = "t-2", runId = "r-2", tool = "run_command", argv = { "pytest", "-x" } }

test("a turn that ends with recovery asks keep or revert, and the answer goes to session/recover", function()
  local s = paged_store(1)
  local fake = start(s, {
    ["session/turn"] = function()
      return {
        turnId = "t-2",
        runId = "r-2",
        outcome = "cancelled",
        reply = "",
        tokens = TOKENS,
        steps = 1,
        cost = vim.NIL,
        recovery = { required = true, tool = "run_command", argv = { "pytest", "-x" } },
      }
    end,
    ["session/recover"] = function(p)
      return vim.tbl_extend("force", s.session(), { files = { restored = { "a.py" }, skipped = {} } }), nil, p
    end,
  })
  reopen()
  answer_select("Revert")
  vim.cmd("Trellis run the tests")
  wait_text("reverted the turn's changes (1 file(s) put back)")
  eq({ sessionId = "s-1", decision = "revert" }, fake.sent("session/recover")[1].params)
  truthy(asked[1].prompt:find("killed mid-run: pytest -x (run_command)", 1, true), asked[1].prompt)
  wait_text("a cancelled command was killed mid-run: pytest -x (run_command)")
  daemon.stop(500)
end)

test("reopened with a decision pending, it is asked; revert over changed files asks before forcing", function()
  local s = paged_store(2, { recovery = PENDING })
  local fake = start(s, {
    ["session/recover"] = function(p)
      if not p.force then
        return nil, { code = -32020, message = "files changed", data = { paths = { "a.py" } } }
      end
      return vim.tbl_extend("force", s.session(), { recovery = vim.NIL })
    end,
  })
  vim.ui.select = function(items, opts, on_choice)
    if opts.kind == "trellisd.recovery" then
      on_choice(items[2], 2) -- revert
    elseif opts.kind == "trellisd.restore" then
      on_choice(items[1], 1) -- overwrite
    else
      on_choice(items[1], 1) -- the session
    end
  end
  vim.cmd("TrellisSessions")
  wait_text("reverted the turn's changes")
  local sent = fake.sent("session/recover")
  eq(2, #sent)
  eq({ sessionId = "s-1", decision = "revert" }, sent[1].params)
  eq({ sessionId = "s-1", decision = "revert", force = true }, sent[2].params)
  daemon.stop(500)
end)

test("a turn refused with -32020 and data.recovery shows the same choice; keep clears it", function()
  local s = paged_store(2)
  local fake = start(s, {
    ["session/turn"] = function()
      return nil,
        {
          code = -32020,
          message = "session s-1 needs a decision: a cancelled command (pytest) was killed mid-run",
          data = { sessionId = "s-1", recovery = PENDING },
        }
    end,
    ["session/recover"] = function()
      return s.session()
    end,
  })
  reopen()
  answer_select("Keep")
  vim.cmd("Trellis go on")
  wait_text("*not sent: session s-1 needs a decision")
  wait_text("kept the files as the killed command left them")
  eq({ sessionId = "s-1", decision = "keep" }, fake.sent("session/recover")[1].params)
  daemon.stop(500)
end)

local function open_tree()
  vim.cmd("TrellisTree")
  wait_for(function()
    return vim.api.nvim_buf_get_name(0):find("/tree$")
  end, nil, "the tree buffer")
end

local function tree_line(n)
  return vim.api.nvim_buf_get_lines(0, n - 1, n, false)[1]
end

test("p in the tree pins the turn under the cursor and marks it; p again unpins it", function()
  local s = paged_store(3)
  local fake = start(s, {
    ["session/pin"] = function(p)
      s.pinned = { p.turnId }
      return s.session()
    end,
    ["session/unpin"] = function()
      s.pinned = {}
      return s.session()
    end,
  })
  reopen()
  open_tree()
  vim.api.nvim_win_set_cursor(0, { 7, 0 }) -- prompt 2
  eq("● prompt 2", tree_line(7))
  vim.api.nvim_feedkeys("p", "x", false)
  wait_for(function()
    return tree_line(7) == "● prompt 2 [pinned]"
  end, nil, "the pin mark: " .. tostring(tree_line(7)))
  eq({ sessionId = "s-1", turnId = "t-2" }, fake.sent("session/pin")[1].params)
  vim.api.nvim_feedkeys("p", "x", false)
  wait_for(function()
    return tree_line(7) == "● prompt 2"
  end, nil, "the mark to go")
  eq({ sessionId = "s-1", turnId = "t-2" }, fake.sent("session/unpin")[1].params)
  daemon.stop(500)
end)

test("F in the tree offers the turn's steps, forks after the one picked and opens the fork", function()
  local s = paged_store(2)
  local fake = start(s, {
    ["session/fork"] = function()
      return vim.tbl_extend("force", s.session(), { sessionId = "s-1" })
    end,
  })
  reopen()
  open_tree()
  vim.api.nvim_win_set_cursor(0, { 7, 0 }) -- prompt 2
  answer_select("after step 1")
  vim.api.nvim_feedkeys("F", "x", false)
  wait_for(function()
    return #fake.sent("session/fork") == 1
  end, nil, "the fork")
  eq({ sessionId = "s-1", turnId = "t-2", step = 1 }, fake.sent("session/fork")[1].params)
  eq({
    "before the first step: the prompt only",
    "after step 1: read_file notes.md",
    "after step 2: reply 2",
  }, asked[1].labels)
  wait_for(function()
    return #fake.sent("session/reopen") == 2
  end, nil, "the fork to open")
  daemon.stop(500)
end)

test("a turn joined mid-way shows the texts of the steps it committed before, not only the last", function()
  local s = paged_store(1)
  local running = {
    turnId = "t-2",
    runId = "r-2",
    sessionId = "s-1",
    parentTurnId = "t-1",
    prompt = "prompt 2",
    reply = "Still looking.",
    outcome = "running",
    tokens = TOKENS,
    createdAt = "2026-01-01T00:00:00Z",
  }
  local steps = s.methods["run/steps"]
  start(s, {
    ["session/reopen"] = function()
      return vim.tbl_extend("force", s.session(), {
        head = "t-2",
        history = { s.turns[1], running },
        running = { sessionId = "s-1", turnId = "t-2", runId = "r-2", step = 3, text = "It is " },
      })
    end,
    ["run/steps"] = function(p)
      if p.runId ~= "r-2" then
        return steps(p)
      end
      local function step(n, text)
        return {
          step = n,
          decision = "tool",
          prompt = vim.NIL,
          text = text,
          toolCall = vim.NIL,
          result = "x",
          tokens = TOKENS,
        }
      end
      return { steps = { step(1, "Let me look."), step(2, "Still looking.") } }
    end,
  })
  reopen()
  wait_text("### You\nprompt 2\n\n### trellisd\n\nLet me look.\n\nStill looking.\n\nIt is ")
  eq(1, count("Still looking%."))
  eq(true, trellis.current().running)
  daemon.stop(500)
end)

test("a pin refused because another daemon writes the session offers to take it over, then pins", function()
  local s = paged_store(2)
  local refused = false
  local fake = start(s, {
    ["session/pin"] = function(p)
      if not refused then
        refused = true
        return nil, { code = -32030, message = "held", data = { ownerPid = 4242 } }
      end
      s.pinned = { p.turnId }
      return s.session()
    end,
    ["session/takeover"] = function()
      return s.session()
    end,
  })
  reopen()
  open_tree()
  vim.api.nvim_win_set_cursor(0, { 6, 0 }) -- prompt 1
  answer_select("Take it over here")
  vim.api.nvim_feedkeys("p", "x", false)
  wait_for(function()
    return tree_line(6) == "● prompt 1 [pinned]"
  end, nil, "the pin after the takeover: " .. tostring(tree_line(6)))
  eq(1, #fake.sent("session/takeover"))
  eq(2, #fake.sent("session/pin"))
  daemon.stop(500)
end)
