-- Hooks: programs the user's config.toml (or, once approved, a project's .trellisd.toml)
-- names for the events of a session. :TrellisHooks lists those in effect (session/hooks:
-- event, matcher, command, source, approved); `x` on a project's approved hook takes its
-- approval back (session/revoke, kind hook): it is asked for again. When a turn drawn here ends, its run's
-- events (run/events) say which hooks blocked or decided something, and which custom
-- command it ran: they are drawn in the conversation. A project hook asking to run
-- (session/requestApproval with `hook`) is worded as such.

local commands = require("trellisd.commands")
local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

-- The events of a tool call: a hook's matcher counts for these only.
local TOOL_EVENTS = { preToolUse = true, permissionRequest = true, postToolUse = true }

--- The line of a hook in :TrellisHooks: "preToolUse · write_* · python3 guard.py · config · approved".
---@param h trellisd.Hook
---@return string
function M.line(h)
  local state = compat.value(h.state)
  local approved = h.approved and "approved" or "not approved"
  if state and state ~= "approved" then
    approved = state
  end
  return table.concat({
    tostring(h.event),
    tostring(compat.value(h.matcher) or (TOOL_EVENTS[h.event] and "every tool" or "-")),
    table.concat(vim.tbl_map(tostring, h.command or {}), " "),
    tostring(h.source),
    approved,
  }, " · ")
end

--- The lines of :TrellisHooks.
---@param hooks trellisd.Hook[]
---@return string[]
function M.lines(hooks)
  local lines = {
    "# hooks, in the order they run: event · matcher · command · source · approved"
      .. " (x revokes a project hook's approval)",
  }
  if #hooks == 0 then
    lines[#lines + 1] = "(none: [[hooks]] tables of config.toml or of the project's .trellisd.toml)"
  end
  for _, h in ipairs(hooks) do
    lines[#lines + 1] = M.line(h)
  end
  return lines
end

-- Before the first hook's line in :TrellisHooks' buffer.
local HEADER_LINES = 1

local list

--- Take back the approval of a project's hook for the project (session/revoke, kind hook,
--- its exact command line): it is asked about again before it next runs.
---@param state trellisd.State
---@param h trellisd.Hook|nil
function M.revoke(state, h)
  if not h then
    ui.warn("the cursor is on no hook")
    return
  end
  if h.source ~= "project" then
    ui.warn("this hook is your config file's: it needs no approval (edit config.toml)")
    return
  end
  if not h.approved then
    ui.notify("this hook is not approved: nothing to revoke")
    return
  end
  local grant = { kind = "hook", target = h.commandLine, scope = "project" }
  daemon.request("session/revoke", { sessionId = state.id, grant = grant }, function(err)
    if err then
      ui.error("could not revoke it: " .. err.message)
      return
    end
    ui.notify("revoked: " .. format.one_line(h.commandLine, 200) .. " is asked for again")
    list(state)
  end)
end

list = function(state)
  daemon.request("session/hooks", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not list the hooks: " .. err.message)
      return
    end
    local hooks = result.hooks or {}
    local buf = windows.show_lines("trellis://" .. state.id .. "/hooks", M.lines(hooks))
    vim.keymap.set("n", "x", function()
      M.revoke(state, hooks[vim.api.nvim_win_get_cursor(0)[1] - HEADER_LINES])
    end, { buffer = buf, desc = "Revoke the approval of the project hook under the cursor" })
    vim.keymap.set("n", "q", "<cmd>close<CR>", { buffer = buf, desc = "Close the list" })
  end)
end

--- :TrellisHooks: the current session's hooks, in a window below.
function M.show()
  local state = sessions.need_current("list the hooks of")
  if not state then
    return
  end
  list(state)
end

--- A hook's reason on one line (its stderr may hold several), cut at 300 characters.
---@param reason any
---@return string
function M.reason(reason)
  return format.one_line(vim.trim((tostring(reason):gsub("%s+", " "))), 300)
end

--- The line of a run's `hook` event, when the hook blocked or decided something (a hook
--- that said "go on" is not drawn): "> preToolUse hook blocked: no writes here (python3 guard.py)".
---@param detail table the event's detail
---@return string|nil
function M.event_line(detail)
  -- a hook's answer (hooks.md), not an approval decision: continue, allow, deny, block
  local verdict = compat.value(detail.decision)
  if verdict == nil or verdict == "continue" then
    return nil
  end
  local said = ({ allow = "allowed it", deny = "denied it", block = "blocked" })[verdict]
  local line = "> " .. tostring(detail.event) .. " hook " .. (said or tostring(verdict))
  local reason = compat.value(detail.reason)
  if reason and reason ~= "" then
    line = line .. ": " .. M.reason(reason)
  end
  local command = compat.value(detail.command)
  if type(command) == "table" then
    command = table.concat(vim.tbl_map(tostring, command), " ")
  end
  if command then
    line = line .. " (" .. format.one_line(tostring(command), 120) .. ")"
  end
  return line
end

--- The lines a run's events add to the conversation: the custom command it ran, and the
--- hooks that blocked or decided.
---@param events trellisd.Event[]
---@return string[]
function M.run_lines(events)
  local lines = {}
  for _, e in ipairs(events) do
    local detail = type(e.detail) == "table" and e.detail or {}
    if e.kind == "command" then
      vim.list_extend(lines, commands.event_lines(detail))
    elseif e.kind == "hook" then
      local line = M.event_line(detail)
      if line then
        lines[#lines + 1] = line
      end
    end
  end
  return lines
end

--- A turn drawn here ended: read its run's events (run/events) and draw the command it ran
--- and the hooks that blocked or decided.
---@param state trellisd.State
---@param run_id trellisd.Id|nil
function M.after_turn(state, run_id)
  if not run_id then
    return
  end
  daemon.request("run/events", { runId = run_id }, function(err, result)
    if err or type(result) ~= "table" then
      return
    end
    local lines = M.run_lines(result.events or {})
    if #lines > 0 and state.view:valid() then
      state.view:block(lines)
    end
  end)
end

--- The question of a project hook asking to run (session/requestApproval's `hook`): allow
--- runs it and remembers it for the project; deny skips it for the rest of the session.
---@param hook {event: string, source: string, command: string}
---@param asker? string who asks, for a child session
---@return {lines: string[], prompt: string, choices: table[], kind: string}
function M.question(hook, asker)
  local what = "the project's " .. tostring(hook.event) .. " hook: " .. tostring(hook.command)
  local prompt = (asker and ("the " .. asker) or "trellisd")
    .. " asks to run "
    .. format.one_line(what, 300)
    .. " (a program this repository names; allowing it remembers it for this project"
    .. " until its files change)"
  return {
    lines = { "> approval asked: run " .. format.one_line(what, 300) },
    prompt = prompt,
    choices = {
      {
        label = "Allow (this project, until its files change)",
        decision = "allow",
        said = "allowed the project's hook for this project",
      },
      {
        label = "Deny (skip it in this session)",
        decision = "deny",
        said = "denied: the hook is skipped",
      },
    },
    kind = "trellisd.approval",
  }
end

return M
