-- A turn this editor runs in a session: started by a prompt (session/turn) or a resume
-- (session/resume), its reply streamed into the conversation by trellisd.events, its
-- footer drawn when the request answers. A prompt given while a turn runs waits for it
-- (state.waiting) or is queued in the daemon (session/turn with queue).

local commands = require("trellisd.commands")
local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local effort = require("trellisd.effort")
local format = require("trellisd.format")
local hooks = require("trellisd.hooks")
local images = require("trellisd.images")
local queue = require("trellisd.queue")
local recovery = require("trellisd.recovery")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local View = require("trellisd.view")

local M = {}

-- A refused param (an image the daemon cannot take, say): its message names it.
local INVALID_PARAMS = -32602

--- The reason a userPromptSubmit hook gave for blocking the prompt (session/turn's -32020
--- with data.hook), or nil when no hook blocked it.
---@param err trellisd.Error
---@return string|nil
function M.blocked_by_hook(err)
  local data = err.data
  if type(data) ~= "table" or compat.value(data.hook) == nil then
    return nil
  end
  return tostring(compat.value(data.reason) or err.message)
end

--- The turn's request answered (or failed): its footer, or what went wrong, then the
--- prompts waiting behind it.
---@param state trellisd.State
---@param run trellisd.Run
---@param err trellisd.Error|nil
---@param result trellisd.TurnResult|nil
function M.ended(state, run, err, result)
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
  if err and run.plan and run.turnId then
    view:plan_mark(run.turnId, run.plan)
  end
  if err then
    if err.code == Connection.REQUEST_CANCELLED then
      view:block({ "*cancelled*" })
    elseif err.code == Connection.LOST then
      view:block({ "*interrupted: " .. err.message .. "*" })
    elseif err.code == Connection.LEASE_HELD and run.retry then
      view:block({ "*not sent: " .. format.one_line(err.message, 200) .. "*" })
      sessions.offer_takeover(state, err, run.retry)
    elseif err.code == INVALID_PARAMS and run.images and #run.images > 0 then
      -- the images stay attached, for the prompt given again once the cause is fixed
      images.restore(run.images)
      view:block({ "*not sent: " .. format.one_line(err.message, 200) .. "*" })
      ui.error("the prompt was refused: " .. err.message .. " (its images stay attached)")
    elseif err.code == INVALID_PARAMS and run.command then
      view:block({ "*not run: " .. format.one_line(err.message, 200) .. "*" })
      ui.error(
        "/" .. run.command .. " did not run: " .. err.message .. " (:TrellisCommands lists them)"
      )
    elseif err.code == Connection.CONFLICT and M.blocked_by_hook(err) then
      -- a userPromptSubmit hook blocked the prompt: it reached neither the model nor the history
      local reason = hooks.reason(M.blocked_by_hook(err))
      view:block({ "*blocked by a userPromptSubmit hook: " .. reason .. "*" })
      ui.error(err.message)
    elseif err.code == Connection.CONFLICT and recovery.pending_from(err.data) then
      -- refused until a person decides about a command killed mid-run
      view:block({ "*not sent: " .. format.one_line(err.message, 200) .. "*" })
      sessions.offer_recovery(state, recovery.pending_from(err.data))
    else
      view:block({ "*error: " .. format.one_line(err.message, 200) .. "*" })
      ui.error(err.message)
    end
  else
    ---@cast result trellisd.TurnResult
    if run.plan then
      view:plan_mark(compat.value(result.turnId) or run.turnId, run.plan)
    end
    view:block({ format.footer(result) })
    queue.budget_from(state, result)
    if state.budget then
      view:block({ "*" .. queue.spend_text(state) .. "*" })
    end
    state.head = compat.value(result.turnId) or state.head
    if state.title == "" then
      state.title = format.one_line(run.prompt, 200)
      state.session.title = state.title
      sessions.paint_header(state)
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
      sessions.offer_recovery(state, recovery.pending(result, killed))
    end
    hooks.after_turn(state, compat.value(result.runId))
  end
  ui.redraw_status()
  M.send_waiting(state)
end

--- Run a turn: session/turn for a prompt, session/resume for an interrupted turn,
--- session/plan/approve for a turn that carries out a plan. The reply streams into the
--- conversation; the footer comes when the request answers (its TurnResult).
---@param state trellisd.State
---@param conn trellisd.Connection
---@param method "session/turn"|"session/resume"|"session/plan/approve"
---@param params table the request's params
---@param heading string[] the lines drawn above the reply
---@param retry? fun() sends it again, after a takeover
---@param prompt? string what the turn is named by until it has a title (default: params.prompt)
---@param taken? trellisd.Attached[] the image files the prompt took (trellisd.images)
function M.start(state, conn, method, params, heading, retry, prompt, taken)
  if state.running then
    ui.warn(
      "a turn is already running in this session: :TrellisSteer steers it, :TrellisCancel stops it"
    )
    images.restore(taken or {})
    return
  end
  local run = {
    prompt = prompt or params.prompt or "",
    tokens = 0,
    step = nil,
    steers = 0,
    approval = false,
    retry = retry,
    images = taken,
    command = params.command,
  }
  state.running = run
  state.view:block(heading)
  run.request = conn:request(method, params, function(err, result)
    M.ended(state, run, err, result)
  end)
  ui.redraw_status()
end

--- A prompt typed as `/name args` runs the custom command `name` (trellisd.commands):
--- session/turn's params get `command` and `arguments` in place of `prompt`.
---@param params table session/turn's params, with prompt
function M.as_command(params)
  local command = commands.parse(params.prompt)
  if command then
    params.prompt = nil
    params.command = command.name
    params.arguments = command.arguments ~= "" and command.arguments or nil
  end
end

--- Send a prompt as a new turn of the session; `/name args` runs a custom command.
---@param state trellisd.State
---@param conn trellisd.Connection
---@param prompt string
---@param context? trellisd.ContextEntry[] what the editor attaches to the prompt
function M.send(state, conn, prompt, context)
  local given, taken = images.take(state.root)
  local heading = View.prompt_lines(prompt, taken)
  if context then
    table.insert(heading, #heading - 1, format.context_line(context))
    table.insert(heading, #heading - 1, "")
  end
  local params = { sessionId = state.id, prompt = prompt, stepMode = state.step_mode or nil }
  M.as_command(params)
  params.context = context
  params.images = given
  params.effort = effort.for_turn(state)
  M.start(
    state,
    conn,
    "session/turn",
    params,
    heading,
    function()
      daemon.ensure(function(err, c)
        if err then
          ui.error(err)
        else
          images.restore(taken)
          M.send(state, c, prompt, context)
        end
      end)
    end,
    prompt,
    taken
  )
end

--- A prompt given while a turn runs waits for it to end, then goes in order.
---@param state trellisd.State
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
      M.send(state, conn, prompt.prompt, prompt.context)
    else
      M.send(state, conn, prompt)
    end
  end)
end

--- A prompt given while a turn runs is queued in the daemon (session/turn with queue),
--- shown by :TrellisQueue in every editor following the session, and run after the
--- running turn; its turn is drawn here when it starts (session/dequeued), and ends when
--- the request answers.
---@param state trellisd.State
---@param conn trellisd.Connection
---@param prompt string
---@param context? trellisd.ContextEntry[]
function M.send_queued(state, conn, prompt, context)
  local given, taken = images.take(state.root)
  local run = { prompt = prompt, tokens = 0, step = nil, steers = 0, approval = false }
  run.images = taken
  queue.sent(state, run)
  local params = { sessionId = state.id, prompt = prompt, queue = true, context = context }
  M.as_command(params)
  run.command = params.command
  params.stepMode = state.step_mode or nil
  params.images = given
  params.effort = effort.for_turn(state)
  run.request = conn:request("session/turn", params, function(err, result)
    queue.answered(state, run)
    if state.running == run or run.started then
      M.ended(state, run, err, result)
    elseif err then
      images.restore(run.images or {})
      ui.warn("your queued prompt did not run: " .. err.message)
    end
    ui.redraw_status()
  end)
  ui.notify("your prompt is queued: it runs when the running turn ends (:TrellisQueue lists the queue)")
  ui.redraw_status()
end

--- A queued prompt of this editor starts its turn (session/dequeued): it is drawn now.
---@param state trellisd.State
---@param run trellisd.Run
function M.start_queued(state, run)
  run.started = true
  state.running = run
  state.view:block(View.prompt_lines(run.prompt, run.images))
  ui.redraw_status()
end

return M
