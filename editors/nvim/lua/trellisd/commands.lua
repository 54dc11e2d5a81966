-- Custom commands: prompt files of the user's commands folder and of the project's
-- .trellisd/commands/, run by name. A prompt typed as `/name args` (:Trellis, :TrellisAsk,
-- a prompt asked for) runs the command `name` with `args` (session/turn's command and
-- arguments); `:Trellis /` alone picks one from a list. The session's commands
-- (session/commands) are kept here, read when a session opens and by :TrellisCommands, for
-- the completion of `:Trellis /name`. :TrellisCommands lists them: name, source,
-- description, argument hint, the settings each runs with and what a project's had narrowed.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

---@type table<trellisd.Id, trellisd.CustomCommand[]> the commands last read, by session
M.lists = {}

--- The command a prompt runs: `/name` alone or followed by white space and its arguments;
--- nil for any other prompt.
---@param prompt string
---@return {name: string, arguments: string}|nil
function M.parse(prompt)
  local text = vim.trim(prompt or "")
  local name = text:match("^/([a-z0-9][a-z0-9_-]*)$")
  if name then
    return { name = name, arguments = "" }
  end
  local args
  name, args = text:match("^/([a-z0-9][a-z0-9_-]*)%s+(.*)$")
  if name then
    return { name = name, arguments = args }
  end
  return nil
end

--- Read the session's commands again (session/commands); cb(commands) once read.
---@param state trellisd.State
---@param cb? fun(commands: trellisd.CustomCommand[])
function M.refresh(state, cb)
  daemon.request("session/commands", { sessionId = state.id }, function(err, result)
    if err then
      if cb then
        ui.error("could not list the commands: " .. err.message)
      end
      return
    end
    M.lists[state.id] = result.commands or {}
    if cb then
      cb(M.lists[state.id])
    end
  end)
end

--- The known command of the session named `name`, or nil.
---@param id trellisd.Id
---@param name string
---@return trellisd.CustomCommand|nil
function M.find(id, name)
  for _, c in ipairs(M.lists[id] or {}) do
    if c.name == name then
      return c
    end
  end
  return nil
end

--- A setting's value as the lists say it ("pytest -q $ARGUMENTS", "$0.5", "30").
---@param name string
---@param value any
---@return string
function M.setting_text(name, value)
  value = compat.value(value)
  if value == nil then
    return "the session's"
  elseif name == "verify" and type(value) == "table" then
    return table.concat(vim.tbl_map(tostring, value), " ")
  elseif name == "budget" and type(value) == "number" then
    return "$" .. tostring(value)
  end
  return type(value) == "table" and vim.fn.json_encode(value) or tostring(value)
end

local ORDER = { "verify", "maxSteps", "budget", "model", "approval", "effort" }

--- The settings a command runs with, on one line: "verify pytest -q · maxSteps 30"; "" when none.
---@param settings table|nil
---@return string
function M.settings_line(settings)
  local parts = {}
  settings = type(settings) == "table" and settings or {}
  for _, name in ipairs(ORDER) do
    if compat.value(settings[name]) ~= nil then
      parts[#parts + 1] = name .. " " .. M.setting_text(name, settings[name])
    end
  end
  return table.concat(parts, " · ")
end

--- What a project's command had narrowed, a line each: "approval: asked all, runs with the
--- session's (reason)".
---@param narrowed table[]|nil
---@return string[]
function M.narrowed_lines(narrowed)
  local lines = {}
  for _, n in ipairs(compat.value(narrowed) or {}) do
    local line = tostring(n.setting)
      .. ": asked "
      .. M.setting_text(n.setting, n.asked)
      .. ", runs with "
      .. M.setting_text(n.setting, n.applied)
    if compat.value(n.reason) then
      line = line .. " (" .. format.one_line(tostring(n.reason), 200) .. ")"
    end
    lines[#lines + 1] = line
  end
  return lines
end

--- A command as a list item: "/fix-tests [test path] · user · Make the tests pass".
---@param c trellisd.CustomCommand
---@return string
function M.item(c)
  local line = "/" .. c.name
  if compat.value(c.argumentHint) then
    line = line .. " " .. c.argumentHint
  end
  line = line .. " · " .. c.source
  if compat.value(c.description) then
    line = line .. " · " .. format.one_line(c.description, 120)
  end
  return line
end

--- The lines of :TrellisCommands.
---@param commands trellisd.CustomCommand[]
---@return string[]
function M.lines(commands)
  local lines = {
    "# commands: /name [argument hint] · source · description (:Trellis /name runs one)",
  }
  if #commands == 0 then
    lines[#lines + 1] = "(none: a <name>.md file in the commands folder of your config, or in"
    lines[#lines + 1] = " the project's .trellisd/commands/, is a command)"
  end
  for _, c in ipairs(commands) do
    lines[#lines + 1] = M.item(c)
    local settings = M.settings_line(c.settings)
    if settings ~= "" then
      lines[#lines + 1] = "  settings: " .. settings
    end
    for _, n in ipairs(M.narrowed_lines(c.narrowed)) do
      lines[#lines + 1] = "  narrowed: " .. n
    end
    if compat.value(c.shadowsProject) then
      lines[#lines + 1] = "  used over the project's command of the same name"
    end
  end
  return lines
end

--- :TrellisCommands: the current session's commands, in a window below.
function M.show()
  local state = sessions.need_current("list the commands of")
  if not state then
    return
  end
  M.refresh(state, function(commands)
    windows.show_lines("trellis://" .. state.id .. "/commands", M.lines(commands))
  end)
end

--- The completion of :Trellis: `/name` of the current session's commands, once its first
--- word starts with "/". The list is read again (for the next completion) when none is kept.
---@param lead string the word being completed
---@param line string the command line
---@return string[]
function M.complete(lead, line)
  local state = sessions.current_state()
  if not state or not lead:match("^/") or not line:match("^%s*%S+%s+/%S*$") then
    return {}
  end
  if not M.lists[state.id] then
    M.refresh(state)
    return {}
  end
  local names = {}
  for _, c in ipairs(M.lists[state.id]) do
    local name = "/" .. c.name
    if name:sub(1, #lead) == lead then
      names[#names + 1] = name
    end
  end
  return names
end

--- `:Trellis /` alone: pick one of the session's commands (its hint and description
--- shown), then type its arguments (the hint as the question); cb(prompt) with `/name args`.
---@param state trellisd.State
---@param cb fun(prompt: string)
function M.pick(state, cb)
  M.refresh(state, function(commands)
    if #commands == 0 then
      ui.warn("this session has no custom command: :TrellisCommands says where they come from")
      return
    end
    local items = vim.tbl_map(M.item, commands)
    ui.select(items, { prompt = "Run a command", kind = "trellisd.command" }, function(_, index)
      local c = commands[index]
      if not c then
        return
      end
      local hint = compat.value(c.argumentHint)
      ui.input({ prompt = "/" .. c.name .. (hint and (" " .. hint) or "") .. ": " }, function(args)
        if args ~= nil then
          cb(vim.trim("/" .. c.name .. " " .. args))
        end
      end)
    end)
  end)
end

--- The line of a run's `command` event: "> ran /fix-tests (user) · verify pytest -q unit".
---@param detail table the event's detail
---@return string[]
function M.event_lines(detail)
  local line = "> ran the " .. tostring(detail.source) .. " command /" .. tostring(detail.name)
  local args = compat.value(detail.arguments)
  if args and args ~= "" then
    line = line .. " " .. format.one_line(tostring(args), 120)
  end
  local settings = M.settings_line(compat.value(detail.settings))
  if settings ~= "" then
    line = line .. " · " .. settings
  end
  local lines = { line }
  for _, n in ipairs(M.narrowed_lines(detail.narrowed)) do
    lines[#lines + 1] = "> narrowed: " .. n
  end
  return lines
end

return M
