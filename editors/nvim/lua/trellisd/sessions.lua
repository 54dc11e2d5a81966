-- The sessions this editor has open, and what a user does with them: send a prompt, steer
-- or cancel the running turn, branch, reopen. Each session has a conversation buffer
-- (trellisd.view); what the daemon says about a turn is painted there.

local compat = require("trellisd.compat")
local config = require("trellisd.config")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local fork_step = require("trellisd.fork_step")
local paging = require("trellisd.paging")
local pins = require("trellisd.pins")
local queue = require("trellisd.queue")
local recovery = require("trellisd.recovery")
local tree = require("trellisd.tree")
local ui = require("trellisd.ui")
local View = require("trellisd.view")

local M = {}

M.open = {} -- sessionId -> state {id, root, title, head, view, running}
M.current = nil -- the sessionId commands act on
local opening = {} -- root -> the callbacks waiting for the session being opened over it
local steer_count = 0
local tree_buffers = {} -- buffer -> {session id, entries}

local function redraw_status()
  pcall(vim.cmd, "redrawstatus!")
end

local function quote(prefix, text)
  local lines = {}
  for i, l in ipairs(compat.lines(tostring(text or ""))) do
    lines[#lines + 1] = (i == 1 and prefix or "> ") .. l
  end
  return lines
end

local function cwd_root()
  local cwd = vim.fn.getcwd()
  return compat.uv.fs_realpath(cwd) or cwd
end

function M.state(id)
  return M.open[id]
end

function M.current_state()
  return M.current and M.open[M.current] or nil
end

local describe_lineage -- defined below, with the other requests
local need_current -- defined below, with the commands

-- Make (or refresh) the local state of a session from a Session the daemon sent.
local function adopt(session)
  local id = session.sessionId
  local state = M.open[id]
  if state == nil then
    state = { id = id, waiting = {} }
    M.open[id] = state
  end
  state.root = session.root
  state.title = compat.value(session.title) or ""
  state.head = compat.value(session.head)
  state.session = session
  queue.budget_from(state, session)
  if type(compat.value(session.forkedFrom)) == "table" then
    describe_lineage(state) -- the header says it once the origin is looked up
  else
    state.lineage = format.lineage(session)
  end
  if state.view == nil or not state.view:valid() then
    state.view = View.new("trellis://" .. id, config.options.flush_ms)
    vim.keymap.set("n", "[[", function()
      M.earlier(state)
    end, { buffer = state.view.buf, desc = "Load the turns before those shown" })
  end
  M.current = id
  return state
end

-- Draw the conversation from its history: `turns`, its newest page (state.cursor leads to
-- the page before); live: the id of a turn still running. Once the steps of the turns are
-- read, they are drawn again with every step's text, unless something was painted since.
local function render(state, turns, live)
  state.view:render(
    View.history_lines(state.session, turns, live, state.lineage, state.cursor ~= nil)
  )
  state.view.header_count = #View.header(state.session, state.lineage)
  if state.usage then
    state.view:set_header(View.header(state.session, state.lineage, state.usage))
  end
  local painted = { writes = state.view.writes, view = state.view }
  state.painted = painted
  local finished = {}
  for _, t in ipairs(turns) do
    if t.turnId ~= live and t.texts == nil then
      finished[#finished + 1] = t
    end
  end
  if #finished == 0 then
    return
  end
  paging.steps(finished, function()
    local view = state.view
    local untouched = view == painted.view and view.writes == painted.writes and #view.pending == 0
    if state.painted == painted and untouched and not state.running then
      view:render(View.history_lines(state.session, turns, live, state.lineage, state.cursor ~= nil))
      view.header_count = #View.header(state.session, state.lineage)
      if state.usage then
        view:set_header(View.header(state.session, state.lineage, state.usage))
      end
      painted.writes = view.writes
    end
  end)
end

-- [[ in a conversation, :TrellisEarlier: draw the page of turns before the first one shown.
function M.earlier(state)
  state = state or M.current_state()
  if not state then
    return
  end
  local cursor = state.cursor
  if cursor == nil then
    ui.notify("the conversation is shown from its first turn")
    return
  end
  if state.loading_earlier then
    return
  end
  state.loading_earlier = true
  paging.earlier(state.id, cursor, function(err, page)
    state.loading_earlier = nil
    if err then
      ui.error("could not load the earlier turns: " .. err.message)
      return
    end
    if state.cursor ~= cursor then
      return -- the history was drawn again meanwhile
    end
    if state.view:prepend(page.turns, page.cursor ~= nil) then
      state.cursor = page.cursor
    end
  end)
end

local function paint_header(state)
  if state.view and state.view:valid() then
    state.view:set_header(View.header(state.session, state.lineage, state.usage))
  end
end

-- Every page of a paged request (session/list, session/turns), joined: cb(err, items).
local MAX_PAGES = 20
local function all_pages(method, params, key, cb, found)
  local items = {}
  local function page(cursor, n)
    local p = vim.deepcopy(params)
    p.cursor = cursor
    daemon.request(method, p, function(err, result)
      if err then
        cb(err, items)
        return
      end
      vim.list_extend(items, result[key] or {})
      local next_cursor = compat.value(result.nextCursor)
      if next_cursor and n < MAX_PAGES and not (found and found(items)) then
        page(next_cursor, n + 1)
      else
        cb(nil, items)
      end
    end)
  end
  page(nil, 1)
end

-- Where a fork came from: the origin's title (session/list) and the forked turn's place on
-- its path (session/turns), said in the buffer's header once known.
function describe_lineage(state)
  local from = compat.value(state.session.forkedFrom)
  if type(from) ~= "table" then
    return
  end
  local session = state.session
  local function done(origin)
    if state.session == session then
      state.lineage = format.lineage(session, origin)
      paint_header(state)
    end
  end
  all_pages("session/list", { limit = 200 }, "sessions", function(err, sessions)
    local title
    for _, s in ipairs(sessions) do
      if s.sessionId == from.sessionId then
        title = compat.value(s.title) or ""
      end
    end
    if err or title == nil then
      done(nil)
      return
    end
    local turn_id = compat.value(from.turnId)
    if turn_id == nil then
      done({ title = title, turn = 0 })
      return
    end
    all_pages("session/turns", { sessionId = from.sessionId }, "turns", function(e, turns)
      if e then
        done(nil)
        return
      end
      local parents = {}
      for _, t in ipairs(turns) do
        parents[t.turnId] = compat.value(t.parentTurnId) or false
      end
      local depth, cursor = 0, turn_id
      while cursor and parents[cursor] ~= nil and depth <= #turns do
        depth = depth + 1
        cursor = parents[cursor]
      end
      done({ title = title, turn = depth > 0 and depth or nil })
    end)
  end, function(sessions)
    for _, s in ipairs(sessions) do
      if s.sessionId == from.sessionId then
        return true
      end
    end
    return false
  end)
end

-- Show a buffer: focus a window of this tab that has it, else open one as configured.
local function show_buffer(buf, split)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_set_current_win(win)
      return
    end
  end
  split = split or config.options.split
  if split == "vertical" then
    vim.cmd("botright vsplit")
  elseif split == "horizontal" then
    vim.cmd("botright split")
  elseif split == "tab" then
    vim.cmd("tabnew")
  end
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = true
  vim.wo.linebreak = true
  vim.wo.number = false
  vim.wo.relativenumber = false
end

local function show(state)
  show_buffer(state.view.buf)
  local count = vim.api.nvim_buf_line_count(state.view.buf)
  vim.api.nvim_win_set_cursor(0, { count, 0 })
end

-- A turn of the session that runs in the daemon but was not started here (another window
-- started it, or this one before the daemon was reattached): drawn from the history (its
-- prompt, the steps it committed) and the text of its current step streamed so far, then
-- followed through the notifications until a step that may end it shows, in the history,
-- that it has ended. Steer and cancel act on it as on a turn started here.
local function follow(state, history, live)
  local run = {
    -- a turn that started as the reopen was answered is not in its history
    prompt = compat.value(live.prompt) or "",
    tokens = 0,
    step = compat.value(live.step),
    steers = 0,
    approval = false,
    followed = true,
    turnId = live.turnId,
  }
  local reply = ""
  local listed = false
  for _, t in ipairs(history) do
    if t.turnId == live.turnId then
      run.prompt = t.prompt
      run.model = compat.value(t.model)
      reply = compat.value(t.reply) or ""
      listed = true
    end
  end
  if not listed then
    history = vim.list_extend(vim.list_slice(history), { { turnId = live.turnId, prompt = run.prompt } })
  end
  state.running = run
  render(state, history, live.turnId)
  local text = compat.value(live.text) or ""
  -- between two steps the text so far is the last committed step's, already in the reply
  if text ~= "" and reply:sub(-#text) ~= text then
    state.view:stream(text)
  end
  -- the reply is the last committed step's text: the steps before it go above it
  daemon.request("run/steps", { runId = live.runId }, function(err, result)
    if err or state.running ~= run then
      return
    end
    local texts = paging.joined_texts(result.steps or {}, compat.value(live.step), reply)
    if texts then
      state.view:insert_under_reply_heading(texts)
    end
  end)
  -- a command still running, calls waiting: drawn as far as they have gone
  for _, call in ipairs(compat.value(live.calls) or {}) do
    run.calls = run.calls or {}
    run.calls[call.callId] = call.status
    run.call = call.status == "running" and call.tool or nil
    -- as the window that saw it happen shows it: the whole call, then where it stands
    state.view:block({ format.call_status(call.tool, call.arguments, "proposed") })
    if call.status ~= "proposed" then
      state.view:block({ format.call_status(call.tool, call.arguments, call.status) })
    end
    run.output_at_start = true
    if (call.output or "") ~= "" then
      local drawn
      drawn, run.output_at_start = format.output(call.output, true)
      state.view:stream(drawn)
    end
  end
  redraw_status()
end

-- Whether the followed turn has ended, as the history says; if it has, its footer ends it.
local function check_followed(state, run)
  daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    if err or state.running ~= run then
      return
    end
    for _, t in ipairs(result.turns or {}) do
      if t.turnId == run.turnId and t.outcome ~= "running" then
        state.running = nil
        state.view:block({ format.footer(t) })
        state.head = compat.value(result.turns[#result.turns].turnId) or state.head
        redraw_status()
        M.send_waiting(state)
        return
      end
    end
  end)
end

local function reopen(id, cb)
  -- The configured MCP servers again: a daemon started since the session was opened has
  -- only the config file's and the project's.
  local params = { sessionId = id, mcpServers = config.options.mcp_servers, limit = paging.PAGE }
  daemon.request("session/reopen", params, function(err, result)
    if err then
      ui.error("could not reopen the session: " .. err.message)
      return
    end
    local state = adopt(result)
    state.cursor = compat.value(result.historyCursor)
    local history = result.history or {}
    local live = compat.value(result.running)
    if live and not (state.running and not state.running.followed) then
      follow(state, history, live)
    else
      render(state, history)
    end
    local last = history[#history]
    if last and last.outcome == "interrupted" and not state.running then
      ui.notify("the last turn was interrupted before it ended: :TrellisResume continues it")
    elseif last and last.outcome == "paused" and not state.running then
      ui.notify("the last turn is paused: :TrellisResume continues it")
    end
    if compat.value(result.integrity) == "broken" then
      state.view:block({ "*the session's log is broken: its store was changed by hand*" })
      ui.error("the session's log is broken: rows of it were changed outside trellisd")
    end
    if cb then
      cb(state)
    end
    M.offer_recovery(state, compat.value(result.recovery))
  end)
end

-- Run cb(conn) with a ready daemon. When it was just started (after an exit), the current
-- session is reopened first, so that its buffer shows what the store kept.
local function with_daemon(cb)
  daemon.ensure(function(err, conn, fresh)
    if err then
      ui.error(err)
      return
    end
    local current = M.current_state()
    if fresh and current then
      reopen(current.id, function()
        cb(conn)
      end)
    else
      cb(conn)
    end
  end)
end

local function open_session(title, cb, failed)
  local params = { root = cwd_root() }
  if title and title ~= "" then
    params.title = title
  end
  if config.options.policy ~= nil then
    params.policy = config.options.policy
  end
  if config.options.mcp_servers ~= nil then
    params.mcpServers = config.options.mcp_servers
  end
  daemon.request("session/open", params, function(err, session)
    if err then
      ui.error("could not open a session: " .. err.message)
      if failed then
        failed()
      end
      return
    end
    local state = adopt(session)
    render(state, {})
    cb(state)
  end)
end

-- The session a prompt goes to: the current one if it is over this folder, else the one
-- this editor used last over it, else a new one.
local function session_for_cwd(cb)
  local root = cwd_root()
  local current = M.current_state()
  if current and current.root == root then
    cb(current)
    return
  end
  for _, state in pairs(M.open) do
    if state.root == root then
      M.current = state.id
      cb(state)
      return
    end
  end
  -- A second prompt while the session is being opened goes to that session, after the first.
  if opening[root] then
    table.insert(opening[root], cb)
    return
  end
  opening[root] = { cb }
  local function done(state)
    local waiting = opening[root]
    opening[root] = nil
    if state then
      for _, waiter in ipairs(waiting) do
        waiter(state)
      end
    end
  end
  open_session(nil, done, function()
    done(nil)
  end)
end

-- The files a step wrote: buffers showing them are checked against the disk (:checktime),
-- so that they show what the model wrote ('autoread') or warn that the file changed.
local WRITERS = { write_file = true, edit_file = true }

local function real(path)
  return compat.uv.fs_realpath(path) or vim.fn.fnamemodify(path, ":p")
end

local function check_written(state, call)
  local args = compat.value(call.arguments)
  local path = type(args) == "table" and compat.value(args.path) or nil
  if not WRITERS[call.name] or type(path) ~= "string" or path == "" then
    return
  end
  if path:sub(1, 1) ~= "/" then
    path = state.root .. "/" .. path
  end
  local written = real(path)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if name ~= "" and vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      if real(name) == written then
        pcall(vim.cmd, "checktime " .. buf)
      end
    end
  end
end

local function ensure_view(state, cb)
  if state.view:valid() then
    cb(state)
    return
  end
  state.view = View.new("trellis://" .. state.id, config.options.flush_ms)
  daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    if not err then
      state.cursor = compat.value(result.nextCursor)
      render(state, result.turns)
    end
    cb(state)
  end)
end

-- Ask keep or revert about a command killed mid-run (pending: Session.recovery's shape);
-- the answer goes to session/recover. Asked once at a time per session.
function M.offer_recovery(state, pending)
  if type(pending) ~= "table" or state.asking_recovery then
    return
  end
  state.asking_recovery = true
  recovery.offer(state, pending, function(session)
    state.asking_recovery = nil
    if session then
      adopt(session)
      redraw_status()
    end
  end)
end

-- :TrellisRecover: answer the decision the conversation waits for, if it does.
function M.recover()
  local state = need_current("recover")
  if not state then
    return
  end
  local pending = compat.value(state.session.recovery)
  if type(pending) ~= "table" then
    ui.notify("this conversation has no decision waiting")
    return
  end
  M.offer_recovery(state, pending)
end

local function turn_ended(state, run, err, result)
  if state.running == run then
    state.running = nil
  end
  local view = state.view
  -- Prompts waiting behind a turn that was refused or lost with its daemon are not sent:
  -- the user decides again (after the takeover, or once the daemon is back).
  local stuck = err and (err.code == Connection.LOST or err.code == Connection.LEASE_HELD)
  if stuck and #state.waiting > 0 then
    local count = format.count(#state.waiting, "waiting prompt was", "waiting prompts were")
    ui.warn(count .. " not sent")
    state.waiting = {}
  end
  if err then
    if err.code == Connection.REQUEST_CANCELLED then
      view:block({ "*cancelled*" })
    elseif err.code == Connection.LOST then
      view:block({ "*interrupted: " .. err.message .. "*" })
    elseif err.code == Connection.LEASE_HELD and run.retry then
      view:block({ "*not sent: " .. format.one_line(err.message, 200) .. "*" })
      M.offer_takeover(state, err, run.retry)
    elseif err.code == Connection.CONFLICT and recovery.pending_from(err.data) then
      -- refused until a person decides about a command killed mid-run
      view:block({ "*not sent: " .. format.one_line(err.message, 200) .. "*" })
      M.offer_recovery(state, recovery.pending_from(err.data))
    else
      view:block({ "*error: " .. format.one_line(err.message, 200) .. "*" })
      ui.error(err.message)
    end
  else
    view:block({ format.footer(result) })
    queue.budget_from(state, result)
    if state.budget then
      view:block({ "*" .. queue.spend_text(state) .. "*" })
    end
    state.head = compat.value(result.turnId) or state.head
    if state.title == "" then
      state.title = format.one_line(run.prompt, 200)
      state.session.title = state.title
      paint_header(state)
    end
    local outcome = compat.value(result.outcome)
    local why = compat.value(result.error)
    if outcome == "error" then
      ui.error("the turn failed: " .. (why or "no reason given"))
    elseif outcome == "exhausted" and why then
      ui.warn("the turn stopped before the model finished: " .. why)
    elseif outcome == "exhausted" then
      ui.warn("the turn stopped before the model finished: it used all the steps it was given")
    elseif outcome == "paused" then
      ui.notify("the turn paused after its step: :TrellisResume goes on")
    end
    local killed = compat.value(result.recovery)
    if type(killed) == "table" then
      M.offer_recovery(state, recovery.pending(result, killed))
    end
  end
  redraw_status()
  M.send_waiting(state)
end

function need_current(what)
  local state = M.current_state()
  if not state then
    ui.warn(
      "there is no conversation to "
        .. what
        .. ": :Trellis starts one, :TrellisSessions reopens one"
    )
  end
  return state
end

-- Run a turn: session/turn for a prompt, session/resume for an interrupted turn. The
-- reply streams into the conversation; the footer comes when the request answers.
local function start_turn(state, conn, method, params, heading, retry)
  if state.running then
    ui.warn(
      "a turn is already running in this session: :TrellisSteer steers it, :TrellisCancel stops it"
    )
    return
  end
  local run = {
    prompt = params.prompt or "",
    tokens = 0,
    step = nil,
    steers = 0,
    approval = false,
    retry = retry,
  }
  state.running = run
  state.view:block(heading)
  run.request = conn:request(method, params, function(err, result)
    turn_ended(state, run, err, result)
  end)
  redraw_status()
end

-- `context`: what the editor attaches to the prompt (session/turn's context), or nil.
local function send(state, conn, prompt, context)
  local heading = View.prompt_lines(prompt)
  if context then
    table.insert(heading, #heading - 1, format.context_line(context))
    table.insert(heading, #heading - 1, "")
  end
  start_turn(
    state,
    conn,
    "session/turn",
    { sessionId = state.id, prompt = prompt, stepMode = state.step_mode or nil, context = context },
    heading,
    function()
      daemon.ensure(function(err, c)
        if err then
          ui.error(err)
        else
          send(state, c, prompt, context)
        end
      end)
    end
  )
end

-- Another daemon (another editor) writes this session: offer to take it over, then retry.
function M.offer_takeover(state, err, retry)
  local pid = type(err.data) == "table" and compat.value(err.data.ownerPid) or nil
  local who = pid and ("another trellisd (pid " .. tostring(pid) .. ")") or "another trellisd"
  ui.select({ "Take it over here", "Leave it" }, {
    prompt = who .. " is writing this session. Take it over?",
    kind = "trellisd.takeover",
  }, function(_, index)
    if index ~= 1 then
      return
    end
    daemon.request("session/takeover", { sessionId = state.id }, function(e, session)
      if e then
        ui.error("could not take the session over: " .. e.message)
        return
      end
      adopt(session)
      retry()
    end)
  end)
end

-- A prompt given while a turn runs waits for it to end, then goes in order.
function M.send_waiting(state)
  if state.running or #state.waiting == 0 then
    return
  end
  local prompt = table.remove(state.waiting, 1)
  daemon.ensure(function(err, conn)
    if err then
      ui.error(err)
    elseif state.running then
      table.insert(state.waiting, 1, prompt)
    elseif type(prompt) == "table" then -- a prompt with its editor context
      send(state, conn, prompt.prompt, prompt.context)
    else
      send(state, conn, prompt)
    end
  end)
end

-- :Trellis [prompt]; `context`: what the editor attaches to it (see M.ask_about).
function M.ask(prompt, context)
  if prompt == nil or prompt:match("^%s*$") then
    ui.input({ prompt = "Trellis: " }, function(text)
      if text and not text:match("^%s*$") then
        M.ask(text, context)
      end
    end)
    return
  end
  with_daemon(function(conn)
    session_for_cwd(function(state)
      ensure_view(state, function()
        show(state)
        if state.running then
          M.send_queued(state, conn, prompt, context)
        else
          send(state, conn, prompt, context)
        end
      end)
    end)
  end)
end

-- The most text of a buffer sent with a prompt; past it, the daemon reads the file itself.
local CONTEXT_BYTES = 256 * 1024

-- :[range]TrellisAsk [prompt]: ask about the lines of the range (a selection: :'<,'>), or
-- without a range about the whole current buffer. The text goes as the editor shows it,
-- unsaved changes included.
function M.ask_about(prompt, line1, line2)
  local buf = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(buf)
  if name == "" or vim.bo[buf].buftype ~= "" then
    ui.warn("this buffer is not a file: open the file to ask about it")
    return
  end
  local entry = { path = real(name) }
  local lines
  if line1 then
    entry.kind = "selection"
    entry.range = { startLine = line1, endLine = line2 }
    lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  else
    entry.kind = "file"
    lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  local text = table.concat(lines, "\n") .. "\n"
  if #text <= CONTEXT_BYTES then
    entry.text = text
  end
  M.ask(prompt, { entry })
end

-- A prompt given while a turn runs is queued in the daemon (session/turn with queue), shown
-- by :TrellisQueue in every editor following the session, and run after the running turn;
-- its turn is drawn here when it starts (session/dequeued), and ends when the request answers.
function M.send_queued(state, conn, prompt, context)
  local run = { prompt = prompt, tokens = 0, step = nil, steers = 0, approval = false }
  queue.sent(state, run)
  local params = { sessionId = state.id, prompt = prompt, queue = true, context = context }
  params.stepMode = state.step_mode or nil
  run.request = conn:request("session/turn", params, function(err, result)
    queue.answered(state, run)
    if state.running == run or run.started then
      turn_ended(state, run, err, result)
    elseif err then
      ui.warn("your queued prompt did not run: " .. err.message)
    end
    redraw_status()
  end)
  ui.notify("your prompt is queued: it runs when the running turn ends (:TrellisQueue lists the queue)")
  redraw_status()
end

function M.start_queued(state, run)
  run.started = true
  state.running = run
  state.view:block(View.prompt_lines(run.prompt))
  redraw_status()
end

-- :TrellisQueue: the prompts queued behind the running turn; picking one offers to drop it.
function M.queue()
  local state = need_current("list the queue of")
  if not state then
    return
  end
  daemon.request("session/queue", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not read the queue: " .. err.message)
      return
    end
    state.queue = {}
    for _, q in ipairs(result.queued or {}) do
      queue.queued(state, q)
    end
    redraw_status()
    if queue.count(state) == 0 then
      ui.notify("no prompt is queued")
      return
    end
    ui.select(queue.labels(state), {
      prompt = "Queued prompts (pick one to drop it)",
      kind = "trellisd.queue",
    }, function(_, index)
      local entry = index and queue.entry(state, index)
      if not entry then
        return
      end
      local params = { sessionId = state.id, queueId = entry.queueId }
      daemon.request("session/unqueue", params, function(e)
        if e then
          ui.warn("could not drop it: " .. e.message)
        else
          ui.notify("dropped from the queue: " .. format.one_line(entry.prompt, 80))
        end
      end)
    end)
  end)
end

-- :TrellisBudget tokens=N usd=X (or off): what the conversation's turns may spend together.
function M.budget(args)
  local state = need_current("budget")
  if not state then
    return
  end
  local budget, problem = queue.parse(args)
  if budget == nil then
    ui.warn(problem)
    return
  end
  daemon.request("session/budget", { sessionId = state.id, budget = budget }, function(err, r)
    if err then
      ui.error("could not set the budget: " .. err.message)
      return
    end
    queue.budget_from(state, r)
    ui.notify(queue.spend_text(state) or "budget set")
    redraw_status()
  end)
end

-- :TrellisResume: continue the paused or interrupted turn at the head.
function M.resume()
  local state = need_current("resume")
  if not state then
    return
  end
  with_daemon(function(conn)
    daemon.request("session/history", { sessionId = state.id, limit = 1 }, function(err, result)
      if err then
        ui.error("could not read the conversation: " .. err.message)
        return
      end
      local last = result.turns[#result.turns]
      if not last or (last.outcome ~= "interrupted" and last.outcome ~= "paused") then
        ui.warn("the last turn was not paused or interrupted: there is nothing to resume")
        return
      end
      show(state)
      start_turn(
        state,
        conn,
        "session/resume",
        { sessionId = state.id, turnId = last.turnId, stepMode = state.step_mode or nil },
        { "### trellisd (resumed)" }
      )
    end)
  end)
end

-- :TrellisNew [title]
function M.new(title)
  with_daemon(function()
    open_session(title, function(state)
      show(state)
    end)
  end)
end

-- Ask the user to pick one of the sessions session/list gives for `params`; cb(session).
-- `first`: the id of a session to put first (marked as open).
local function pick_from_list(params, prompt, kind, cb, first)
  with_daemon(function()
    daemon.request("session/list", params, function(err, result)
      if err then
        ui.error("could not list the sessions: " .. err.message)
        return
      end
      local sessions = result.sessions or {}
      if #sessions == 0 then
        if params.query then
          ui.notify("no session matches “" .. params.query .. "”")
        else
          ui.notify("there are no sessions yet: :Trellis starts one")
        end
        return
      end
      local titles = {}
      for _, x in ipairs(sessions) do
        titles[x.sessionId] = compat.value(x.title) or ""
      end
      for i, x in ipairs(sessions) do
        if x.sessionId == first and i > 1 then
          table.insert(sessions, 1, table.remove(sessions, i))
        end
      end
      local now = os.time()
      ui.select(sessions, {
        prompt = prompt,
        kind = kind,
        format_item = function(x)
          local item = format.session_item(x, now, nil, titles)
          return x.sessionId == first and ("● " .. item .. " (open)") or item
        end,
      }, function(choice)
        if choice then
          cb(choice)
        end
      end)
    end)
  end)
end

-- :TrellisSessions [query]: reopen a session, the most recent first; with a query, those
-- whose title, prompts or replies match it, best first, each with the text that matched.
function M.pick_session(query)
  local params = { limit = 100 }
  local prompt = "Reopen which session?"
  if query and not query:match("^%s*$") then
    params.query = vim.trim(query)
    prompt = "Sessions matching “" .. params.query .. "”:"
  end
  pick_from_list(params, prompt, "trellisd.session", function(choice)
    reopen(choice.sessionId, show)
  end)
end

-- :TrellisSteer [text]
function M.steer(text)
  local state = need_current("steer")
  if not state then
    return
  end
  if not state.running then
    ui.warn("no turn is running to steer; :Trellis sends a new prompt")
    return
  end
  if text == nil or text:match("^%s*$") then
    ui.input({ prompt = "Steer: " }, function(t)
      if t and not t:match("^%s*$") then
        M.steer(t)
      end
    end)
    return
  end
  steer_count = steer_count + 1
  local run = state.running
  local params = {
    sessionId = state.id,
    text = text,
    clientMsgId = "nvim-" .. vim.fn.getpid() .. "-" .. steer_count,
  }
  run.steers = run.steers + 1
  daemon.request("session/steer", params, function(err)
    if err then
      run.steers = math.max(0, run.steers - 1)
      if run.followed and err.code == Connection.NOT_RUNNING then
        ui.warn("the steer was not sent: the turn had ended")
        check_followed(state, run)
      elseif err.code == Connection.METHOD_NOT_FOUND then
        ui.error("this trellisd cannot steer a running turn (it has no session/steer): update it")
      else
        ui.error("the steer was refused: " .. err.message)
      end
    end
    redraw_status()
  end)
end

-- :TrellisCancel
function M.cancel()
  local state = need_current("cancel")
  if not state then
    return
  end
  local run = state.running
  if not run then
    ui.warn("no turn is running")
    return
  end
  daemon.request("session/cancel", { sessionId = state.id }, function(err, result)
    if err and err.code == Connection.METHOD_NOT_FOUND and daemon.conn and run.request then
      daemon.conn:cancel_request(run.request) -- a daemon without session/cancel
    elseif err then
      ui.error("could not cancel: " .. err.message)
    elseif result and result.cancelled == false then
      ui.warn("nothing to cancel: the turn had already ended")
    end
    if run.followed and not err then
      check_followed(state, run)
    end
  end)
end

-- :TrellisCompact: the oldest turns of the conversation are summarized by the model, and
-- from then on sent as that summary (the turns stay in the conversation as they were).
function M.compact()
  local state = need_current("compact")
  if not state then
    return
  end
  ui.notify("compacting the conversation…")
  daemon.request("session/compact", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not compact: " .. err.message)
    elseif result.compacted then
      local turns = format.count(result.turns, "turn", "turns")
      local cost = format.cost(compat.value(result.cost))
      local paid = cost and (" (" .. cost .. ")") or ""
      ui.notify("compacted: the first " .. turns .. " now sent as a summary" .. paid)
    else
      ui.notify("nothing to compact: only the newest turn is sent in full")
    end
  end)
end

-- The context meter and the session's cost, for a statusline: "ctx 12% · $0.0123", or ""
-- before the daemon has said.
function M.usage()
  local state = M.current_state()
  if not state or not state.usage then
    return ""
  end
  return format.usage_short(state.usage)
end

-- :TrellisPause: the running turn stops after the step it is taking.
function M.pause()
  local state = need_current("pause")
  if not state then
    return
  end
  if not state.running then
    ui.warn("no turn is running")
    return
  end
  daemon.request("session/pause", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not pause: " .. err.message)
    elseif result and result.pausing == false then
      ui.warn("nothing to pause: the turn had already ended")
    else
      ui.notify("the turn pauses after its step")
    end
  end)
end

-- :TrellisStep: turns of this conversation pause after every step, or no longer do.
function M.toggle_step()
  local state = need_current("walk step by step")
  if not state then
    return
  end
  state.step_mode = not state.step_mode
  if state.step_mode then
    ui.notify("step mode: each turn pauses after every step (:TrellisResume takes the next)")
  else
    ui.notify("step mode off: turns run to their end")
  end
end

local function branch_to(state, turn_id, cb)
  if state.running then
    ui.warn("a turn is running: wait for it to end or :TrellisCancel it before you branch")
    return
  end
  local function send(restore, force)
    daemon.request("session/branch", {
      sessionId = state.id,
      turnId = turn_id or vim.NIL,
      restoreFiles = restore,
      force = force,
    }, function(err, session)
      if err and restore and not force and err.code == Connection.CONFLICT and err.data then
        local paths = type(err.data.paths) == "table" and err.data.paths or {}
        ui.select({ "Overwrite them", "Cancel the branch" }, {
          prompt = "changed since the agent wrote them: " .. table.concat(paths, ", "),
          kind = "trellisd.restore",
        }, function(_, index)
          if index == 1 then
            send(true, true)
          end
        end)
        return
      end
      if err then
        ui.error("could not branch: " .. err.message)
        return
      end
      local files = session.files
      session.files = nil
      adopt(session)
      if files then
        vim.cmd("checktime") -- buffers of restored files reload
      end
      daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(e, result)
        if e then
          ui.error("could not read the new path: " .. e.message)
          return
        end
        state.cursor = compat.value(result.nextCursor)
        render(state, result.turns)
        local last = result.turns[#result.turns]
        local restored = files and (" (" .. #files.restored .. " file(s) restored)") or ""
        ui.notify(
          (
            last
              and ("branched: the next prompt follows “" .. format.one_line(last.prompt, 40) .. "”")
            or "branched: the next prompt starts the conversation afresh"
          ) .. restored
        )
        if cb then
          cb(state)
        end
      end)
    end)
  end
  ui.select({ "Restore the files as they were there", "Leave the files as they are" }, {
    prompt = "branch: restore the files the turns changed?",
    kind = "trellisd.restore",
  }, function(_, index)
    if index then
      send(index == 1, false)
    end
  end)
end

local function with_tree(state, cb)
  daemon.request("session/turns", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not read the turns: " .. err.message)
      return
    end
    cb(tree.build(result.turns or {}, state.head, compat.value(state.session.pinned)))
  end)
end

-- A turn of the current session's tree, picked by the user for `what` ("branch", "fork"):
-- then(state, turn_id), turn_id nil for before the first turn.
local function pick_turn(what, prompt, then_)
  local state = need_current(what)
  if not state then
    return
  end
  with_daemon(function()
    with_tree(state, function(entries)
      ui.select(entries, {
        prompt = prompt .. " (● current path, ○ left branch)",
        kind = "trellisd." .. what,
        format_item = function(e)
          return e.line
        end,
      }, function(choice)
        if choice then
          then_(state, choice.turn and choice.turn.turnId)
        end
      end)
    end)
  end)
end

-- :TrellisBranch
function M.branch()
  pick_turn("branch", "Branch from which turn?", function(state, turn_id)
    branch_to(state, turn_id, function()
      show(state)
    end)
  end)
end

local function paint_tree(state, buf, entries)
  local lines =
    {
      "# Turns of " .. format.title(state),
      tree.LEGEND,
      "<CR> on a turn branches from it, f forks from it, F after one of its steps, p pins it",
      "",
    }
  local offset = #lines
  for _, l in ipairs(tree.lines(entries)) do
    lines[#lines + 1] = l
  end
  tree_buffers[buf] = { id = state.id, entries = entries, offset = offset }
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

-- The scratch buffer named `name` (made, with `filetype`, the first time); true when new.
local function scratch(name, filetype)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b, false
    end
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf, true
end

-- :TrellisTree
function M.tree()
  local state = need_current("show")
  if not state then
    return
  end
  with_daemon(function()
    with_tree(state, function(entries)
      local buf, new = scratch("trellis://" .. state.id .. "/tree", "trellistree")
      if new then
        vim.keymap.set("n", "<CR>", function()
          M.branch_at_cursor(buf)
        end, { buffer = buf, desc = "Branch from the turn under the cursor" })
        vim.keymap.set("n", "f", function()
          M.fork_at_cursor(buf)
        end, { buffer = buf, desc = "Fork a new session from the turn under the cursor" })
        vim.keymap.set("n", "F", function()
          M.fork_step_at_cursor(buf)
        end, { buffer = buf, desc = "Fork a new session after a step of the turn under the cursor" })
        vim.keymap.set("n", "p", function()
          M.pin_at_cursor(buf)
        end, { buffer = buf, desc = "Pin or unpin the turn under the cursor" })
      end
      paint_tree(state, buf, entries)
      show_buffer(buf, "horizontal")
    end)
  end)
end

-- The session of a tree buffer and the entry under the cursor, or nil.
local function entry_at_cursor(buf)
  local info = tree_buffers[buf]
  if not info then
    return nil
  end
  local entry = info.entries[vim.api.nvim_win_get_cursor(0)[1] - info.offset]
  local state = M.open[info.id]
  if entry and state then
    return state, entry
  end
end

function M.branch_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state then
    return
  end
  branch_to(state, entry.turn and entry.turn.turnId, function()
    with_tree(state, function(entries)
      if vim.api.nvim_buf_is_valid(buf) then
        paint_tree(state, buf, entries)
      end
    end)
  end)
end

-- The session's life: fork, rename, delete, export, import.

-- Fork the session at turn_id (nil: before the first turn): a new session whose history is
-- the path to that turn, opened in its own buffer; the origin is left as it was.
-- With `step`, the fork's copy of the turn keeps only its first `step` steps.
local function fork_at(state, turn_id, step)
  daemon.request(
    "session/fork",
    { sessionId = state.id, turnId = turn_id or vim.NIL, step = step },
    function(err, fork)
      if err then
        ui.error("could not fork: " .. err.message)
        return
      end
      reopen(fork.sessionId, function(forked)
        show(forked)
        ui.notify("forked into a new session: " .. format.title(forked.session))
      end)
    end
  )
end

-- :TrellisFork
function M.fork()
  pick_turn("fork", "Fork a new session from which turn?", fork_at)
end

function M.fork_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if state then
    fork_at(state, entry.turn and entry.turn.turnId)
  end
end

-- F in the tree: pick a step of the turn under the cursor, and fork after it.
function M.fork_step_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state or not entry.turn then
    return
  end
  fork_step.pick(entry.turn, function(step)
    fork_at(state, entry.turn.turnId, step)
  end)
end

-- p in the tree: pin the turn under the cursor, or unpin it; the tree marks pinned turns.
function M.pin_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state or not entry.turn then
    return
  end
  pins.toggle(state, entry.turn, function()
    with_tree(state, function(entries)
      if vim.api.nvim_buf_is_valid(buf) then
        paint_tree(state, buf, entries)
      end
    end)
  end, M.offer_takeover)
end

-- :TrellisRename [title]
function M.rename(title)
  local state = need_current("rename")
  if not state then
    return
  end
  if title == nil or title:match("^%s*$") then
    ui.input({ prompt = "New title: ", default = state.title }, function(text)
      if text and not text:match("^%s*$") then
        M.rename(text)
      end
    end)
    return
  end
  title = vim.trim(title)
  with_daemon(function()
    daemon.request("session/rename", { sessionId = state.id, title = title }, function(err, session)
      if err then
        ui.error("could not rename the session: " .. err.message)
        return
      end
      state.title = type(session) == "table" and compat.value(session.title) or title
      state.session.title = state.title
      paint_header(state)
      ui.notify("renamed: " .. state.title)
      redraw_status()
    end)
  end)
end

local function forget(id)
  local state = M.open[id]
  M.open[id] = nil
  if M.current == id then
    M.current = nil
  end
  if state and state.view and state.view:valid() then
    pcall(vim.api.nvim_buf_delete, state.view.buf, { force = true })
  end
end

-- :TrellisDelete: pick a session (the open one first), confirm, delete it for good.
function M.delete()
  local current = M.current_state()
  pick_from_list({ limit = 100 }, "Delete which session?", "trellisd.session", function(choice)
    local state = M.open[choice.sessionId]
    if state and state.running then
      ui.warn("a turn of that session is running: :TrellisCancel it before you delete it")
      return
    end
    local title = format.title(choice)
    ui.select({ "Delete it", "Keep it" }, {
      prompt = "Delete “" .. title .. "” and all its turns for good? (its forks are kept)",
      kind = "trellisd.confirm",
    }, function(_, index)
      if index ~= 1 then
        return
      end
      daemon.request("session/delete", { sessionId = choice.sessionId }, function(err)
        if err then
          ui.error("could not delete the session: " .. err.message)
          return
        end
        forget(choice.sessionId)
        ui.notify("deleted: " .. title)
        redraw_status()
      end)
    end)
  end, current and current.id)
end

local GRANT_SCOPES = { session = "this session", project = "this project", policy = "its policy" }

--- One line for a remembered approval: what it allows and where it is kept.
function M.grant_label(grant)
  local scope = compat.value(grant.scope) or "session"
  return tostring(grant.kind)
    .. " "
    .. format.one_line(tostring(grant.target), 100)
    .. " · "
    .. (GRANT_SCOPES[scope] or scope)
end

-- :TrellisGrants: the remembered approvals of the session (session/policy's grants); pick
-- one to revoke it (session/revoke), after a confirmation.
function M.grants()
  local state = need_current("show the grants of")
  if not state then
    return
  end
  with_daemon(function()
    daemon.request("session/policy", { sessionId = state.id }, function(err, policy)
      if err then
        ui.error("could not read the session's policy: " .. err.message)
        return
      end
      local grants = type(policy) == "table" and compat.value(policy.grants) or {}
      if #grants == 0 then
        ui.notify("no remembered approvals: “allow always” answers are kept here")
        return
      end
      local labels = {}
      for i, grant in ipairs(grants) do
        labels[i] = M.grant_label(grant)
      end
      ui.select(
        labels,
        { prompt = "Remembered approvals (pick one to revoke)", kind = "trellisd.grants" },
        function(grant, index)
          if not index then
            return
          end
          grant = grants[index]
          if compat.value(grant.scope) == "policy" then
            ui.warn("that grant came with the session's policy; open a session with another")
            return
          end
          ui.select({ "Revoke it", "Keep it" }, {
            prompt = "Revoke " .. labels[index] .. "? It will be asked again.",
            kind = "trellisd.confirm",
          }, function(_, answer)
            if answer ~= 1 then
              return
            end
            local revoked = { kind = grant.kind, target = grant.target, scope = grant.scope }
            daemon.request(
              "session/revoke",
              { sessionId = state.id, grant = revoked },
              function(failed)
                if failed then
                  ui.error("could not revoke: " .. failed.message)
                  return
                end
                ui.notify("revoked: " .. labels[index])
              end
            )
          end)
        end
      )
    end)
  end)
end

local function absolute(path)
  return vim.fn.fnamemodify(vim.fn.expand(vim.trim(path)), ":p")
end

-- :TrellisExport [path]
function M.export(path)
  local state = need_current("export")
  if not state then
    return
  end
  if path == nil or path:match("^%s*$") then
    local default = vim.fn.getcwd() .. "/" .. format.export_name(state.session)
    ui.input(
      { prompt = "Export the session to: ", default = default, completion = "file" },
      function(text)
        if text and not text:match("^%s*$") then
          M.export(text)
        end
      end
    )
    return
  end
  with_daemon(function()
    daemon.request(
      "session/export",
      { sessionId = state.id, path = absolute(path) },
      function(err, result)
        if err then
          ui.error("could not export the session: " .. err.message)
          return
        end
        local turns = format.count(compat.value(result.turns) or 0, "turn", "turns")
        ui.notify(
          "exported " .. turns .. " (" .. tostring(result.bytes) .. " bytes) to " .. result.path
        )
      end
    )
  end)
end

-- :TrellisImport [path]: import a session from a file and open it. A session the store
-- already has can be imported as a copy, with new ids.
function M.import(path)
  if path == nil or path:match("^%s*$") then
    ui.input({ prompt = "Import a session from: ", completion = "file" }, function(text)
      if text and not text:match("^%s*$") then
        M.import(text)
      end
    end)
    return
  end
  local file = absolute(path)
  local function import(as_new)
    local params = { path = file }
    if as_new then
      params.asNew = true
    end
    daemon.request("session/import", params, function(err, session)
      if err and err.code == Connection.CONFLICT and not as_new then
        ui.select({ "Import it as a copy", "Leave it" }, {
          prompt = err.message .. ". Import it as a copy, with new ids?",
          kind = "trellisd.confirm",
        }, function(_, index)
          if index == 1 then
            import(true)
          end
        end)
        return
      elseif err then
        ui.error("could not import the session: " .. err.message)
        return
      end
      reopen(session.sessionId, function(state)
        show(state)
        ui.notify("imported: " .. format.title(state.session))
      end)
    end)
  end
  with_daemon(function()
    import(false)
  end)
end

-- :TrellisLog
--- The lines of a change list (turn/changes): each file's diff, or a line for a binary or
--- too large file, whose content is not kept.
local function change_lines(files)
  local lines = {}
  for _, f in ipairs(files) do
    if f.diff ~= "" then
      vim.list_extend(lines, vim.split(f.diff:gsub("\n$", ""), "\n", { plain = true }))
    else
      local why = f.binary and "binary" or "too large to keep"
      table.insert(lines, "# " .. f.path .. " " .. f.status .. " (" .. why .. ")")
    end
  end
  if #lines == 0 then
    lines = { "# the turn changed no file" }
  end
  return lines
end

local function revert(state, turn_id, force)
  daemon.request("turn/revert", { turnId = turn_id, force = force }, function(err, result)
    if err and not force and err.code == Connection.CONFLICT and err.data then
      local paths = type(err.data.paths) == "table" and err.data.paths or {}
      ui.select({ "Overwrite them", "Cancel the revert" }, {
        prompt = "changed since the agent wrote them: " .. table.concat(paths, ", "),
        kind = "trellisd.restore",
      }, function(_, index)
        if index == 1 then
          revert(state, turn_id, true)
        end
      end)
      return
    end
    if err then
      ui.error("could not revert: " .. err.message)
      return
    end
    vim.cmd("checktime") -- buffers of reverted files reload
    ui.notify("reverted: " .. #result.restored .. " file(s) put back")
  end)
end

-- :TrellisChanges
function M.changes()
  local state = need_current("show the changes of")
  if not state then
    return
  end
  local turn_id = state.head
  if not turn_id or turn_id == vim.NIL then
    ui.warn("the conversation has no turn yet")
    return
  end
  with_daemon(function()
    daemon.request("turn/changes", { turnId = turn_id }, function(err, result)
      if err then
        ui.error("could not read the changes: " .. err.message)
        return
      end
      local buf = scratch("trellis://" .. state.id .. "/changes", "diff")
      vim.keymap.set("n", "R", function()
        revert(state, turn_id, false)
      end, { buffer = buf, desc = "Revert this turn's changes" })
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, change_lines(result.files or {}))
      vim.bo[buf].modifiable = false
      show_buffer(buf, "horizontal")
    end)
  end)
end

-- The lines of :TrellisTools: every tool the model sees, then the MCP servers.
local function tool_lines(result)
  local lines = { "# tools: name · source · kind · policy" }
  for _, t in ipairs(result.tools or {}) do
    local source = t.source == "mcp" and ("mcp " .. tostring(t.server)) or t.source
    local line = table.concat({ t.name, source, t.kind, t.policy }, " · ")
    if t.target and t.target ~= vim.NIL then
      line = line .. " · " .. t.target
    end
    table.insert(lines, line)
  end
  table.insert(lines, "")
  table.insert(lines, "# MCP servers: name · source · transport · state")
  if #(result.servers or {}) == 0 then
    table.insert(lines, "(none)")
  end
  for _, s in ipairs(result.servers or {}) do
    local line = table.concat({ s.name, s.source, s.transport, s.state }, " · ")
    line = line .. " · " .. s.tools .. " tool(s)"
    if s.skipped and s.skipped ~= vim.NIL then
      line = line .. " (" .. s.skipped .. " left out)"
    end
    line = line .. " · " .. tostring(compat.value(s.commandLine) or compat.value(s.url) or "")
    table.insert(lines, line)
    if s.error and s.error ~= vim.NIL then
      table.insert(lines, "  " .. format.one_line(tostring(s.error), 200))
    end
  end
  return lines
end

-- :TrellisTools
function M.tools()
  local state = need_current("list the tools of")
  if not state then
    return
  end
  with_daemon(function()
    daemon.request("session/tools", { sessionId = state.id }, function(err, result)
      if err then
        ui.error("could not list the tools: " .. err.message)
        return
      end
      local buf = scratch("trellis://" .. state.id .. "/tools")
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, tool_lines(result))
      vim.bo[buf].modifiable = false
      show_buffer(buf, "horizontal")
    end)
  end)
end

function M.open_log()
  local path = daemon.log_path()
  if vim.fn.filereadable(path) == 0 then
    ui.notify("there is no log yet: the daemon has not been started (" .. path .. ")")
    return
  end
  vim.cmd("botright split " .. vim.fn.fnameescape(path))
  vim.bo.autoread = true
  vim.cmd("normal! G")
end

function M.statusline()
  if daemon.state == "starting" then
    return "trellis: starting"
  end
  local state = M.current_state()
  local run = state and state.running
  if not run then
    local spend = state and state.budget and queue.spend_text(state)
    return "trellis: idle" .. (spend and (" · " .. spend) or "")
  end
  if run.approval then
    return "trellis: approval needed"
  end
  if run.call then
    return "trellis: running " .. run.call
  end
  local text = "trellis: streaming " .. run.tokens .. " tok"
  if run.steers > 0 then
    text = text .. ", " .. format.count(run.steers, "steer", "steers") .. " queued"
  end
  if #state.waiting > 0 then
    text = text .. ", " .. format.count(#state.waiting, "prompt", "prompts") .. " waiting"
  end
  if queue.count(state) > 0 then
    text = text .. ", " .. format.count(queue.count(state), "prompt", "prompts") .. " queued"
  end
  return text
end

-- What the daemon sends.

local notifications = {}

-- A turn another window started in a session open here: the session is reopened, which
-- draws the turn as far as it has streamed (the notifications that came meanwhile are in
-- that text), and the turn is followed from there. The current session stays current.
local function catch_up(state)
  if state.catching_up then
    return
  end
  state.catching_up = true
  local current = M.current
  daemon.request("session/reopen", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    state.catching_up = nil
    if err then
      return
    end
    adopt(result)
    state.cursor = compat.value(result.historyCursor)
    M.current = current
    local live = compat.value(result.running)
    if live and not state.running then
      follow(state, result.history or {}, live)
    end
  end)
end

notifications["session/token"] = function(p)
  local state = M.open[p.sessionId]
  local run = state and state.running
  if state and not run then
    catch_up(state)
  end
  if not run or (run.followed and p.turnId ~= run.turnId) then
    return
  end
  run.turnId = p.turnId
  if run.step ~= nil and p.step ~= run.step then
    state.view:paragraph()
  end
  run.step = p.step
  run.tokens = run.tokens + 1
  state.view:stream(p.text)
  if run.tokens % 25 == 1 then
    redraw_status()
  end
end

notifications["session/step"] = function(p)
  local state = M.open[p.sessionId]
  if not state then
    return
  end
  local run = state.running
  if not run then
    catch_up(state)
    return
  elseif run.followed and run.turnId ~= p.turnId then
    return
  end
  local call = compat.value(p.toolCall)
  if p.decision == "tool" and call then
    local lines = format.tool_lines(call, p.result)
    if run.calls and run.calls[call.id] then
      table.remove(lines, 1) -- the call is drawn already, as it happened
    end
    state.view:block(lines)
    check_written(state, call)
  end
end

-- A turn of a session followed here ended, whichever window started it: a turn this
-- window follows gets its footer (outcome, tokens, cost) from it; one it started ends with
-- its own session/turn answer.
notifications["session/turnEnded"] = function(p)
  local state = M.open[p.sessionId]
  local run = state and state.running
  if not run or not run.followed or run.turnId ~= p.turnId then
    return
  end
  state.running = nil
  -- the model is the one the turn was drawn with (session/turnEnded does not repeat it)
  state.view:block({ format.footer(vim.tbl_extend("force", p, { model = run.model })) })
  state.head = p.turnId
  redraw_status()
  local killed = compat.value(p.recovery)
  if type(killed) == "table" then
    M.offer_recovery(state, recovery.pending(p, killed))
  end
  M.send_waiting(state)
end

-- The turn a live notification belongs to, when it is drawn here.
local function live_run(p)
  local state = M.open[p.sessionId]
  local run = state and state.running
  if not run or (run.followed and p.turnId ~= run.turnId) then
    return nil
  end
  return state, run
end

notifications["session/toolCall"] = function(p)
  local state, run = live_run(p)
  if not state then
    return
  end
  run.calls = run.calls or {}
  run.calls[p.callId] = p.status
  run.call = p.status == "running" and p.tool or nil
  state.view:block({ format.call_status(p.tool, p.arguments, p.status) })
  run.output_at_start = true
  redraw_status()
end

notifications["session/toolOutput"] = function(p)
  local state, run = live_run(p)
  if not state then
    return
  end
  local text
  text, run.output_at_start = format.output(p.text, run.output_at_start ~= false)
  state.view:stream(text)
end

notifications["session/usage"] = function(p)
  local state = M.open[p.sessionId]
  if not state then
    return
  end
  state.usage = p
  paint_header(state)
  redraw_status()
end

notifications["session/steered"] = function(p)
  local state = M.open[p.sessionId]
  if not state then
    return
  end
  local run = state.running
  if run then
    run.steers = math.max(0, run.steers - 1)
  end
  if p.delivered == false then
    state.view:block(quote("> steer not delivered, the turn ended first: ", p.text))
    ui.warn("your steer was not delivered: the turn ended before the model saw it")
  else
    local step = compat.value(p.step)
    state.view:block(
      quote("> steer" .. (step and (" (step " .. step .. ")") or "") .. ": ", p.text)
    )
  end
  redraw_status()
end

notifications["session/queued"] = function(p)
  local state = M.open[p.sessionId]
  if state then
    queue.queued(state, p)
    redraw_status()
  end
end

notifications["session/dequeued"] = function(p)
  local state = M.open[p.sessionId]
  local run = state and queue.dequeued(state, p)
  if run then
    M.start_queued(state, run)
  end
  redraw_status()
end

notifications["window/showMessage"] = function(p)
  local levels =
    { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }
  ui.notify(tostring(p.message), levels[p.type] or vim.log.levels.INFO)
end

notifications["window/logMessage"] = function(p)
  daemon.log("[daemon] " .. tostring(p.message))
end

local requests = {}

local DECISIONS = {
  { label = "Allow once", decision = "allow", said = "allowed once" },
  {
    label = "Allow always (this session)",
    decision = "allowAlways",
    said = "allowed always for this session",
  },
  {
    label = "Allow always (this project)",
    decision = "allowAlwaysProject",
    said = "allowed always for every session of this project",
  },
  { label = "Deny", decision = "deny", said = "denied" },
}
local DENY = #DECISIONS

--- A floating window beside the approval question showing what a write would change
--- (`diff`, a unified diff) with the `diff` filetype; nil when there is nothing to show.
local function show_diff(diff)
  if type(diff) ~= "string" or diff == "" then
    return nil
  end
  local lines = vim.split(diff, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].filetype = "diff"
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  local width = math.max(20, math.min(vim.o.columns - 4, 100))
  local height = math.max(1, math.min(#lines, vim.o.lines - 6))
  return vim.api.nvim_open_win(buf, false, {
    relative = "editor",
    row = 1,
    col = math.max(0, vim.o.columns - width - 2),
    width = width,
    height = height,
    style = "minimal",
    border = "single",
  })
end

local function close_diff(win)
  if win and vim.api.nvim_win_is_valid(win) then
    vim.api.nvim_win_close(win, true)
  end
end

requests["session/requestApproval"] = function(p, reply, request)
  local state = M.open[p.sessionId]
  local run = state and state.running
  local tool = tostring(compat.value(p.tool) or "?")
  local args = format.arguments(p.arguments, 100)
  local summary = compat.value(p.summary)
  local mcp = compat.value(p.mcp)
  local mcp_line = nil
  if type(mcp) == "table" and mcp.start then
    mcp_line = "start MCP server " .. tostring(mcp.server) .. ": " .. tostring(mcp.start)
  elseif type(mcp) == "table" then
    mcp_line = "MCP server " .. tostring(mcp.server) .. ", tool " .. tostring(mcp.tool)
  end
  if state then
    local lines = { "> approval asked: " .. format.call(tool, p.arguments, 100) }
    if mcp_line then
      table.insert(lines, "> " .. format.one_line(mcp_line, 300))
    end
    if summary and summary ~= "" then
      vim.list_extend(lines, quote("> ", summary))
    end
    state.view:block(lines)
  end
  if run then
    run.approval = true
  end
  redraw_status()
  local labels = {}
  for i, d in ipairs(DECISIONS) do
    labels[i] = d.label
  end
  local prompt = "trellisd asks to run " .. tool .. " " .. args
  if mcp_line then
    prompt = "trellisd asks to " .. (mcp.start and "" or "call ") .. mcp_line .. " " .. args
  end
  if summary and summary ~= "" then
    prompt = prompt .. " (" .. format.one_line(summary, 120) .. ")"
  end
  local diff_win = show_diff(compat.value(p.diff))
  -- A question another window answered first (or the turn stopped waiting for) is closed:
  -- the window a picker opened for it, if it is still open.
  local before, opened = vim.api.nvim_get_current_win(), nil
  request.on_withdraw = function()
    close_diff(diff_win)
    if run then
      run.approval = false
    end
    if state then
      state.view:block({
        "> approval withdrawn: answered in another window, or the turn stopped waiting",
      })
    end
    if opened and opened ~= before and opened ~= diff_win and vim.api.nvim_win_is_valid(opened) then
      pcall(vim.api.nvim_win_close, opened, true)
    end
    redraw_status()
  end
  ui.select(labels, { prompt = prompt, kind = "trellisd.approval" }, function(_, index)
    close_diff(diff_win)
    if request.withdrawn then
      return
    end
    local choice = DECISIONS[index] or DECISIONS[DENY]
    reply({ decision = choice.decision })
    if run then
      run.approval = false
    end
    if state then
      state.view:block({ "> " .. choice.said })
    end
    redraw_status()
  end)
  opened = vim.api.nvim_get_current_win()
end

daemon.handlers.notifications = notifications
daemon.handlers.requests = requests
daemon.handlers.on_exit = function()
  redraw_status()
end

return M
