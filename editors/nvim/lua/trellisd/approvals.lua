-- The daemon asks before a tool runs (session/requestApproval): the question is said in the
-- conversation and asked with vim.ui.select (allow once, always for the session or the
-- project, the rule the daemon proposes for a command, for the session or the project,
-- deny), beside a diff of what a write would change. A question answered in
-- another window, or no longer waited for, is withdrawn and its picker closed. A child
-- session's question (a `task` call's) names the child and is said in its parent's view.
-- An escalation (a command asking to run outside the walls) is asked as trellisd.walls
-- words it: louder, allowed once or denied. A project's hook asking to run is asked as
-- trellisd.hooks words it: allowed for the project, or skipped in this session.

local children = require("trellisd.children")
local compat = require("trellisd.compat")
local format = require("trellisd.format")
local grants = require("trellisd.grants")
local hooks = require("trellisd.hooks")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local walls = require("trellisd.walls")

local M = {}

local DECISIONS = {
  { label = "Allow once", decision = "allow", said = "allowed once" },
  {
    label = "Allow always (this session)",
    decision = "allowAlways",
    said = "allowed always for this session",
  },
  {
    label = "Allow always (this project)",
    decision = "allowAlwaysProject",
    said = "allowed always for every session of this project",
  },
  { label = "Deny", decision = "deny", said = "denied" },
}

--- The choices of an approval: DECISIONS, and before Deny, when the daemon proposes a rule
--- (a run_command's proposedRule), the rule saved for the session or for the project, each
--- saying the exact rule.
---@param rule? string[]
---@return {label: string, decision: trellisd.Decision, said: string}[]
function M.choices(rule)
  if type(rule) ~= "table" or #rule == 0 then
    return DECISIONS
  end
  local words = grants.rule_words(rule)
  local choices = vim.list_slice(DECISIONS, 1, #DECISIONS - 1)
  choices[#choices + 1] = {
    label = "Always allow " .. words .. " in this session",
    decision = "allowRule",
    said = "allowed the rule " .. words .. " for this session",
  }
  choices[#choices + 1] = {
    label = "Always allow " .. words .. " for this project",
    decision = "allowRuleProject",
    said = "allowed the rule " .. words .. " for every session of this project",
  }
  choices[#choices + 1] = DECISIONS[#DECISIONS]
  return choices
end

--- A floating window beside the approval question showing what a write would change
--- (`diff`, a unified diff) with the `diff` filetype; nil when there is nothing to show.
local function show_diff(diff)
  if type(diff) ~= "string" or diff == "" then
    return nil
  end
  local lines = vim.split(diff, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].filetype = "diff"
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  local width = math.max(20, math.min(vim.o.columns - 4, 100))
  local height = math.max(1, math.min(#lines, vim.o.lines - 6))
  return vim.api.nvim_open_win(buf, false, {
    relative = "editor",
    row = 1,
    col = math.max(0, vim.o.columns - width - 2),
    width = width,
    height = height,
    style = "minimal",
    border = "single",
  })
end

local function close_diff(win)
  if win and vim.api.nvim_win_is_valid(win) then
    vim.api.nvim_win_close(win, true)
  end
end

--- The question of an ordinary approval: the lines the conversation records, the prompt,
--- the choices (once, always for the session or the project, deny) and vim.ui.select's kind.
---@param p trellisd.ApprovalRequest
---@param asker? string who asks, for a child session ("child session “…” of “…”")
---@param in_parent boolean the question is said in the parent's conversation
---@return {lines: string[], prompt: string, choices: table[], kind: string, warning?: string}
function M.question(p, asker, in_parent)
  local tool = tostring(compat.value(p.tool) or "?")
  local args = format.arguments(p.arguments, 100)
  local summary = compat.value(p.summary)
  local mcp = compat.value(p.mcp)
  local mcp_line = nil
  if type(mcp) == "table" and mcp.start then
    mcp_line = "start MCP server " .. tostring(mcp.server) .. ": " .. tostring(mcp.start)
  elseif type(mcp) == "table" then
    mcp_line = "MCP server " .. tostring(mcp.server) .. ", tool " .. tostring(mcp.tool)
  end
  local lines = { "> approval asked: " .. format.call(tool, p.arguments, 100) }
  if asker and in_parent then
    lines[1] = "> approval asked by the " .. asker .. ": " .. format.call(tool, p.arguments, 100)
  end
  if mcp_line then
    table.insert(lines, "> " .. format.one_line(mcp_line, 300))
  end
  if summary and summary ~= "" then
    vim.list_extend(lines, format.quote("> ", summary))
  end
  local prompt = "trellisd asks to run " .. tool .. " " .. args
  if mcp_line then
    prompt = "trellisd asks to " .. (mcp.start and "" or "call ") .. mcp_line .. " " .. args
  end
  if summary and summary ~= "" then
    prompt = prompt .. " (" .. format.one_line(summary, 120) .. ")"
  end
  local rule = compat.value(p.proposedRule)
  if type(rule) == "table" and #rule > 0 then
    local words = grants.rule_words(rule)
    table.insert(lines, "> rule offered: " .. words)
    prompt = prompt .. "; the rule " .. words .. " would allow every command it matches"
  end
  if asker then
    prompt = "the " .. asker .. prompt:sub(#"trellisd" + 1)
  end
  return { lines = lines, prompt = prompt, choices = M.choices(rule), kind = "trellisd.approval" }
end

--- session/requestApproval: ask the user; reply({decision}) with the answer.
---@param p trellisd.ApprovalRequest
---@param reply fun(result: {decision: trellisd.Decision})
---@param request {withdrawn?: boolean, on_withdraw?: fun()} the question, as the connection keeps it
function M.request_approval(p, reply, request)
  children.after(p.sessionId, function()
    M.ask(p, reply, request)
  end)
end

--- Ask the question of session/requestApproval, once it is known whose session asks.
---@param p trellisd.ApprovalRequest
---@param reply fun(result: {decision: trellisd.Decision})
---@param request {withdrawn?: boolean, on_withdraw?: fun()}
function M.ask(p, reply, request)
  if request.withdrawn then
    return
  end
  local asker = children.asker(p.sessionId)
  local state = sessions.open[p.sessionId] or children.parent_state(p.sessionId)
  local run = state and state.running
  local hook = compat.value(p.hook)
  local question
  if compat.value(p.kind) == "escalate" then
    question = walls.escalation(p, asker)
  elseif type(hook) == "table" then -- a project's hook asks to run (tool run_hook)
    question = hooks.question(hook, asker)
  else
    question = M.question(p, asker, state ~= nil and sessions.open[p.sessionId] == nil)
  end
  if state then
    state.view:block(question.lines)
  end
  if question.warning then
    ui.warn(question.warning)
  end
  if run then
    run.approval = true
  end
  ui.redraw_status()
  local labels = {}
  for i, d in ipairs(question.choices) do
    labels[i] = d.label
  end
  local diff_win = show_diff(compat.value(p.diff))
  -- A question another window answered first (or the turn stopped waiting for) is closed:
  -- the window a picker opened for it, if it is still open.
  local before, opened = vim.api.nvim_get_current_win(), nil
  request.on_withdraw = function()
    close_diff(diff_win)
    if run then
      run.approval = false
    end
    if state then
      state.view:block({
        "> approval withdrawn: answered in another window, or the turn stopped waiting",
      })
    end
    if opened and opened ~= before and opened ~= diff_win and vim.api.nvim_win_is_valid(opened) then
      pcall(vim.api.nvim_win_close, opened, true)
    end
    ui.redraw_status()
  end
  ui.select(labels, { prompt = question.prompt, kind = question.kind }, function(_, index)
    close_diff(diff_win)
    if request.withdrawn then
      return
    end
    local choice = question.choices[index] or question.choices[#question.choices]
    reply({ decision = choice.decision })
    if run then
      run.approval = false
    end
    if state then
      state.view:block({ "> " .. choice.said })
    end
    ui.redraw_status()
  end)
  opened = vim.api.nvim_get_current_win()
end

--- The daemon's requests this module answers, by method.
---@type table<string, fun(params: table, reply: fun(result: table), request: table)>
M.requests = {
  ["session/requestApproval"] = M.request_approval,
}

return M
