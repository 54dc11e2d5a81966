-- A session's tree of turns as lines of text. Pure: tested on its own.
--
--   ◇ (start)
--   ● fix the parser
--   ├─ ● add a test  ← head
--   └─ ○ rewrite it instead
--
-- ● marks the turns on the current path (first turn to head), ○ the branches left behind.
-- A turn with one follow-up continues in the same column; only a fork indents.

local compat = require("trellisd.compat")
local format = require("trellisd.format")

local M = {}

M.LEGEND =
  "● current path   ○ left branch   ← head (the next prompt follows it)   [pinned] kept whole"

local QUIET_OUTCOMES = { finished = true, success = true }

--- How a turn is named, here and wherever turns are listed: `/name arguments` for a turn
--- that ran a custom command (Turn.command), whose prompt is the command's expansion; its
--- prompt otherwise.
---@param turn {prompt: string, command?: trellisd.TurnCommand}
---@return string
function M.turn_prompt(turn)
  local ran = compat.value(turn.command)
  if type(ran) ~= "table" then
    return tostring(compat.value(turn.prompt) or "")
  end
  local arguments = compat.value(ran.arguments) or ""
  return arguments ~= "" and ("/" .. ran.name .. " " .. arguments) or ("/" .. ran.name)
end

local function label(turn, on_path, is_head, pinned)
  local text = (on_path and "● " or "○ ") .. format.one_line(M.turn_prompt(turn), 60)
  local outcome = compat.value(turn.outcome)
  if outcome and not QUIET_OUTCOMES[outcome] then
    text = text .. " [" .. outcome .. "]"
  end
  if pinned then
    text = text .. " [pinned]"
  end
  if is_head then
    text = text .. "  ← head"
  end
  return text
end

-- turns: the session's turns, oldest first (session/turns); head: Session.head or nil;
-- pinned: Session.pinned (ids), or nil.
-- Returns entries {turn = Turn or nil (the start), line, on_path, head, pinned}, in display order.
---@param turns trellisd.Turn[]
---@param head trellisd.Id|nil
---@param pinned trellisd.Id[]|nil
---@return {turn: trellisd.Turn|nil, line: string, on_path: boolean, head: boolean, pinned: boolean}[]
function M.build(turns, head, pinned)
  head = compat.value(head)
  local pins = {}
  for _, id in ipairs(compat.value(pinned) or {}) do
    pins[id] = true
  end
  local by_id, children = {}, { [""] = {} }
  for _, t in ipairs(turns) do
    by_id[t.turnId] = t
    children[t.turnId] = children[t.turnId] or {}
  end
  for _, t in ipairs(turns) do
    local parent = compat.value(t.parentTurnId)
    if parent == nil or by_id[parent] == nil then
      parent = ""
    end
    table.insert(children[parent], t)
  end
  local on_path = {}
  local cursor = head
  while cursor and by_id[cursor] and not on_path[cursor] do
    on_path[cursor] = true
    cursor = compat.value(by_id[cursor].parentTurnId)
  end
  -- The current path reads straight down: its turn comes first among its siblings.
  for _, list in pairs(children) do
    local ordered = {}
    for _, t in ipairs(list) do
      if on_path[t.turnId] then
        table.insert(ordered, 1, t)
      else
        ordered[#ordered + 1] = t
      end
    end
    for i, t in ipairs(ordered) do
      list[i] = t
    end
  end

  local entries = {
    {
      turn = nil,
      line = "◇ (start: an empty conversation)" .. (head == nil and "  ← head" or ""),
      on_path = true,
      head = head == nil,
    },
  }
  -- Depth first, without recursion: a conversation can be thousands of turns deep.
  local stack = { { list = children[""], prefix = "", i = 0 } }
  while #stack > 0 do
    local frame = stack[#stack]
    frame.i = frame.i + 1
    local t = frame.list[frame.i]
    if t == nil then
      stack[#stack] = nil
    else
      local n, i, prefix = #frame.list, frame.i, frame.prefix
      local first, rest = prefix, prefix
      if n > 1 then
        first = prefix .. (i == n and "└─ " or "├─ ")
        rest = prefix .. (i == n and "   " or "│  ")
      end
      entries[#entries + 1] = {
        turn = t,
        line = first .. label(t, on_path[t.turnId] == true, t.turnId == head, pins[t.turnId]),
        on_path = on_path[t.turnId] == true,
        head = t.turnId == head,
        pinned = pins[t.turnId] == true,
      }
      stack[#stack + 1] = { list = children[t.turnId], prefix = rest, i = 0 }
    end
  end
  return entries
end

--- The entries' lines, in order.
---@param entries {line: string}[]
---@return string[]
function M.lines(entries)
  local lines = {}
  for i, e in ipairs(entries) do
    lines[i] = e.line
  end
  return lines
end

return M
