-- What the daemon sends about the sessions open here, painted into their conversations:
-- the reply's tokens and the model's thoughts, each step (a tool's call and result), the
-- tool calls as they run and their output, a turn's plan (in the header's live spot), the
-- usage, steers delivered, prompts queued and dequeued, the output of the session's
-- processes, a followed turn's end, a mode changed in any window, and the daemon's messages. What a child session (a
-- `task` call's) says goes to trellisd.children first, drawn under its parent. M.wire hands
-- these (and the approval questions of trellisd.approvals) to trellisd.daemon.

local approvals = require("trellisd.approvals")
local children = require("trellisd.children")
local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local follow = require("trellisd.follow")
local format = require("trellisd.format")
local plan = require("trellisd.plan")
local planning = require("trellisd.planning")
local processes = require("trellisd.processes")
local queue = require("trellisd.queue")
local recovery = require("trellisd.recovery")
local sessions = require("trellisd.sessions")
local thoughts = require("trellisd.thoughts")
local turn = require("trellisd.turn")
local ui = require("trellisd.ui")
local walls = require("trellisd.walls")

local M = {}

-- The files a step wrote: buffers showing them are checked against the disk (:checktime),
-- so that they show what the model wrote ('autoread') or warn that the file changed.
local WRITERS = { write_file = true, edit_file = true }

local function check_written(state, call)
  local args = compat.value(call.arguments)
  local path = type(args) == "table" and compat.value(args.path) or nil
  if not WRITERS[call.name] or type(path) ~= "string" or path == "" then
    return
  end
  if path:sub(1, 1) ~= "/" then
    path = state.root .. "/" .. path
  end
  local written = compat.realpath(path)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if name ~= "" and vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
      if compat.realpath(name) == written then
        pcall(vim.cmd, "checktime " .. buf)
      end
    end
  end
end

-- The turn a live notification belongs to, when it is drawn here.
local function live_run(p)
  local state = sessions.open[p.sessionId]
  local run = state and state.running
  if not run or (run.followed and p.turnId ~= run.turnId) then
    return nil
  end
  return state, run
end

---@type table<string, fun(params: table)>
M.notifications = {}
local notifications = M.notifications

notifications["session/token"] = function(p)
  local state = sessions.open[p.sessionId]
  local run = state and state.running
  if state and not run then
    follow.catch_up(state)
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
    ui.redraw_status()
  end
end

notifications["session/thought"] = function(p)
  local state, run = live_run(p)
  if not state then
    return
  end
  run.turnId = p.turnId
  thoughts.stream(state.view, run, p.step, p.text)
end

notifications["session/step"] = function(p)
  local state = sessions.open[p.sessionId]
  if not state then
    return
  end
  processes.after_step(state, compat.value(p.toolCall))
  local run = state.running
  if not run then
    follow.catch_up(state)
    return
  elseif run.followed and run.turnId ~= p.turnId then
    return
  end
  local call = compat.value(p.toolCall)
  if p.decision == "tool" and call then
    local lines = format.tool_lines(call, p.result)
    if plan.refused_by_plan_mode(p.result) then
      lines[#lines] = plan.REFUSED_LINE -- said plainly: plan mode changes nothing
    end
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
  local state = sessions.open[p.sessionId]
  local run = state and state.running
  if not run or not run.followed or run.turnId ~= p.turnId then
    return
  end
  state.running = nil
  if run.plan then
    state.view:plan_mark(run.turnId, run.plan)
  end
  -- the model is the one the turn was drawn with (session/turnEnded does not repeat it)
  state.view:block({ format.footer(vim.tbl_extend("force", p, { model = run.model })) })
  state.head = p.turnId
  ui.redraw_status()
  walls.load(state) -- the mode, which another window may have set meanwhile
  local killed = compat.value(p.recovery)
  if type(killed) == "table" then
    sessions.offer_recovery(state, recovery.pending(p, killed))
  end
  turn.send_waiting(state)
end

-- The plan a turn keeps (its update_plan calls): the header's live spot shows it, in every
-- window that has the session open; the turn drawn here ends with its mark.
notifications["session/plan"] = function(p)
  local state = sessions.open[p.sessionId]
  if not state then
    return
  end
  local run = state.running
  local entries = compat.value(p.entries) or {}
  local name = state.view.names[p.turnId]
  if run and (run.turnId == nil or run.turnId == p.turnId) then
    run.turnId = p.turnId
    run.plan = { step = p.step, entries = entries }
    name = name or run.name or plan.turn_name(p.turnId, run.prompt)
  elseif not run then
    follow.catch_up(state)
  end
  name = name or plan.turn_name(p.turnId)
  state.plan = { turnId = p.turnId, name = name, entries = entries, step = p.step }
  state.view.names[p.turnId] = name
  sessions.paint_header(state)
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
  ui.redraw_status()
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
  local state = sessions.open[p.sessionId]
  if not state then
    return
  end
  state.usage = p
  sessions.paint_header(state)
  ui.redraw_status()
end

notifications["session/steered"] = function(p)
  local state = sessions.open[p.sessionId]
  if not state then
    return
  end
  local run = state.running
  if run then
    run.steers = math.max(0, run.steers - 1)
  end
  if p.delivered == false then
    state.view:block(format.quote("> steer not delivered, the turn ended first: ", p.text))
    ui.warn("your steer was not delivered: the turn ended before the model saw it")
  else
    local step = compat.value(p.step)
    state.view:block(
      format.quote("> steer" .. (step and (" (step " .. step .. ")") or "") .. ": ", p.text)
    )
  end
  ui.redraw_status()
end

notifications["session/queued"] = function(p)
  local state = sessions.open[p.sessionId]
  if state then
    queue.queued(state, p)
    ui.redraw_status()
  end
end

notifications["session/dequeued"] = function(p)
  local state = sessions.open[p.sessionId]
  local run = state and queue.dequeued(state, p)
  if run then
    turn.start_queued(state, run)
  end
  ui.redraw_status()
end

notifications["session/modeChanged"] = function(p)
  local state = sessions.open[p.sessionId]
  if state and type(p.approval) == "string" then
    planning.changed(state, p.approval)
  end
end

notifications["session/processOutput"] = function(p)
  processes.output(p.sessionId, p.processId, p.text)
end

notifications["session/processExited"] = function(p)
  processes.exited(p)
end

notifications["window/showMessage"] = function(p)
  local levels =
    { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }
  ui.notify(tostring(p.message), levels[p.type] or vim.log.levels.INFO)
end

notifications["window/logMessage"] = function(p)
  daemon.log("[daemon] " .. tostring(p.message))
end

-- The notifications a child session's turn sends to the windows following its parent.
local CHILD_METHODS = {
  "session/token",
  "session/step",
  "session/toolCall",
  "session/toolOutput",
  "session/usage",
  "session/turnEnded",
}

--- Hand the daemon's notifications and requests to these handlers, and redraw the
--- statuslines when the daemon exits. A child session's notifications are drawn under its
--- parent, and as the session's own only when it is open here.
function M.wire()
  local wired = {}
  for method, handler in pairs(M.notifications) do
    wired[method] = handler
  end
  for _, method in ipairs(CHILD_METHODS) do
    local handler = M.notifications[method]
    wired[method] = function(p)
      if type(p) == "table" and children.route(method, p) then
        return
      end
      handler(p)
    end
  end
  daemon.handlers.notifications = wired
  daemon.handlers.requests = approvals.requests
  daemon.handlers.on_exit = ui.redraw_status
end

return M
