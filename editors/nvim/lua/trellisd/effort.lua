-- How hard a reasoning model thinks: :TrellisEffort picks low, medium or high (or the
-- model's default) for the conversation's next turns, sent as session/turn's `effort`; the
-- `effort` option is what a conversation starts with. A model that does not reason ignores it.

local config = require("trellisd.config")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

--- The choices, as :TrellisEffort takes them and its picker offers them.
M.CHOICES = { "low", "medium", "high", "default" }

local LABELS = {
  low = "low: think briefly",
  medium = "medium",
  high = "high: think hard",
  default = "default: the model's own",
}

--- The effort a turn of the conversation is sent with (nil: the model's default).
---@param state trellisd.State
---@return trellisd.Effort|nil
function M.for_turn(state)
  if state.effort ~= nil then
    return state.effort or nil
  end
  return config.options.effort
end

--- What the effort is, said for a person: "high", "default".
---@param state trellisd.State
---@return string
function M.describe(state)
  return M.for_turn(state) or "default"
end

--- :TrellisEffort [low|medium|high|default]: asked with a picker when not given.
---@param choice? string
function M.pick(choice)
  local state = sessions.need_current("set the effort of")
  if not state then
    return
  end
  if choice == nil or choice:match("^%s*$") then
    local current = M.describe(state)
    local items = {}
    for i, c in ipairs(M.CHOICES) do
      items[i] = LABELS[c] .. (c == current and " (now)" or "")
    end
    local opts = { prompt = "Effort of the next turns", kind = "trellisd.effort" }
    ui.select(items, opts, function(_, i)
      if i then
        M.pick(M.CHOICES[i])
      end
    end)
    return
  end
  choice = vim.trim(choice)
  if not LABELS[choice] then
    ui.warn("the effort is low, medium, high or default, not " .. choice)
    return
  end
  state.effort = choice ~= "default" and choice or false
  ui.notify("effort of the next turns: " .. M.describe(state))
  ui.redraw_status()
end

return M
