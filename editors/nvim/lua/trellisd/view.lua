-- A conversation buffer: the history, and the reply painted in as it streams.
--
-- Streamed pieces are not written one by one: they are gathered and painted together
-- every `flush_ms` milliseconds, so a model that streams a thousand pieces a second costs
-- the editor some twenty-five buffer changes a second, not a thousand.
--
-- The buffer is built of blocks (a heading with the prompt, a tool call, a footer) with a
-- blank line between them, and streamed text, which continues the last line it wrote until
-- a block ends it.

local compat = require("trellisd.compat")
local format = require("trellisd.format")
local images = require("trellisd.images")
local modes = require("trellisd.modes")
local plan = require("trellisd.plan")
local thoughts = require("trellisd.thoughts")
local tree = require("trellisd.tree")

-- The extmarks on the marks of planned turns ("> plan: 2 of 5 done"), by which the key
-- on a planned turn finds its turn.
local PLANS = vim.api.nvim_create_namespace("trellisd.plans")

---@class trellisd.View
---@field name string the buffer's name, trellis://<sessionId>
---@field buf integer
---@field pending string[] streamed pieces not painted yet
---@field writes integer how many times the buffer was written
---@field header_count integer|nil how many lines the header has
---@field planned table<integer, trellisd.Id> the turn of each plan mark's extmark
---@field names table<trellisd.Id, string> the turns drawn, named for a person (trellisd.plan)
---@field thinking? {step: integer, first: integer, count: integer, writes: integer} the thought block drawn last
local View = {}
View.__index = View

local function find_buffer(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
end

--- The conversation buffer named `name` (the one there is, or a new one).
---@param name string
---@param flush_ms integer how often streamed text is painted
---@return trellisd.View
function View.new(name, flush_ms)
  local self = setmetatable({}, View)
  self.name = name
  self.flush_ms = flush_ms or 40
  self.pending = {}
  self.scheduled = false
  self.open = false -- streamed text continues the last line
  self.writes = 0 -- buffer changes made, for tests of the batching
  self.planned = {}
  self.names = {}
  local buf = find_buffer(name)
  if buf == nil then
    buf = vim.api.nvim_create_buf(true, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  self.buf = buf
  local bo = vim.bo[buf]
  bo.buftype = "nofile"
  bo.bufhidden = "hide"
  bo.swapfile = false
  bo.undolevels = -1
  bo.modifiable = false
  bo.filetype = "markdown"
  -- markdown's syntax marks a lone "_" inside a word (write_file) as an error: it is not one
  vim.api.nvim_buf_call(buf, function()
    vim.cmd("silent! syntax clear markdownError")
  end)
  return self
end

--- Whether the buffer still exists.
---@return boolean
function View:valid()
  return self.buf ~= nil and vim.api.nvim_buf_is_valid(self.buf)
end

-- Write lines [first, last) of the buffer, keeping windows that showed its end at its end.
function View:_set(first, last, lines)
  if not self:valid() then
    return
  end
  local buf = self.buf
  local count = vim.api.nvim_buf_line_count(buf)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if vim.api.nvim_win_get_cursor(win)[1] >= count then
      following[#following + 1] = win
    end
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, first, last, false, lines)
  vim.bo[buf].modifiable = false
  self.writes = self.writes + 1
  local new_count = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(following) do
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_set_cursor(win, { new_count, 0 })
    end
  end
end

function View:_last_line()
  local count = vim.api.nvim_buf_line_count(self.buf)
  return vim.api.nvim_buf_get_lines(self.buf, count - 1, count, false)[1] or "", count
end

-- Put the extmarks of plan marks: `marks` ({row, turnId}, rows 1-based) from line `offset`.
function View:_place_marks(marks, offset)
  for _, m in ipairs(marks or {}) do
    local id = vim.api.nvim_buf_set_extmark(self.buf, PLANS, offset + m.row - 1, 0, {})
    self.planned[id] = m.turnId
  end
end

-- Replace the whole buffer; `marks`: where the planned turns' marks are (View.history_lines).
---@param lines string[]
---@param marks? {row: integer, turnId: trellisd.Id}[]
function View:render(lines, marks)
  self.pending = {}
  self.open = false
  if self:valid() then
    vim.api.nvim_buf_clear_namespace(self.buf, PLANS, 0, -1)
  end
  self.planned = {}
  self:_set(0, -1, lines)
  if self:valid() then
    self:_place_marks(marks, 0)
  end
end

-- Add the mark of a planned turn that ended here ("> plan: 2 of 5 done"), as a block.
---@param turn_id trellisd.Id
---@param p trellisd.Plan
function View:plan_mark(turn_id, p)
  self:block({ plan.mark(p) })
  if self:valid() then
    self:_place_marks({ { row = 1, turnId = turn_id } }, vim.api.nvim_buf_line_count(self.buf) - 1)
  end
end

--- The planned turn whose lines hold row `row` (1-based): the one of the plan mark between
--- the "### You" above it and the next; nil when that turn made no plan.
---@param row integer
---@return trellisd.Id|nil
function View:planned_at(row)
  if not self:valid() then
    return nil
  end
  local all = vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)
  local first, last = nil, #all
  for i = math.min(row, #all), 1, -1 do
    if all[i] == "### You" then
      first = i
      break
    end
  end
  if first == nil then
    return nil
  end
  for i = row + 1, #all do
    if all[i] == "### You" then
      last = i - 1
      break
    end
  end
  local found = vim.api.nvim_buf_get_extmarks(self.buf, PLANS, { first - 1, 0 }, { last - 1, 0 }, {})
  local mark = found[#found]
  return mark and self.planned[mark[1]] or nil
end

-- Paint what has streamed since the last paint.
function View:flush()
  if #self.pending == 0 or not self:valid() then
    self.pending = {}
    return
  end
  local text = table.concat(self.pending)
  self.pending = {}
  local last, count = self:_last_line()
  if self.open then
    self:_set(count - 1, count, compat.lines(last .. text))
  else
    local lines = compat.lines(text)
    if last ~= "" then
      table.insert(lines, 1, "")
    end
    if count == 1 and last == "" then
      self:_set(0, 1, lines)
    else
      self:_set(count, count, lines)
    end
    self.open = true
  end
end

-- Queue a streamed piece; it is painted within flush_ms.
---@param text string|nil
function View:stream(text)
  if text == nil or text == "" then
    return
  end
  self.pending[#self.pending + 1] = text
  if not self.scheduled then
    self.scheduled = true
    vim.defer_fn(function()
      self.scheduled = false
      self:flush()
    end, self.flush_ms)
  end
end

-- Draw the thought of step `step` so far as a block at the end, in place of the block it
-- drew before when nothing was written after it.
---@param step integer
---@param lines string[]
function View:thought(step, lines)
  self:flush()
  if not self:valid() then
    return
  end
  local at = self.thinking
  if at and at.step == step and at.writes == self.writes then
    self:_set(at.first, at.first + at.count, lines)
  else
    self:block(lines)
  end
  local count = vim.api.nvim_buf_line_count(self.buf)
  self.thinking = { step = step, first = count - #lines, count = #lines, writes = self.writes }
end

-- The next streamed text starts a new paragraph.
function View:paragraph()
  self:flush()
  self.open = false
end

-- Add a block of lines at the end, after a blank line; it ends streamed text.
---@param lines string[]
function View:block(lines)
  self:flush()
  if not self:valid() then
    return
  end
  local last, count = self:_last_line()
  local out = {}
  if last ~= "" then
    out[1] = ""
  end
  for _, l in ipairs(lines) do
    out[#out + 1] = l
  end
  if count == 1 and last == "" then
    self:_set(0, 1, out)
  else
    self:_set(count, count, out)
  end
  self.open = false
end

-- Replace the header (the first lines, as many as the header had) with `lines`.
---@param lines string[]
function View:set_header(lines)
  self:_set(0, self.header_count or 0, lines)
  self.header_count = #lines
end

--- The line that stands for the turns before those drawn, until they are loaded.
View.EARLIER = "↑ earlier turns: [[ or :TrellisEarlier loads them"

-- Append the lines of history turns to `lines`, shaped as a live turn is painted: a turn
-- shows every step's text (t.texts, from run/steps) or else its reply (the last step's); a
-- turn that carries out a plan says whose, and a planned turn ends with its plan's mark.
-- Returns `lines` and where the marks are ({row, turnId}); `names` gets each turn's name.
local function turn_lines(lines, turns, live, names)
  local marks = {}
  for _, t in ipairs(turns) do
    local follows = compat.value(t.followsPlan)
    if type(follows) == "table" then -- its prompt is the plan: named after the planned turn
      local name = names[follows.turnId] or plan.turn_name(follows.turnId)
      names[t.turnId] = plan.carried_out(name)
    else
      names[t.turnId] = plan.turn_name(t.turnId, tree.turn_prompt(t))
    end
  end
  local function block(b)
    if #lines > 0 and lines[#lines] ~= "" then
      lines[#lines + 1] = ""
    end
    for _, l in ipairs(b) do
      lines[#lines + 1] = l
    end
  end
  for _, t in ipairs(turns) do
    local heading = View.prompt_lines(tree.turn_prompt(t), nil, compat.value(t.images))
    local follows = compat.value(t.followsPlan)
    if type(follows) == "table" then
      local name = names[follows.turnId] or plan.turn_name(follows.turnId)
      table.insert(heading, 2, plan.follows_line(name))
    end
    block(heading)
    local texts = t.texts
    if texts == nil then
      local reply = compat.value(t.reply) or ""
      texts = reply ~= "" and { reply } or {}
    end
    for _, text in ipairs(texts) do
      lines[#lines + 1] = ""
      local drawn = type(text) == "table" and thoughts.lines(text.thought) or compat.lines(text)
      for _, l in ipairs(drawn) do
        lines[#lines + 1] = l
      end
    end
    local made = compat.value(t.plan)
    if type(made) == "table" and t.turnId ~= live then
      block({ plan.mark(made) })
      marks[#marks + 1] = { row = #lines, turnId = t.turnId }
    end
    if t.turnId ~= live then
      block({ format.footer(t) })
    end
  end
  return lines, marks
end

-- The lines of a conversation from its history, shaped as a live one is painted.
-- session: a Session; turns: its path (or its newest page), first turn to head; live: the
-- id of a turn still running, drawn without a footer so that its reply can go on streaming
-- after it; lineage: see View.header; earlier: older turns exist (View.EARLIER is drawn).
---@param session trellisd.Session
---@param turns trellisd.Turn[]
---@param live? trellisd.Id
---@param lineage? string
---@param earlier? boolean
---@param names? table<trellisd.Id, string> gets each turn's name (View.names)
---@return string[] lines
---@return {row: integer, turnId: trellisd.Id}[] marks where the planned turns' marks are
function View.history_lines(session, turns, live, lineage, earlier, names)
  local lines = {}
  for _, l in ipairs(View.header(session, lineage)) do
    lines[#lines + 1] = l
  end
  if earlier then
    lines[#lines + 1] = ""
    lines[#lines + 1] = View.EARLIER
  end
  return turn_lines(lines, turns, live, names or {})
end

-- Draw older turns above those drawn, where View.EARLIER stands (kept when `more`). False
-- when the buffer has no such line.
---@param turns trellisd.Turn[]
---@param more boolean
---@return boolean
function View:prepend(turns, more)
  if not self:valid() then
    return false
  end
  local all = vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)
  for i, l in ipairs(all) do
    if l == View.EARLIER then
      local lines, marks = turn_lines(more and { View.EARLIER } or {}, turns, nil, self.names)
      if all[i + 1] ~= "" then
        lines[#lines + 1] = "" -- the turns below keep their blank line above them
      end
      self:_set(i - 1, i, lines)
      self:_place_marks(marks, i - 1)
      return true
    end
  end
  return false
end

-- Draw texts (a paragraph each) right under the last "### trellisd" heading: the earlier
-- steps of the turn being streamed, above what it shows.
---@param texts string[]
function View:insert_under_reply_heading(texts)
  if not self:valid() then
    return
  end
  local all = vim.api.nvim_buf_get_lines(self.buf, 0, -1, false)
  for i = #all, 1, -1 do
    if all[i] == "### trellisd" then
      local lines = {}
      for _, text in ipairs(texts) do
        lines[#lines + 1] = ""
        for _, l in ipairs(compat.lines(text)) do
          lines[#lines + 1] = l
        end
      end
      self:_set(i, i, lines)
      return
    end
  end
end

-- The title, the folder and id, a worktree session's branch and base ("⎇ trellisd/x → main"),
-- where the session came from when it was forked (lineage: "forked from “…” at turn 3", or
-- nil), the usage, the walls its programs run in ("walls: workspace-write · network off"),
-- its approval mode ("approval: ask · …") and the newest plan (its section, trellisd.plan).
---@param session trellisd.Session
---@param lineage? string
---@param usage? trellisd.Usage
---@param walls? string the walls' line (trellisd.walls)
---@param mode? trellisd.ApprovalMode
---@param live? trellisd.LivePlan
---@return string[]
function View.header(session, lineage, usage, walls, mode, live)
  local lines = {
    "# " .. format.title(session),
    format.folder(session.root) .. " · " .. tostring(session.sessionId),
  }
  local mark = format.worktree(session)
  if mark then
    lines[#lines + 1] = mark
  end
  if lineage then
    lines[#lines + 1] = lineage
  end
  if usage then
    lines[#lines + 1] = format.usage_line(usage)
  end
  if walls then
    lines[#lines + 1] = walls
  end
  local approval = modes.line(mode)
  if approval then
    lines[#lines + 1] = approval
  end
  if live then
    vim.list_extend(lines, plan.section(live))
  end
  return lines
end

--- The heading of a prompt and its lines.
---@param prompt string|nil
---@param attached? trellisd.Attached[] the image files that go with it
---@param carried? trellisd.ImageRef[] the images it carried (Turn.images)
---@return string[]
function View.prompt_lines(prompt, attached, carried)
  local lines = { "### You" }
  for _, l in ipairs(compat.lines(tostring(prompt or ""))) do
    lines[#lines + 1] = l
  end
  if attached and #attached > 0 then
    lines[#lines + 1] = ""
    for _, a in ipairs(attached) do
      lines[#lines + 1] = images.attached_line(a)
    end
  end
  if type(carried) == "table" and #carried > 0 then
    lines[#lines + 1] = ""
    for _, ref in ipairs(carried) do
      lines[#lines + 1] = images.ref_line(ref)
    end
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "### trellisd"
  return lines
end

return View
