-- The walls every program of a session runs in (the policy's `sandbox` and `network`): the
-- mode shown in the conversation's header with the session's approval mode (read from
-- session/policy when the session is opened or reopened), their details in a buffer of their own (:TrellisWalls), and the
-- question a command asking to run outside them (an escalation) is asked with: louder than
-- an ordinary approval, with its command and reason, allowed once or denied.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local modes = require("trellisd.modes")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

-- What each mode lets a program write, in a person's words.
local MODES = {
  ["workspace-write"] = "programs may write the session's root (less its protected paths), "
    .. "a private /tmp and the caches named in the config file; the rest is read-only",
  ["read-only"] = "programs may write their private /tmp only; the rest is read-only",
  off = "no walls: programs run with all of your rights",
}

-- An escalation is allowed once or denied: no grant covers a way out of the walls.
local ESCALATION_DECISIONS = {
  {
    label = "Allow once, outside the walls",
    decision = "allow",
    said = "escalation allowed once: the command runs outside the walls",
  },
  { label = "Deny", decision = "deny", said = "escalation denied: the command was not run" },
}

--- What `network` lets a walled program reach, in a few words: "network off", "network on",
--- "network: pypi.org:443, github.com:443".
---@param network boolean|string[]|nil
---@return string
function M.network_text(network)
  network = compat.value(network)
  if network == true then
    return "network on"
  end
  if type(network) == "table" and #network > 0 then
    local hosts = {}
    for i, host in ipairs(network) do
      hosts[i] = tostring(host)
    end
    return "network: " .. table.concat(hosts, ", ")
  end
  return "network off"
end

--- The header's line for a session's policy (session/policy's result):
--- "walls: workspace-write · network off", or "walls: off · programs run unconfined".
---@param policy table session/policy's result
---@return string
function M.line(policy)
  local walls = compat.value(policy.walls)
  walls = type(walls) == "table" and walls or {}
  local mode = compat.value(walls.mode) or compat.value(policy.sandbox) or "workspace-write"
  if mode == "off" then
    return "walls: off · programs run unconfined"
  end
  local network = compat.value(walls.network)
  if network == nil then
    network = compat.value(policy.network)
  end
  return "walls: " .. tostring(mode) .. " · " .. M.network_text(network)
end

local function size(bytes)
  bytes = tonumber(bytes)
  if not bytes then
    return "?"
  end
  if bytes >= 1024 * 1024 then
    return string.format("%d MiB", math.floor(bytes / (1024 * 1024)))
  end
  return string.format("%d KiB", math.floor(bytes / 1024))
end

local function listed(lines, title, items, none)
  lines[#lines + 1] = ""
  lines[#lines + 1] = "## " .. title
  items = compat.value(items)
  if type(items) ~= "table" or #items == 0 then
    lines[#lines + 1] = none
    return
  end
  for _, item in ipairs(items) do
    lines[#lines + 1] = "- " .. tostring(item)
  end
end

--- The lines :TrellisWalls shows: the mode, the network, the approval mode, the private
--- /tmp's size, the process bound, and where programs may write, what they may not read and
--- what stays read-only in the root.
---@param title string the session's title
---@param policy table session/policy's result
---@return string[]
function M.details(title, policy)
  local walls = compat.value(policy.walls)
  walls = type(walls) == "table" and walls or {}
  local mode = compat.value(walls.mode) or compat.value(policy.sandbox) or "workspace-write"
  local lines = {
    "# The walls of “" .. title .. "”",
    "",
    "mode: " .. tostring(mode) .. ": " .. (MODES[mode] or "?"),
    modes.line(compat.value(policy.approval) or "ask"),
  }
  if mode == "off" then
    lines[#lines + 1] = ""
    lines[#lines + 1] =
      "Programs run unconfined: set sandbox in setup() or the config file for walls."
    return lines
  end
  local network = compat.value(walls.network)
  lines[#lines + 1] = M.network_text(network == nil and compat.value(policy.network) or network)
    .. (network == false and " (the session's own loopback only)" or "")
  lines[#lines + 1] = "private /tmp: at most " .. size(compat.value(walls.tempBytes))
  local processes = tostring(compat.value(walls.processes) or "?")
  lines[#lines + 1] = "processes: at most " .. processes .. " at once"
  listed(lines, "Writable", walls.writable, "nothing but the private /tmp")
  listed(lines, "Hidden (not even readable)", walls.hidden, "nothing")
  listed(lines, "Protected (read-only in the root)", walls.protected, "nothing")
  return lines
end

--- Take what a session's policy (session/policy's or session/mode's answer) says of its
--- walls and its approval mode into the conversation's header.
---@param state trellisd.State
---@param policy table
function M.adopt(state, policy)
  state.walls = M.line(policy)
  local mode = compat.value(policy.approval)
  state.mode = type(mode) == "string" and mode or "ask" -- the daemon's default
  sessions.paint_header(state)
end

--- Read the session's policy (session/policy) and show its walls and its approval mode in
--- the conversation's header; then cb(policy) (nil when it could not be read).
---@param state trellisd.State
---@param cb? fun(policy: table|nil)
function M.load(state, cb)
  daemon.request("session/policy", { sessionId = state.id }, function(err, policy)
    if err or type(policy) ~= "table" then
      if cb then
        cb(nil)
      end
      return
    end
    M.adopt(state, policy)
    if cb then
      cb(policy)
    end
  end)
end

--- :TrellisWalls: the current session's walls in detail, in a buffer of their own.
function M.show()
  local state = sessions.need_current("show the walls of")
  if not state then
    return
  end
  daemon.ensure(function(failed)
    if failed then
      ui.error(failed)
      return
    end
    M.load(state, function(policy)
      if not policy then
        ui.error("could not read the session's policy")
        return
      end
      windows.show_lines("trellis-walls://" .. state.id, M.details(state.title, policy), "markdown")
    end)
  end)
end

--- The question of an escalation (session/requestApproval of kind "escalate"): the lines the
--- conversation records, the prompt, the choices (allow once or deny, never "always") and
--- vim.ui.select's kind.
---@param p trellisd.ApprovalRequest
---@param asker? string who asks, for a child session ("child session “…” of “…”")
---@return {lines: string[], prompt: string, choices: table[], kind: string, warning: string}
function M.escalation(p, asker)
  local command = compat.value(p.command)
  if type(command) ~= "string" or command == "" then
    command = format.arguments(p.arguments, 300)
  end
  local reason = compat.value(p.reason)
  reason = type(reason) == "string" and reason ~= "" and reason or "(no reason given)"
  local who = asker and ("the " .. asker) or "the model"
  local shown = format.code(format.one_line(command, 300))
  local lines = { "> ⚠ escalation asked by " .. who .. ": run OUTSIDE the walls: " .. shown }
  vim.list_extend(lines, format.quote("> reason: ", reason))
  local prompt = "⚠ Run OUTSIDE the walls? "
    .. who
    .. " asks to run, with all of your rights: "
    .. format.one_line(command, 200)
    .. " (reason: "
    .. format.one_line(reason, 200)
    .. ")"
  return {
    lines = lines,
    prompt = prompt,
    choices = ESCALATION_DECISIONS,
    kind = "trellisd.escalation",
    warning = who .. " asks to run a command OUTSIDE the walls: " .. format.one_line(command, 100),
  }
end

return M
