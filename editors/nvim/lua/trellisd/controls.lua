-- What a user does to the running turn and the turns to come: steer it, cancel it, pause
-- it, walk step by step, resume a paused or interrupted turn, answer a recovery, list and
-- drop queued prompts, set the budget, compact the conversation.

local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local follow = require("trellisd.follow")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local queue = require("trellisd.queue")
local sessions = require("trellisd.sessions")
local turn = require("trellisd.turn")
local ui = require("trellisd.ui")

local M = {}

local steer_count = 0

--- :TrellisSteer [text]: asked for when not given.
---@param text? string
function M.steer(text)
  local state = sessions.need_current("steer")
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
        follow.check(state, run)
      elseif err.code == Connection.METHOD_NOT_FOUND then
        ui.error("this trellisd cannot steer a running turn (it has no session/steer): update it")
      else
        ui.error("the steer was refused: " .. err.message)
      end
    end
    ui.redraw_status()
  end)
end

--- :TrellisCancel
function M.cancel()
  local state = sessions.need_current("cancel")
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
      follow.check(state, run)
    end
  end)
end

--- :TrellisPause: the running turn stops after the step it is taking.
function M.pause()
  local state = sessions.need_current("pause")
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

--- :TrellisStep: turns of this conversation pause after every step, or no longer do.
function M.toggle_step()
  local state = sessions.need_current("walk step by step")
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

--- :TrellisResume: continue the paused or interrupted turn at the head.
function M.resume()
  local state = sessions.need_current("resume")
  if not state then
    return
  end
  opening.with_daemon(function(conn)
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
      sessions.show(state)
      turn.start(
        state,
        conn,
        "session/resume",
        { sessionId = state.id, turnId = last.turnId, stepMode = state.step_mode or nil },
        { "### trellisd (resumed)" }
      )
    end)
  end)
end

--- :TrellisRecover: answer the decision the conversation waits for, if it does.
function M.recover()
  local state = sessions.need_current("recover")
  if not state then
    return
  end
  local pending = compat.value(state.session.recovery)
  if type(pending) ~= "table" then
    ui.notify("this conversation has no decision waiting")
    return
  end
  sessions.offer_recovery(state, pending)
end

--- :TrellisQueue: the prompts queued behind the running turn; picking one offers to drop it.
function M.queue()
  local state = sessions.need_current("list the queue of")
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
    ui.redraw_status()
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

--- :TrellisBudget tokens=N usd=X (or off): what the conversation's turns may spend together.
---@param args string
function M.budget(args)
  local state = sessions.need_current("budget")
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
    ui.redraw_status()
  end)
end

--- :TrellisCompact: the oldest turns of the conversation are summarized by the model, and
--- from then on sent as that summary (the turns stay in the conversation as they were).
function M.compact()
  local state = sessions.need_current("compact")
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

return M
