-- Plans and approval modes, as a person acts on them: set the session's approval mode
-- (:TrellisMode, session/mode), switch plan mode on and back to the mode before
-- (:TrellisPlanMode, gP in the conversation), and run a planned turn's plan
-- (:TrellisRunPlan, gR on the turn: session/plan/approve), in a turn that streams as any
-- other and ends with its TurnResult.

local daemon = require("trellisd.daemon")
local modes = require("trellisd.modes")
local opening = require("trellisd.opening")
local plan = require("trellisd.plan")
local sessions = require("trellisd.sessions")
local turn = require("trellisd.turn")
local ui = require("trellisd.ui")
local walls = require("trellisd.walls")

local M = {}

--- The key in the conversation buffer that switches plan mode on and off.
M.TOGGLE_KEY = "gP"

--- Set the session's approval mode (session/mode); the header shows the daemon's answer.
--- Going into plan mode keeps the mode it leaves, for :TrellisPlanMode to go back to.
---@param state trellisd.State
---@param mode trellisd.ApprovalMode
---@param cb? fun(policy: table) once the daemon has set it
function M.set_mode(state, mode, cb)
  opening.with_daemon(function()
    local before = state.mode
    daemon.request("session/mode", { sessionId = state.id, approval = mode }, function(err, policy)
      if err then
        ui.error("could not set the approval mode: " .. err.message)
        return
      end
      if mode == "plan" and before ~= "plan" then
        state.before_plan = before
      elseif mode ~= "plan" then
        state.before_plan = nil
      end
      walls.adopt(state, type(policy) == "table" and policy or { approval = mode })
      if cb then
        cb(policy)
      else
        ui.notify("approval mode: " .. modes.item(mode))
      end
    end)
  end)
end

--- The session's approval mode changed (session/modeChanged), here or in another window, by
--- a plan's approval or a custom command's turn: the header shows it at once, and the walls
--- (auto and never bring their own) are read again. Going into plan mode keeps the mode it
--- leaves, for :TrellisPlanMode to go back to.
---@param state trellisd.State
---@param mode trellisd.ApprovalMode
function M.changed(state, mode)
  if state.mode == mode then
    return
  end
  if mode == "plan" and state.mode then
    state.before_plan = state.mode
  elseif mode ~= "plan" then
    state.before_plan = nil
  end
  state.mode = mode
  sessions.paint_header(state)
  walls.load(state)
end

-- The session's approval mode as the daemon has it now (another window may have set it):
-- cb(mode).
local function with_mode(state, cb)
  opening.with_daemon(function()
    walls.load(state, function()
      cb(state.mode or "ask")
    end)
  end)
end

--- :TrellisMode [mode]: set the session's approval mode; without one, pick it from all of
--- them, each with what it lets run.
---@param arg? string
function M.mode(arg)
  local state = sessions.need_current("set the approval mode of")
  if not state then
    return
  end
  arg = vim.trim(arg or "")
  if arg ~= "" then
    if not vim.tbl_contains(modes.ALL, arg) then
      ui.warn("there is no approval mode “" .. arg .. "”: " .. table.concat(modes.ALL, ", "))
      return
    end
    M.set_mode(state, arg)
    return
  end
  with_mode(state, function(current)
    ui.select(modes.ALL, {
      prompt = "Approval mode of “" .. state.title .. "”",
      kind = "trellisd.mode",
      format_item = function(mode)
        return modes.item(mode, current)
      end,
    }, function(mode)
      if mode then
        M.set_mode(state, mode)
      end
    end)
  end)
end

--- :TrellisPlanMode (gP): plan mode on, or off again, back to the mode before it (ask when
--- that is not known).
function M.toggle_plan_mode()
  local state = sessions.need_current("switch plan mode in")
  if not state then
    return
  end
  with_mode(state, function(current)
    if current == "plan" then
      local back = state.before_plan or "ask"
      M.set_mode(state, back, function()
        ui.notify("plan mode off: approval " .. back .. " (" .. modes.DESCRIPTIONS[back] .. ")")
      end)
    else
      M.set_mode(state, "plan", function()
        ui.notify(
          "plan mode: the model reads and plans, and changes nothing; :TrellisRunPlan ("
            .. plan.RUN_KEY
            .. " on a planned turn) runs its plan, :TrellisPlanMode ("
            .. M.TOGGLE_KEY
            .. ") goes back to "
            .. current
        )
      end)
    end
  end)
end

-- The planned turn :TrellisRunPlan runs: the one under the cursor in the conversation,
-- else the newest (the header's).
local function target(state)
  local view = state.view
  if view:valid() and vim.api.nvim_get_current_buf() == view.buf then
    local id = view:planned_at(vim.api.nvim_win_get_cursor(0)[1])
    if id then
      return id
    end
  end
  return state.plan and state.plan.turnId or nil
end

--- Run the plan of the turn `turn_id` under the approval mode `mode`: a new turn
--- (session/plan/approve) drawn as carrying it out, streamed as any turn.
---@param state trellisd.State
---@param turn_id trellisd.Id
---@param mode trellisd.ApprovalMode
function M.approve(state, turn_id, mode)
  opening.with_daemon(function(conn)
    local name = state.view.names[turn_id] or plan.turn_name(turn_id)
    local heading = { "### You", plan.follows_line(name, mode), "", "### trellisd" }
    local params = { sessionId = state.id, turnId = turn_id, approval = mode }
    sessions.show(state)
    turn.start(state, conn, "session/plan/approve", params, heading, function()
      M.approve(state, turn_id, mode)
    end, "Carry out this plan")
    if state.running then
      state.running.name = plan.carried_out(name)
    end
    -- the daemon sets the mode for the session as session/mode does
    state.before_plan = nil
    state.mode = mode
    sessions.paint_header(state)
  end)
end

--- :TrellisRunPlan (gR on a planned turn): run the plan of the turn under the cursor, else
--- of the newest planned turn, asking which approval mode it runs under (the mode before
--- plan mode first, else ask).
---@param turn_id? trellisd.Id
function M.run_plan(turn_id)
  local state = sessions.need_current("run the plan of")
  if not state then
    return
  end
  if state.running then
    ui.warn("a turn is running in this session: run the plan when it ends")
    return
  end
  local id = turn_id or target(state)
  if not id then
    ui.warn("no turn of this conversation made a plan: :TrellisPlanMode, then a prompt, makes one")
    return
  end
  local name = state.view.names[id] or plan.turn_name(id)
  with_mode(state, function(current)
    local before = state.before_plan or (current ~= "plan" and current or nil)
    ui.select(modes.run_choices(before), {
      prompt = "Run the plan of turn " .. name .. " under which approval mode?",
      kind = "trellisd.run_plan",
      format_item = function(mode)
        return modes.item(mode)
      end,
    }, function(mode)
      if mode then
        M.approve(state, id, mode)
      end
    end)
  end)
end

return M
