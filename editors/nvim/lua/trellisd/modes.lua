-- The approval modes (policy.approval, session/mode) in words: what each lets run without
-- asking, the header's line for a session's mode, the choices :TrellisMode offers and those
-- a plan may run under. Pure functions of their arguments.

local compat = require("trellisd.compat")

local M = {}

--- Every approval mode, from the loosest to the strictest (schema.json's ApprovalMode).
---@type trellisd.ApprovalMode[]
M.ALL = { "all", "auto", "acceptEdits", "ask", "plan", "never" }

--- What each mode lets run, in a line.
---@type table<trellisd.ApprovalMode, string>
M.DESCRIPTIONS = {
  all = "everything runs without asking",
  auto = "what the walls hold runs without asking; protected paths, MCP tools and escalations ask",
  acceptEdits = "writes and edits in the folder run without asking; commands and MCP tools ask",
  ask = "reads run; every write, command and MCP tool call asks",
  plan = "read and plan only: every write, command and MCP tool call is refused",
  never = "read-only: every write, command and MCP tool call is refused",
}

--- The modes a plan may run under (session/plan/approve refuses plan).
---@type trellisd.ApprovalMode[]
M.RUN = { "ask", "acceptEdits", "auto" }

--- The header's line for a session's approval mode: "approval: ask · reads run; …".
---@param mode trellisd.ApprovalMode|nil
---@return string|nil nil when the mode is not known
function M.line(mode)
  mode = compat.value(mode)
  if type(mode) ~= "string" then
    return nil
  end
  local line = "approval: " .. mode
  if M.DESCRIPTIONS[mode] then
    line = line .. " · " .. M.DESCRIPTIONS[mode]
  end
  return line
end

--- A mode as a choice of a picker: "acceptEdits — writes and edits … (now)".
---@param mode trellisd.ApprovalMode
---@param current? trellisd.ApprovalMode|nil the session's mode, marked
---@return string
function M.item(mode, current)
  local item = mode .. " — " .. (M.DESCRIPTIONS[mode] or "?")
  if mode == current then
    item = item .. " (now)"
  end
  return item
end

--- The modes a plan may run under, the default first: the mode the session had before plan
--- mode if a plan may run under it, else ask.
---@param before trellisd.ApprovalMode|nil
---@return trellisd.ApprovalMode[]
function M.run_choices(before)
  local first = vim.tbl_contains(M.RUN, before) and before or "ask"
  local out = { first }
  for _, mode in ipairs(M.RUN) do
    if mode ~= first then
      out[#out + 1] = mode
    end
  end
  return out
end

return M
