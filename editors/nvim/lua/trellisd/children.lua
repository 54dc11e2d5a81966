-- Child sessions: the sessions a turn's `task` calls start (protocol/tools.md, "The task
-- tool"). Every window following the parent is told of a child's tokens, steps, tool calls
-- and end under the CHILD's sessionId, and is asked its approvals. This module finds the
-- parent such a notification belongs to (session/list {parentSessionId}), draws each child
-- under its `task` call in the parent's conversation (started, a line of progress with its
-- streamed text, its outcome and reply), names the child in its approvals, and opens a
-- child as an ordinary session (:TrellisChildren).

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

---@class trellisd.TaskCall a `task` call of a running turn, as session/toolCall told it
---@field callId string
---@field prompt string
---@field child? trellisd.Id the child session it started, once known

---@class trellisd.Child a child session drawn under its parent here
---@field id trellisd.Id
---@field parent trellisd.Id
---@field prompt string
---@field title string
---@field text string what the child said so far (its current step's text)
---@field outcome? string how its turn ended; nil while it runs
---@field mark? integer the extmark of its line of progress in the parent's buffer

---@type table<trellisd.Id, trellisd.Child>
M.known = {} -- child sessionId -> its record
-- sessionId -> the notifications held while its parent is looked up
local held = {}
-- sessionId -> what waits for the look-up to end (an approval to ask)
local waiters = {}
-- sessionId -> true: followed here, but no child of a session open here
local foreign = {}

local NS = vim.api.nvim_create_namespace("trellisd.children")
local PROGRESS = 60 -- how much of a child's streamed text its line of progress shows

-- session/toolCall of a `task` call in a session open here: remember its prompt, in order.
local function note_task_call(p)
  local state = sessions.open[p.sessionId]
  local run = state and state.running
  if not run or p.tool ~= "task" then
    return
  end
  run.tasks = run.tasks or {}
  for _, t in ipairs(run.tasks) do
    if t.callId == p.callId then
      return
    end
  end
  local args = compat.value(p.arguments)
  local prompt = type(args) == "table" and compat.value(args.prompt) or nil
  table.insert(run.tasks, { callId = p.callId, prompt = tostring(prompt or "") })
end

-- The `task` call of `run` a child titled `title` answers: the first one not matched yet
-- whose prompt the title begins, else the first one not matched yet.
local function match_call(run, title)
  local free = nil
  for _, t in ipairs(run.tasks or {}) do
    if not t.child then
      free = free or t
      if title ~= "" and t.prompt:sub(1, #title) == title then
        return t
      end
    end
  end
  return free
end

-- The child's name in a line: its title, or (before it has one) its prompt.
local function name(child)
  return "“" .. format.one_line(child.title ~= "" and child.title or child.prompt, 60) .. "”"
end

-- Show the child's line of progress: "⋯ <the end of what it streamed>", or its outcome.
local function paint_progress(child)
  local state = sessions.open[child.parent]
  if not child.mark or not state or not state.view:valid() then
    return
  end
  local pos = vim.api.nvim_buf_get_extmark_by_id(state.view.buf, NS, child.mark, {})
  if not pos or pos[1] == nil then
    return
  end
  local text = format.one_line(child.text, 1000)
  local chars = vim.fn.strchars(text)
  if chars > PROGRESS then
    text = "…" .. vim.fn.strcharpart(text, chars - PROGRESS)
  end
  vim.api.nvim_buf_set_extmark(state.view.buf, NS, pos[1], 0, {
    id = child.mark,
    virt_text = { { "⋯ " .. text, "Comment" } },
    virt_text_pos = "eol",
  })
end

-- The child is known: draw its start under the parent's `task` call.
local function started(parent_state, child)
  local view = parent_state.view
  view:block({
    "> child session " .. name(child) .. " running (:TrellisChildren opens it)",
  })
  if view:valid() then
    local last = vim.api.nvim_buf_line_count(view.buf) - 1
    child.mark = vim.api.nvim_buf_set_extmark(view.buf, NS, last, 0, {})
  end
  ui.redraw_status()
end

-- What a notification of a known child changes of its record and its parent's view.
local function apply(child, method, p)
  local state = sessions.open[child.parent]
  if method == "session/token" then
    if child.step ~= p.step then
      child.text = ""
      child.step = p.step
    end
    child.text = child.text .. tostring(p.text or "")
    paint_progress(child)
  elseif method == "session/toolCall" then
    child.text = "`" .. tostring(p.tool) .. "` " .. tostring(p.status)
    paint_progress(child)
  elseif method == "session/turnEnded" and state and not child.outcome then
    child.outcome = tostring(p.outcome)
    local reply = compat.value(p.reply)
    if type(reply) ~= "string" or reply == "" then
      reply = child.text
    end
    local lines = {
      "> child session "
        .. name(child)
        .. " "
        .. child.outcome
        .. (compat.value(p.error) and (": " .. format.one_line(p.error, 200)) or ""),
    }
    if reply ~= "" then
      vim.list_extend(lines, format.quote(">   ", reply))
    end
    child.text = child.outcome
    paint_progress(child)
    state.view:block(lines)
  end
end

-- The open sessions whose running turn has a `task` call no child is known for.
local function candidates()
  local out = {}
  for id, state in pairs(sessions.open) do
    local run = state.running
    if run and match_call(run, "") then
      out[#out + 1] = id
    end
  end
  return out
end

-- Ask each candidate parent for its children; the one listing `id` adopts it, and the
-- notifications held for it are drawn. None listing it: they are not this window's.
local function resolve(id)
  local parents = candidates()
  local left = #parents
  local function finish()
    if not M.known[id] then
      foreign[id] = true
    end
    held[id] = nil
    local waiting = waiters[id] or {}
    waiters[id] = nil
    for _, cb in ipairs(waiting) do
      cb()
    end
  end
  local function done()
    left = left - 1
    if left <= 0 then
      finish()
    end
  end
  if left == 0 then
    finish()
    return
  end
  for _, parent in ipairs(parents) do
    daemon.request("session/list", { parentSessionId = parent, limit = 1000 }, function(err, result)
      local state = sessions.open[parent]
      local run = state and state.running
      if not err and run and not M.known[id] then
        for _, s in ipairs(result.sessions or {}) do
          if s.sessionId == id then
            local title = tostring(compat.value(s.title) or "")
            local call = match_call(run, title)
            local child = {
              id = id,
              parent = parent,
              prompt = call and call.prompt or title,
              title = title,
              text = "",
            }
            if call then
              call.child = id
            end
            M.known[id] = child
            started(state, child)
            for _, n in ipairs(held[id] or {}) do
              apply(child, n[1], n[2])
            end
            held[id] = nil
          end
        end
      end
      done()
    end)
  end
end

--- A notification (`method`, `p`) the daemon sent: the `task` calls of the sessions open
--- here are noted, and what a child session says is drawn under its parent. True when it
--- was a child's and is not to be drawn as the session's own (its session is not open here).
---@param method string
---@param p table
---@return boolean
function M.route(method, p)
  if method == "session/toolCall" then
    note_task_call(p)
  end
  local id = p.sessionId
  local child = M.known[id]
  if child then
    apply(child, method, p)
  elseif not sessions.open[id] and id ~= nil and not foreign[id] then
    if held[id] then
      table.insert(held[id], { method, p })
    else
      held[id] = { { method, p } }
      resolve(id)
    end
  end
  return sessions.open[id] == nil
end

--- Run cb once whether `id` is a child's session is known (at once when it is, or when it
--- is a session open here; else after its parent is looked up).
---@param id trellisd.Id
---@param cb fun()
function M.after(id, cb)
  if M.known[id] or sessions.open[id] or foreign[id] or id == nil then
    cb()
  elseif waiters[id] then
    table.insert(waiters[id], cb)
  else
    waiters[id] = { cb }
    if not held[id] then
      held[id] = {}
      resolve(id)
    end
  end
end

--- Who asks an approval: "child session “title” of “parent”" for a child's, else nil.
---@param id trellisd.Id the approval's sessionId
---@return string|nil
function M.asker(id)
  local child = M.known[id]
  if not child then
    return nil
  end
  local parent = sessions.open[child.parent]
  -- the parent's title, or (untitled while its first turn runs) that turn's prompt
  local of = parent and parent.title or ""
  if of == "" and parent and parent.running then
    of = parent.running.prompt or ""
  end
  return "child session "
    .. name(child)
    .. (of ~= "" and (" of “" .. format.one_line(of, 40) .. "”") or "")
end

--- The state an approval of a child session is said in: its parent's, when open here.
---@param id trellisd.Id
---@return trellisd.State|nil
function M.parent_state(id)
  local child = M.known[id]
  return child and sessions.open[child.parent] or nil
end

--- :TrellisChildren: pick one of the current session's child sessions (its `task` calls')
--- and open it as an ordinary session.
function M.pick()
  local state = sessions.need_current("list the child sessions of")
  if not state then
    return
  end
  local parent = state.id
  opening.pick_from_list(
    { parentSessionId = parent, limit = 1000 },
    "Open which child session of “" .. format.one_line(state.title or "", 40) .. "”?",
    "trellisd.session",
    function(choice)
      opening.reopen(choice.sessionId, sessions.show)
    end,
    nil,
    "this conversation has no child sessions: the model starts them with the task tool"
  )
end

return M
