-- A turn's plan (what the model lays out with its update_plan tool), in words: each entry
-- with its status icon and priority, how far the plan has come ("2 of 5 done"), the plan's
-- section of the conversation's header (the live spot), the mark of a planned turn in the
-- transcript, the mark of a turn that carries a plan out, and a refusal of plan mode. Pure
-- functions of their arguments, tested on their own.

local compat = require("trellisd.compat")
local format = require("trellisd.format")
local tree = require("trellisd.tree")

local M = {}

--- The icon of an entry's status: pending, in progress, completed.
---@type table<trellisd.PlanStatus, string>
M.ICONS = { pending = "○", in_progress = "◐", completed = "✓" }

--- The key in the conversation buffer that runs the plan of the turn under the cursor.
M.RUN_KEY = "gR"

--- One line of a plan: "◐ write the fix (high)".
---@param entry trellisd.PlanEntry
---@return string
function M.entry_line(entry)
  local status = compat.value(entry.status)
  local line = (M.ICONS[status] or "?") .. " " .. format.one_line(compat.value(entry.content), 200)
  local priority = compat.value(entry.priority)
  if type(priority) == "string" and priority ~= "" then
    line = line .. " (" .. priority .. ")"
  end
  return line
end

--- How far a plan has come: "2 of 5 done".
---@param entries trellisd.PlanEntry[]
---@return string
function M.progress(entries)
  local done = 0
  for _, entry in ipairs(entries) do
    if compat.value(entry.status) == "completed" then
      done = done + 1
    end
  end
  return done .. " of " .. #entries .. " done"
end

--- A turn named for a person: its prompt's first line, quoted, or the start of its id.
---@param turn_id trellisd.Id|nil
---@param prompt? string|nil
---@return string
function M.turn_name(turn_id, prompt)
  prompt = compat.value(prompt)
  if type(prompt) == "string" and not prompt:match("^%s*$") then
    return "“" .. format.one_line(vim.trim(prompt), 50) .. "”"
  end
  local id = tostring(compat.value(turn_id) or "?")
  return #id > 12 and (id:sub(1, 10) .. "…") or id
end

--- The name of a turn that carries out the plan of the turn named `name`:
--- "“plan the fix”, carried out".
---@param name string
---@return string
function M.carried_out(name)
  return name .. ", carried out"
end

--- The mark under a planned turn in the transcript: "> plan: 2 of 5 done (gR runs it)".
---@param plan trellisd.Plan
---@return string
function M.mark(plan)
  local entries = compat.value(plan.entries) or {}
  return "> plan: " .. M.progress(entries) .. " (" .. M.RUN_KEY .. " or :TrellisRunPlan runs it)"
end

--- Whether a line of the conversation is a planned turn's mark.
---@param line string
---@return boolean
function M.is_mark(line)
  return line:sub(1, #"> plan: ") == "> plan: "
end

--- The line under the prompt of a turn that carries out another turn's plan:
--- "> carries out the plan of turn “plan the fix”", and the mode it runs under if known.
---@param name string the planned turn, as M.turn_name says it
---@param approval? string
---@return string
function M.follows_line(name, approval)
  local line = "> carries out the plan of turn " .. name
  if approval then
    line = line .. " (approval: " .. approval .. ")"
  end
  return line
end

---@class trellisd.LivePlan the plan the conversation's header shows
---@field turnId trellisd.Id the turn that made it
---@field name string that turn, as M.turn_name says it
---@field entries trellisd.PlanEntry[]
---@field step? integer the step of the update_plan call

--- The plan's section of the conversation's header: a heading naming the turn and how far
--- it has come, then an entry a line.
---@param live trellisd.LivePlan
---@return string[]
function M.section(live)
  local lines = {
    "",
    "## Plan of turn " .. live.name .. " · " .. M.progress(live.entries),
  }
  if #live.entries == 0 then
    lines[#lines + 1] = "(the plan is empty)"
  end
  for _, entry in ipairs(live.entries) do
    lines[#lines + 1] = M.entry_line(entry)
  end
  return lines
end

--- Whether a tool's result is a refusal of plan mode ("refused by the session's policy: …
--- the session is in plan mode …").
---@param result any
---@return boolean
function M.refused_by_plan_mode(result)
  result = compat.value(result)
  return type(result) == "string"
    and result:sub(1, #"refused") == "refused"
    and result:find("plan mode", 1, true) ~= nil
end

--- The line that says a call was refused by plan mode, plainly.
M.REFUSED_LINE =
  "> → refused: the session is in plan mode, where nothing is changed (:TrellisRunPlan runs the plan)"

--- The newest turn of `turns` that made a plan, as the header's live spot shows it; nil
--- when none did.
---@param turns trellisd.Turn[]
---@param names? table<trellisd.Id, string> the turns' names (trellisd.view's), by id
---@return trellisd.LivePlan|nil
function M.newest(turns, names)
  for i = #turns, 1, -1 do
    local t = turns[i]
    local plan = compat.value(t.plan)
    if type(plan) == "table" then
      return {
        turnId = t.turnId,
        name = names and names[t.turnId] or M.turn_name(t.turnId, tree.turn_prompt(t)),
        entries = compat.value(plan.entries) or {},
        step = compat.value(plan.step),
      }
    end
  end
  return nil
end

return M
