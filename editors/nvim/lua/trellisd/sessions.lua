-- The sessions this editor has open: their states (M.open), the one commands act on
-- (M.current), and what every feature does with a session: adopt what the daemon says of
-- it, draw its conversation buffer (trellisd.view), show that buffer, ask the decisions
-- that block it (a takeover, a recovery). The features are modules of their own: opening
-- (open, reopen, pick), turn and follow (running turns), controls, branching, lifecycle,
-- changes, grants, tools, status, events and approvals (what the daemon sends).

local compat = require("trellisd.compat")
local config = require("trellisd.config")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local images = require("trellisd.images")
local lineage = require("trellisd.lineage")
local paging = require("trellisd.paging")
local plan = require("trellisd.plan")
local queue = require("trellisd.queue")
local recovery = require("trellisd.recovery")
local thoughts = require("trellisd.thoughts")
local ui = require("trellisd.ui")
local View = require("trellisd.view")
local windows = require("trellisd.windows")

local M = {}

---@type table<trellisd.Id, trellisd.State>
M.open = {} -- sessionId -> state
---@type trellisd.Id|nil
M.current = nil -- the sessionId commands act on

--- The state of an open session, or nil.
---@param id trellisd.Id
---@return trellisd.State|nil
function M.state(id)
  return M.open[id]
end

--- The state of the session commands act on, or nil.
---@return trellisd.State|nil
function M.current_state()
  return M.current and M.open[M.current] or nil
end

--- The current session's state, or nil after telling the user there is none to `what`.
---@param what string what the command would do ("steer", "rename", ...)
---@return trellisd.State|nil
function M.need_current(what)
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

--- The titles of the sessions open here, by id (to name another session in a message).
---@return table<string, string>
function M.names()
  local names = {}
  for id, state in pairs(M.open) do
    names[id] = state.title
  end
  return names
end

--- Whether a prompt over the folder `root` may go to this session: it works over it, or it
--- works over the same folder of its own worktree of the checkout `root` is in.
---@param state trellisd.State
---@param root string
---@return boolean
function M.works_over(state, root)
  if state.root == root then
    return true
  end
  local wt = state.session and compat.value(state.session.worktree)
  if type(wt) ~= "table" or type(state.root) ~= "string" then
    return false
  end
  local inside = state.root == wt.path and "" or nil
  if state.root:sub(1, #wt.path + 1) == wt.path .. "/" then
    inside = state.root:sub(#wt.path + 1)
  end
  return inside ~= nil and wt.checkout .. inside == root
end

--- A restore (a revert, a branch restoring files) refused with -32020 over files it would
--- overwrite: ask whether to force it, naming the files another session's command may have
--- changed at the same time and those a person changed. False when `err` is no such refusal.
---@param err trellisd.Error|nil
---@param leave string the other choice's label ("Cancel the revert", ...)
---@param on_overwrite fun()
---@return boolean
function M.ask_restore(err, leave, on_overwrite)
  local data = err and compat.value(err.data)
  local paths = type(data) == "table" and compat.value(data.paths) or nil
  if not err or err.code ~= Connection.CONFLICT or type(paths) ~= "table" then
    return false
  end
  ui.ask_overwrite(paths, leave, on_overwrite, nil, format.restore_conflict(data, M.names()))
  return true
end

--- The lines of the session's header: the title, where a fork came from, the usage, the
--- walls, the approval mode, the newest plan.
---@param state trellisd.State
---@return string[]
function M.header(state)
  return View.header(state.session, state.lineage, state.usage, state.walls, state.mode, state.plan)
end

-- Whether the header holds more than what the history's first drawing puts there.
local function header_grows(state)
  return state.usage or state.walls or state.mode or state.plan
end

--- Paint the buffer's header again (the title, where a fork came from, the usage, the
--- walls, the mode, the plan). The turns are not touched: their drawing with every step's
--- text still comes.
---@param state trellisd.State
function M.paint_header(state)
  if state.view and state.view:valid() then
    local painted = state.painted
    local untouched = painted and painted.view == state.view and painted.writes == state.view.writes
    state.view:set_header(M.header(state))
    if untouched then
      painted.writes = state.view.writes
    end
  end
end

--- Make (or refresh) the local state of a session from a Session the daemon sent; the
--- session becomes the current one.
---@param session trellisd.Session
---@return trellisd.State
function M.adopt(session)
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
    -- the header says it once the origin is looked up
    lineage.describe(session, function(text)
      if state.session == session then
        state.lineage = text
        M.paint_header(state)
      end
    end)
  else
    state.lineage = format.lineage(session)
  end
  if state.view == nil or not state.view:valid() then
    state.view = View.new("trellis://" .. id, config.options.flush_ms)
    vim.keymap.set("n", "[[", function()
      paging.load_earlier(state)
    end, { buffer = state.view.buf, desc = "Load the turns before those shown" })
    -- (required when pressed: the commands' modules require this one)
    vim.keymap.set("n", "gP", function()
      M.current = id
      require("trellisd").plan_mode()
    end, { buffer = state.view.buf, desc = "Plan mode on, or back to the mode before" })
    vim.keymap.set("n", plan.RUN_KEY, function()
      M.current = id
      require("trellisd").run_plan()
    end, { buffer = state.view.buf, desc = "Run the plan of the planned turn under the cursor" })
    vim.keymap.set("n", images.OPEN_KEY, function()
      local sha = images.at_line(vim.api.nvim_get_current_line())
      if sha then
        images.open(id, sha)
      else
        ui.warn("the cursor is on no image of a turn")
      end
    end, { buffer = state.view.buf, desc = "Open the image under the cursor" })
    thoughts.folding(state.view.buf)
  end
  M.current = id
  return state
end

--- Draw the conversation from its history: `turns`, its newest page (state.cursor leads to
--- the page before); `live`: the id of a turn still running. The newest plan of those turns
--- goes in the header. Once the steps of the turns are read, they are drawn again with
--- every step's text, unless something was painted since.
---@param state trellisd.State
---@param turns trellisd.Turn[]
---@param live? trellisd.Id
function M.render(state, turns, live)
  local names = state.view.names
  local lines, marks =
    View.history_lines(state.session, turns, live, state.lineage, state.cursor ~= nil, names)
  -- the plan of a turn followed here is the newest, from its notifications
  local run = state.running
  if not (state.plan and run and state.plan.turnId == run.turnId) then
    state.plan = plan.newest(turns, names)
  end
  state.view:render(lines, marks)
  state.view.header_count = #View.header(state.session, state.lineage)
  if header_grows(state) then
    state.view:set_header(M.header(state))
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
      local earlier = state.cursor ~= nil
      view:render(
        View.history_lines(state.session, turns, live, state.lineage, earlier, view.names)
      )
      view.header_count = #View.header(state.session, state.lineage)
      if header_grows(state) then
        view:set_header(M.header(state))
      end
      painted.writes = view.writes
    end
  end)
end

--- Show the session's conversation, the cursor on its last line.
---@param state trellisd.State
function M.show(state)
  windows.show_buffer(state.view.buf)
  local count = vim.api.nvim_buf_line_count(state.view.buf)
  vim.api.nvim_win_set_cursor(0, { count, 0 })
end

--- Forget a session (deleted): its state and its buffer.
---@param id trellisd.Id
function M.forget(id)
  local state = M.open[id]
  M.open[id] = nil
  if M.current == id then
    M.current = nil
  end
  if state and state.view and state.view:valid() then
    pcall(vim.api.nvim_buf_delete, state.view.buf, { force = true })
  end
end

--- Ask keep or revert about a command killed mid-run; the answer goes to session/recover.
--- Asked once at a time per session.
---@param state trellisd.State
---@param pending trellisd.Recovery|nil
function M.offer_recovery(state, pending)
  if type(pending) ~= "table" or state.asking_recovery then
    return
  end
  state.asking_recovery = true
  recovery.offer(state, pending, function(session)
    state.asking_recovery = nil
    if session then
      M.adopt(session)
      ui.redraw_status()
    end
  end)
end

--- Another daemon (another editor) writes this session: offer to take it over, then retry.
---@param state trellisd.State
---@param err trellisd.Error the refusal (its data names the owner's pid)
---@param retry fun() what to do again once the session is taken over
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
      M.adopt(session)
      retry()
    end)
  end)
end

return M
