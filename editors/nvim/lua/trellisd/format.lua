-- How the plugin words things: footers, list entries, times. Pure functions of their
-- arguments, so they are tested on their own.

local compat = require("trellisd.compat")

local M = {}

--- `text` quoted for the conversation: its first line after `prefix`, the others after "> ".
---@param prefix string
---@param text any
---@return string[]
function M.quote(prefix, text)
  local lines = {}
  for i, l in ipairs(compat.lines(tostring(text or ""))) do
    lines[#lines + 1] = (i == 1 and prefix or "> ") .. l
  end
  return lines
end

-- The first line of `text`, cut to `max` characters (not bytes) with an ellipsis.
---@param text any
---@param max? integer 60 when not given
---@return string
function M.one_line(text, max)
  text = tostring(text or "")
  local first = text:match("^[^\n]*")
  local cut = first ~= text
  max = max or 60
  if vim.fn.strchars(first) > max then
    first = vim.fn.strcharpart(first, 0, max - 1)
    cut = true
  end
  return cut and (first .. "…") or first
end

--- "1 turn", "3 turns".
---@param n integer
---@param one string the noun for one
---@param many string for any other number
---@return string
function M.count(n, one, many)
  return n .. " " .. (n == 1 and one or many)
end

local function number(v)
  v = compat.value(v)
  return type(v) == "number" and v or nil
end

-- "52 tokens (in 40, out 12)", "52 tokens (in 40, out 12, reasoning 5)" (of out), or nil
-- when the provider reported nothing.
---@param tokens trellisd.Tokens|nil
---@return string|nil
function M.tokens(tokens)
  tokens = compat.value(tokens)
  if type(tokens) ~= "table" then
    return nil
  end
  local input, output, total = number(tokens.input), number(tokens.output), number(tokens.total)
  local cached = number(tokens.cached)
  if total == nil and input and output then
    total = input + output
  end
  if total == nil then
    return "tokens not reported"
  end
  local detail = {}
  if input then
    detail[#detail + 1] = "in " .. input
  end
  if output then
    detail[#detail + 1] = "out " .. output
  end
  if cached and cached > 0 then
    detail[#detail + 1] = "cached " .. cached
  end
  local reasoning = number(tokens.reasoning)
  if reasoning then
    detail[#detail + 1] = "reasoning " .. reasoning
  end
  local text = M.count(total, "token", "tokens")
  if #detail > 0 then
    text = text .. " (" .. table.concat(detail, ", ") .. ")"
  end
  return text
end

--- A cost in dollars as a person reads it, or nil when the provider priced nothing.
---@param cost number|nil
---@return string|nil
function M.cost(cost)
  cost = number(cost)
  if cost == nil then
    return nil
  end
  if cost == 0 then
    return "$0"
  end
  if cost < 0.01 then
    return string.format("$%.4f", cost)
  end
  return string.format("$%.2f", cost)
end

-- A number of tokens the short way: 950, 12.3k, 1.05M.
---@param n number|nil
---@return string
function M.short_tokens(n)
  n = number(n) or 0
  if n >= 1000000 then
    return string.format("%.2fM", n / 1000000)
  elseif n >= 1000 then
    return string.format("%.1fk", n / 1000)
  end
  return tostring(math.floor(n))
end

-- The share of the context window a session/usage says is filled, in whole percent.
---@param u trellisd.Usage
---@return integer
function M.context_percent(u)
  local window = number(compat.value(u.contextWindow)) or 0
  if window <= 0 then
    return 0
  end
  return math.floor(100 * (number(compat.value(u.contextTokens)) or 0) / window + 0.5)
end

-- The context meter and the session's cost from a session/usage, for the session window:
-- "context 12.3k of 128.0k tokens (10%) · $0.0123 this session".
---@param u trellisd.Usage
---@return string
function M.usage_line(u)
  local text = "context "
    .. M.short_tokens(compat.value(u.contextTokens))
    .. " of "
    .. M.short_tokens(compat.value(u.contextWindow))
    .. " tokens ("
    .. M.context_percent(u)
    .. "%)"
  local cost = M.cost(compat.value((compat.value(u.cost) or {}).session))
  if cost then
    text = text .. " · " .. cost .. " this session"
  end
  return text
end

-- The same, short, for a statusline: "ctx 10% · $0.0123".
---@param u trellisd.Usage
---@return string
function M.usage_short(u)
  local text = "ctx " .. M.context_percent(u) .. "%"
  local cost = M.cost(compat.value((compat.value(u.cost) or {}).session))
  if cost then
    text = text .. " · " .. cost
  end
  return text
end

-- The line under a turn: outcome, tokens, model and cost, e.g. "*finished · 52 tokens
-- (in 40, out 12) · gpt-4o-mini · $0.0004*". `t` is a Turn or a TurnResult.
---@param t trellisd.Turn|trellisd.TurnResult
---@return string
function M.footer(t)
  local outcome = compat.value(t.outcome) or "unknown"
  local err = compat.value(t.error)
  local head = outcome
  if err and err ~= "" then
    head = outcome .. ": " .. M.one_line(err, 160)
  end
  local parts = { head }
  parts[#parts + 1] = M.tokens(t.tokens)
  local model = compat.value(t.model)
  if type(model) == "string" and model ~= "" then
    parts[#parts + 1] = model
  end
  parts[#parts + 1] = M.cost(t.cost)
  return "*" .. table.concat(parts, " · ") .. "*"
end

local FIRST_KEYS = { path = 1, command = 2, pattern = 3, old = 4, new = 5, content = 6 }

local function argument_value(v)
  v = compat.value(v)
  if type(v) == "string" then
    local lines = compat.lines(v)
    local text = M.one_line(v, 32)
    if #lines > 1 then
      text = text .. " (" .. M.count(#lines, "line", "lines") .. ")"
    end
    return text
  elseif type(v) == "table" then
    local ok, text = pcall(compat.encode, v)
    return M.one_line(ok and text:gsub("\\/", "/") or vim.inspect(v), 32)
  end
  return tostring(v)
end

-- A tool's arguments for a person: "path: a.txt, content: hello… (3 lines)", the path or
-- command first, each value cut short, the whole cut to `max` characters.
---@param arguments table|nil
---@param max? integer
---@return string
function M.arguments(arguments, max)
  arguments = compat.value(arguments)
  if type(arguments) ~= "table" or next(arguments) == nil then
    return "no arguments"
  end
  local keys = vim.tbl_keys(arguments)
  table.sort(keys, function(a, b)
    local ra, rb = FIRST_KEYS[a] or 99, FIRST_KEYS[b] or 99
    if ra ~= rb then
      return ra < rb
    end
    return tostring(a) < tostring(b)
  end)
  local parts = {}
  for _, k in ipairs(keys) do
    parts[#parts + 1] = tostring(k) .. ": " .. argument_value(arguments[k])
  end
  return M.one_line(table.concat(parts, ", "), max or 120)
end

-- Text as a markdown code span, whatever backticks it holds.
---@param text any
---@return string
function M.code(text)
  text = tostring(text)
  local longest = 0
  for run in text:gmatch("`+") do
    longest = math.max(longest, #run)
  end
  local fence = string.rep("`", longest + 1)
  if longest > 0 then
    return fence .. " " .. text .. " " .. fence
  end
  return fence .. text .. fence
end

-- "`write_file` `{"path":"a.txt"}`": a tool and its arguments, as code.
---@param name string|nil
---@param arguments table|nil
---@param max? integer
---@return string
function M.call(name, arguments, max)
  return M.code(tostring(compat.value(name) or "?")) .. " " .. M.code(M.arguments(arguments, max))
end

-- The lines that show a tool call and its result in the conversation.
---@param call trellisd.ToolCall|nil
---@param result string|nil the tool's result
---@return string[]
function M.tool_lines(call, result)
  call = compat.value(call) or {}
  local lines = { "> tool " .. M.call(call.name, call.arguments) }
  result = compat.value(result)
  if result ~= nil then
    local all = compat.lines(tostring(result))
    local first = M.one_line(all[1], 120)
    if #all > 1 then
      first = first .. " (" .. M.count(#all, "line", "lines") .. ")"
    end
    lines[#lines + 1] = "> → " .. first
  end
  return lines
end

-- The line that shows a tool call when it changes status (session/toolCall): the whole
-- call when the model proposes it, then the tool's name and its new status.
---@param tool string
---@param arguments table|nil
---@param status trellisd.CallStatus
---@return string
function M.call_status(tool, arguments, status)
  if status == "proposed" then
    return "> tool " .. M.call(tool, arguments) .. " · proposed"
  end
  return "> " .. M.code(tostring(compat.value(tool) or "?")) .. " " .. tostring(status)
end

-- The line under a prompt that says what the editor attached to it.
---@param context trellisd.ContextEntry[]
---@return string
function M.context_line(context)
  local parts = {}
  for _, entry in ipairs(context) do
    local path = vim.fn.fnamemodify(entry.path, ":~:.")
    if entry.range then
      parts[#parts + 1] = "lines "
        .. entry.range.startLine
        .. "–"
        .. entry.range.endLine
        .. " of "
        .. path
    else
      parts[#parts + 1] = path
    end
  end
  return "> with " .. table.concat(parts, ", ")
end

-- A running command's output as the conversation shows it: each line after "│ ".
-- `at_start`: the previous piece ended a line. Returns the text and whether this one did.
---@param text string
---@param at_start boolean
---@return string text
---@return boolean ends_line
function M.output(text, at_start)
  local ends = text:sub(-1) == "\n"
  local body = ends and text:sub(1, -2) or text
  body = body:gsub("\n", "\n│ ")
  if at_start then
    body = "│ " .. body
  end
  return body .. (ends and "\n" or ""), ends
end

-- Days since 1970-01-01 of a date in the proleptic Gregorian calendar (H. Hinnant's).
local function days_from_civil(y, m, d)
  if m <= 2 then
    y = y - 1
  end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

-- Seconds since the epoch of an ISO 8601 timestamp ("2026-12-02T18:10:00.207+00:00").
---@param text trellisd.Timestamp|nil
---@return integer|nil
function M.parse_time(text)
  text = compat.value(text)
  if type(text) ~= "string" then
    return nil
  end
  local y, mo, d, h, mi, s, rest = text:match("^(%d+)-(%d+)-(%d+)[T ](%d+):(%d+):(%d+)(.*)$")
  if not y then
    return nil
  end
  local offset = 0
  local sign, oh, om = rest:match("([+-])(%d%d):?(%d%d)$")
  if sign then
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == "+" and 1 or -1)
  end
  local days = days_from_civil(tonumber(y), tonumber(mo), tonumber(d))
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s) - offset
end

-- "just now", "5 min ago", "3 h ago", "2 days ago", else the date.
---@param text trellisd.Timestamp|nil
---@param now? integer seconds since the epoch
---@return string
function M.ago(text, now)
  local t = M.parse_time(text)
  if not t then
    return "?"
  end
  local d = math.max(0, (now or os.time()) - t)
  if d < 60 then
    return "just now"
  elseif d < 3600 then
    return math.floor(d / 60) .. " min ago"
  elseif d < 86400 then
    return math.floor(d / 3600) .. " h ago"
  elseif d < 7 * 86400 then
    return M.count(math.floor(d / 86400), "day", "days") .. " ago"
  end
  return os.date("!%Y-%m-%d", t)
end

-- A folder as a person reads it: the home folder as ~.
---@param root string|nil
---@param home? string $HOME when not given
---@return string
function M.folder(root, home)
  root = tostring(compat.value(root) or "")
  home = home or vim.env.HOME
  if home and home ~= "" and home ~= "/" then
    if root == home then
      return "~"
    end
    if root:sub(1, #home + 1) == home .. "/" then
      return "~" .. root:sub(#home + 1)
    end
  end
  return root
end

--- The session's title, or "(untitled)".
---@param session trellisd.Session|{title: string}
---@return string
function M.title(session)
  local title = compat.value(session.title)
  if title == nil or title == "" then
    return "(untitled)"
  end
  return M.one_line(title, 60)
end

-- One entry of :TrellisSessions: "title · folder · 3 turns · 5 min ago", then, for a fork,
-- "· forked from “origin”" (titles: sessionId -> title of the sessions listed with it), and
-- for a search hit "— the snippet that matched".
---@param session trellisd.SessionSummary
---@param now? integer seconds since the epoch
---@param home? string
---@param titles? table<trellisd.Id, string>
---@return string
function M.session_item(session, now, home, titles)
  local parts = {
    M.title(session),
    M.folder(session.root, home),
    M.count(number(session.turns) or 0, "turn", "turns"),
    M.ago(session.updatedAt, now),
  }
  local from = compat.value(session.forkedFrom)
  if type(from) == "table" then
    local origin = titles and titles[from.sessionId]
    parts[#parts + 1] = origin and ("forked from “" .. M.one_line(origin, 40) .. "”") or "a fork"
  elseif compat.value(session.importedFrom) ~= nil then
    parts[#parts + 1] = "imported"
  end
  local parent = compat.value(session.parentSessionId)
  if parent ~= nil then
    local title = titles and titles[parent]
    parts[1] = "↳ " .. parts[1]
    parts[#parts + 1] = title and ("child of “" .. M.one_line(title, 40) .. "”")
      or "a child session"
  end
  local mark = M.worktree(session)
  if mark then
    parts[#parts + 1] = mark
  end
  local text = table.concat(parts, " · ")
  local match = compat.value(session.match)
  local snippet = type(match) == "table" and compat.value(match.snippet) or nil
  if type(snippet) == "string" and snippet ~= "" then
    text = text .. " — " .. M.one_line((snippet:gsub("%s+", " ")), 80)
  end
  return text
end

--- The sessions of a list with each child session (parentSessionId) moved right under its
--- parent when the parent is listed, in the order they were listed.
---@param list trellisd.SessionSummary[]
---@return trellisd.SessionSummary[]
function M.nest(list)
  local listed, under = {}, {}
  for _, s in ipairs(list) do
    listed[s.sessionId] = true
  end
  for _, s in ipairs(list) do
    local parent = compat.value(s.parentSessionId)
    if parent ~= nil and listed[parent] then
      under[parent] = under[parent] or {}
      table.insert(under[parent], s)
    end
  end
  local out = {}
  local function add(s)
    out[#out + 1] = s
    for _, c in ipairs(under[s.sessionId] or {}) do
      add(c)
    end
  end
  for _, s in ipairs(list) do
    local parent = compat.value(s.parentSessionId)
    if parent == nil or not listed[parent] then
      add(s)
    end
  end
  return out
end

-- Where a session came from, in words, or nil: "forked from “fix the parser” at turn 3".
-- origin: {title = ..., turn = its place on the origin's path (0: before the first turn)},
-- or nil when the origin is not in the store any more.
local function forked(from, origin)
  if origin == nil or origin.title == nil then
    return "forked from a session that was deleted"
  end
  local title = origin.title ~= "" and M.one_line(origin.title, 60) or "an untitled session"
  if compat.value(from.turnId) == nil or origin.turn == 0 then
    return "forked from “" .. title .. "” before its first turn"
  end
  if origin.turn then
    return "forked from “" .. title .. "” at turn " .. origin.turn
  end
  return "forked from “" .. title .. "”"
end

-- Whether the session is a copy imported with new ids (every imported session names where
-- it came from in importedFrom; one imported as it was keeps its id).
local function imported_copy(session)
  local from = compat.value(session.importedFrom)
  if type(from) == "table" then
    return from.sessionId ~= session.sessionId
  end
  return from ~= nil
end

-- Where the session came from: a fork's origin, an imported copy, or both (a copy of a fork).
---@param session trellisd.Session
---@param origin? {title: string, turn: integer|nil} the fork's origin, once looked up
---@return string|nil
function M.lineage(session, origin)
  local from = compat.value(session.forkedFrom)
  local parts = {}
  if type(from) == "table" then
    parts[#parts + 1] = forked(from, origin)
  end
  if imported_copy(session) then
    parts[#parts + 1] = "imported as a copy"
  end
  if compat.value(session.parentSessionId) ~= nil then
    parts[#parts + 1] = "a child session, started by a task call of another session"
  end
  return #parts > 0 and table.concat(parts, " · ") or nil
end

--- A worktree session's mark: "⎇ trellisd/fix-login → main" (its branch, and the base a
--- merge goes into), or nil for a session without a worktree.
---@param session trellisd.Session
---@return string|nil
function M.worktree(session)
  local wt = compat.value(session.worktree)
  if type(wt) ~= "table" then
    return nil
  end
  return "⎇ " .. tostring(wt.branch) .. " → " .. tostring(wt.base)
end

--- Who else may have made a shared change: "shared with session “fix the parser”", or the
--- session's id prefix when its title is not known here (names: sessionId -> title).
---@param shared_with trellisd.SharedWith[]|nil
---@param names? table<string, string>
---@return string
function M.shared_with(shared_with, names)
  local seen, who = {}, {}
  for _, s in ipairs(compat.value(shared_with) or {}) do
    local id = tostring(s.sessionId)
    if not seen[id] then
      seen[id] = true
      local title = names and names[id]
      who[#who + 1] = (title and title ~= "") and ("“" .. M.one_line(title, 40) .. "”")
        or id:sub(1, 8)
    end
  end
  if #who == 0 then
    return "shared with another session"
  end
  return "shared with session " .. table.concat(who, ", ")
end

--- The question a restore refused with -32020 asks before forcing it: the paths another
--- session's command may have changed at the same time (data.shared), then those a person
--- changed since the agent wrote them.
---@param data table the error's data: {paths, shared?}
---@param names? table<string, string> sessionId -> title
---@return string
function M.restore_conflict(data, names)
  local shared, by_path = {}, {}
  for _, s in ipairs(compat.value(data.shared) or {}) do
    by_path[s.path] = true
    shared[#shared + 1] = s.path .. " (" .. M.shared_with(s.sharedWith, names) .. ")"
  end
  local edited = {}
  for _, path in ipairs(compat.value(data.paths) or {}) do
    if not by_path[path] then
      edited[#edited + 1] = path
    end
  end
  local parts = {}
  if #shared > 0 then
    parts[1] = "another session's command ran at the same time and may have made these changes: "
      .. table.concat(shared, ", ")
  end
  if #edited > 0 then
    parts[#parts + 1] = "changed since the agent wrote them: " .. table.concat(edited, ", ")
  end
  return table.concat(parts, "; ")
end

-- The file an export is offered as: "Fix the parser!" -> "fix-the-parser.trellisd".
---@param session trellisd.Session
---@return string
function M.export_name(session)
  local slug = tostring(compat.value(session.title) or ""):lower():gsub("[^%w]+", "-")
  slug = slug:gsub("^%-+", ""):sub(1, 60):gsub("%-+$", "")
  if slug == "" then
    slug = tostring(session.sessionId)
  end
  return slug .. ".trellisd"
end

return M
