-- :TrellisTools: every tool the model sees in the session (built-in and MCP, with its
-- policy) and the MCP servers with their state (session/tools).

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

--- The lines of :TrellisTools: every tool the model sees, then the MCP servers.
---@param result {tools: table[], servers: table[]} session/tools' answer
---@return string[]
function M.lines(result)
  local lines = { "# tools: name · source · kind · policy" }
  for _, t in ipairs(result.tools or {}) do
    local source = t.source == "mcp" and ("mcp " .. tostring(t.server)) or t.source
    local line = table.concat({ t.name, source, t.kind, t.policy }, " · ")
    if t.target and t.target ~= vim.NIL then
      line = line .. " · " .. t.target
    end
    table.insert(lines, line)
  end
  table.insert(lines, "")
  table.insert(lines, "# MCP servers: name · source · transport · state")
  if #(result.servers or {}) == 0 then
    table.insert(lines, "(none)")
  end
  for _, s in ipairs(result.servers or {}) do
    local line = table.concat({ s.name, s.source, s.transport, s.state }, " · ")
    line = line .. " · " .. s.tools .. " tool(s)"
    if s.skipped and s.skipped ~= vim.NIL then
      line = line .. " (" .. s.skipped .. " left out)"
    end
    line = line .. " · " .. tostring(compat.value(s.commandLine) or compat.value(s.url) or "")
    table.insert(lines, line)
    if s.error and s.error ~= vim.NIL then
      table.insert(lines, "  " .. format.one_line(tostring(s.error), 200))
    end
  end
  return lines
end

--- :TrellisTools
function M.tools()
  local state = sessions.need_current("list the tools of")
  if not state then
    return
  end
  opening.with_daemon(function()
    daemon.request("session/tools", { sessionId = state.id }, function(err, result)
      if err then
        ui.error("could not list the tools: " .. err.message)
        return
      end
      windows.show_lines("trellis://" .. state.id .. "/tools", M.lines(result))
    end)
  end)
end

return M
