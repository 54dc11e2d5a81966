-- A turn of a session open here that runs in the daemon but was not started here (another
-- window started it, or this one before the daemon was reattached): drawn from the history
-- (its prompt, the steps it committed) and the thought and text of its current step so far,
-- then followed through the notifications until it ends. Steer and cancel act on it as on
-- a turn started here.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local paging = require("trellisd.paging")
local sessions = require("trellisd.sessions")
local thoughts = require("trellisd.thoughts")
local tree = require("trellisd.tree")
local turn = require("trellisd.turn")
local ui = require("trellisd.ui")
local walls = require("trellisd.walls")

local M = {}

--- Draw the conversation with its running turn `live`, and follow that turn.
---@param state trellisd.State
---@param history trellisd.Turn[] the newest page of the session's path
---@param live trellisd.Running
function M.follow(state, history, live)
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
      run.prompt = tree.turn_prompt(t)
      run.model = compat.value(t.model)
      run.plan = compat.value(t.plan)
      reply = compat.value(t.reply) or ""
      listed = true
    end
  end
  if not listed then
    history = vim.list_extend(vim.list_slice(history), { { turnId = live.turnId, prompt = run.prompt } })
  end
  state.running = run
  sessions.render(state, history, live.turnId)
  -- what the model reasoned so far in the step being streamed, folded above its text
  local thought = compat.value(live.thought) or ""
  if thought ~= "" and run.step then
    thoughts.stream(state.view, run, run.step, thought)
  end
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
  ui.redraw_status()
end

--- Whether the followed turn has ended, as the history says; if it has, its footer ends it.
---@param state trellisd.State
---@param run trellisd.Run the followed turn
function M.check(state, run)
  daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    if err or state.running ~= run then
      return
    end
    for _, t in ipairs(result.turns or {}) do
      if t.turnId == run.turnId and t.outcome ~= "running" then
        state.running = nil
        local made = compat.value(t.plan) or run.plan
        if made then
          state.view:plan_mark(t.turnId, made)
        end
        state.view:block({ format.footer(t) })
        state.head = compat.value(result.turns[#result.turns].turnId) or state.head
        ui.redraw_status()
        turn.send_waiting(state)
        return
      end
    end
  end)
end

--- A turn another window started in a session open here: the session is reopened, which
--- draws the turn as far as it has streamed (the notifications that came meanwhile are in
--- that text), and the turn is followed from there; the header's walls and mode are read
--- again. The current session stays current.
---@param state trellisd.State
function M.catch_up(state)
  if state.catching_up then
    return
  end
  state.catching_up = true
  local current = sessions.current
  daemon.request("session/reopen", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    state.catching_up = nil
    if err then
      return
    end
    sessions.adopt(result)
    state.cursor = compat.value(result.historyCursor)
    sessions.current = current
    local live = compat.value(result.running)
    if live and not state.running then
      M.follow(state, result.history or {}, live)
    end
    walls.load(state) -- a plan run elsewhere sets the session's mode
  end)
end

return M
