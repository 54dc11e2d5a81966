-- Prompts queued behind a session's running turn (session/queued, session/dequeued), from
-- this editor or any other window of the shared daemon, and the session's budget with what
-- it has spent. The state lives on each session's state table: `queue` (the daemon's list,
-- first to run first), `mine` (this editor's queued requests, in the order sent) and
-- `budget`, `spent`.

local compat = require("trellisd.compat")
local format = require("trellisd.format")

local M = {}

local function list(state)
  state.queue = state.queue or {}
  return state.queue
end

local function mine(state)
  state.mine = state.mine or {}
  return state.mine
end

-- This editor sent `run` (a queued session/turn): it is matched with the session/queued
-- that names its prompt.
---@param state trellisd.State
---@param run trellisd.Run
function M.sent(state, run)
  table.insert(mine(state), run)
end

-- The queued request answered (ran, or was dropped): it is no longer waited for.
---@param state trellisd.State
---@param run trellisd.Run
function M.answered(state, run)
  for i, r in ipairs(mine(state)) do
    if r == run then
      table.remove(state.mine, i)
      return
    end
  end
end

-- session/queued: the prompt joins the list at its position.
---@param state trellisd.State
---@param p trellisd.Queued
function M.queued(state, p)
  local entries = list(state)
  for _, e in ipairs(entries) do
    if e.queueId == p.queueId then
      return
    end
  end
  local position = math.max(1, math.min(tonumber(p.position) or #entries + 1, #entries + 1))
  table.insert(entries, position, { queueId = p.queueId, prompt = tostring(p.prompt) })
  for _, run in ipairs(mine(state)) do
    if run.queueId == nil and run.prompt == p.prompt then
      run.queueId = p.queueId
      break
    end
  end
end

-- session/dequeued: the prompt leaves the list; returns this editor's run when it was one of
-- its own and its turn starts now.
---@param state trellisd.State
---@param p {sessionId: trellisd.Id, queueId: trellisd.Id, reason: "started"|"dropped"|"cancelled"}
---@return trellisd.Run|nil
function M.dequeued(state, p)
  local entries = list(state)
  for i, e in ipairs(entries) do
    if e.queueId == p.queueId then
      table.remove(entries, i)
      break
    end
  end
  if p.reason ~= "started" then
    return nil
  end
  for _, run in ipairs(mine(state)) do
    if run.queueId == p.queueId then
      return run
    end
  end
  return nil
end

-- How many prompts wait.
---@param state trellisd.State
---@return integer
function M.count(state)
  return #list(state)
end

-- The list as a person reads it: "1. fix the tests", one entry a line.
---@param state trellisd.State
---@return string[]
function M.labels(state)
  local labels = {}
  for i, e in ipairs(list(state)) do
    labels[i] = i .. ". " .. format.one_line(e.prompt, 80)
  end
  return labels
end

--- The queued prompt at `index` (1: runs next), or nil.
---@param state trellisd.State
---@param index integer
---@return {queueId: trellisd.Id, prompt: string}|nil
function M.entry(state, index)
  return list(state)[index]
end

-- A budget and spend from an answer that has them (session/open, session/reopen,
-- session/budget; a TurnResult has `spent`).
---@param state trellisd.State
---@param answer table|nil a Session, a TurnResult or session/budget's BudgetStatus
function M.budget_from(state, answer)
  if type(answer) ~= "table" then
    return
  end
  if answer.budget ~= nil then
    local budget = compat.value(answer.budget)
    state.budget = type(budget) == "table" and budget or nil
  end
  local spent = compat.value(answer.spent)
  if type(spent) == "table" then
    state.spent = spent
  end
end

local function usd(v)
  return format.cost(v) or "$0"
end

-- "spent 3000 of 3500 tokens, $0.12 of $1", "spent 3000 tokens" without a budget, or nil
-- before anything is known.
---@param state trellisd.State
---@return string|nil
function M.spend_text(state)
  local spent, budget = state.spent, state.budget
  if type(spent) ~= "table" then
    return nil
  end
  local tokens = tonumber(compat.value(spent.tokens)) or 0
  local parts = {}
  local cap_tokens = budget and tonumber(compat.value(budget.tokens)) or nil
  local cap_usd = budget and tonumber(compat.value(budget.usd)) or nil
  parts[1] = cap_tokens and (tokens .. " of " .. cap_tokens .. " tokens") or (tokens .. " tokens")
  if cap_usd then
    parts[2] = usd(compat.value(spent.usd)) .. " of " .. usd(cap_usd)
  end
  return "spent " .. table.concat(parts, ", ")
end

-- ":TrellisBudget tokens=5000 usd=0.5" -> {tokens = 5000, usd = 0.5}; "off" -> vim.NIL;
-- nil and a message for anything else.
---@param args string|nil
---@return trellisd.Budget|userdata|nil budget
---@return string|nil problem
function M.parse(args)
  args = vim.trim(args or "")
  if args == "off" or args == "none" then
    return vim.NIL
  end
  local budget, any = {}, false
  for word in args:gmatch("%S+") do
    local key, value = word:match("^(%a+)=([%d.]+)$")
    local number = tonumber(value or "")
    if (key ~= "tokens" and key ~= "usd") or not number or number <= 0 then
      return nil, "say tokens=N and/or usd=X (or off), not " .. word
    end
    budget[key] = key == "tokens" and math.floor(number) or number
    any = true
  end
  if not any then
    return nil, "say tokens=N and/or usd=X, or off"
  end
  return budget
end

return M
