-- A conversation's history in pages: a session opens with its newest turns
-- (session/reopen with `limit`), and "load earlier turns" ([[ in the buffer,
-- :TrellisEarlier) puts the page before them above them (session/history with the
-- cursor), so that a session of thousands of turns opens as fast as one of ten. A turn of
-- the history shows every step's text (run/steps), not only its reply, which is the last
-- step's.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local thoughts = require("trellisd.thoughts")
local ui = require("trellisd.ui")

local M = {}

--- Turns a page holds: what a session opens with, and what each load adds.
M.PAGE = 50

-- trellisd.Turn (types.lua) has `texts`, set by M.steps.

---@class trellisd.Page
---@field turns trellisd.Turn[] oldest first
---@field cursor? string session/history's cursor for the page before, when there is one

--- Read each turn's steps (run/steps) and set `turn.texts` (thoughts too), then cb(). A turn whose steps
--- cannot be read keeps its reply. The requests go out together.
---@param turns trellisd.Turn[]
---@param cb fun()
function M.steps(turns, cb)
  local waiting = #turns
  if waiting == 0 then
    cb()
    return
  end
  for _, t in ipairs(turns) do
    daemon.request("run/steps", { runId = t.runId }, function(err, result)
      if not err and type(result) == "table" then
        local texts = thoughts.step_texts(compat.value(result.steps) or {})
        if #texts > 0 then
          t.texts = texts
        end
      end
      waiting = waiting - 1
      if waiting == 0 then
        cb()
      end
    end)
  end
end

--- A running turn joined mid-way is drawn with its stored reply, the text of the last step it
--- committed: the texts of the steps committed before that one, to draw above it, or nil
--- when there are none or the reply is not the last committed step's (an older daemon's).
---@param steps table[] run/steps' steps of the turn so far
---@param current integer|nil the step being streamed (nil: between steps)
---@param reply string the reply drawn
---@return string[]|nil
function M.joined_texts(steps, current, reply)
  local texts = {}
  for _, s in ipairs(steps) do
    local text = compat.value(s.text)
    if (current == nil or s.step < current) and type(text) == "string" and text ~= "" then
      texts[#texts + 1] = text
    end
  end
  if reply == "" then
    return #texts > 0 and texts or nil
  end
  if #texts < 2 or texts[#texts] ~= reply then
    return nil
  end
  texts[#texts] = nil
  return texts
end

--- The page of the session's path before `cursor`, with its steps' texts: cb(err, page).
---@param session_id string
---@param cursor string
---@param cb fun(err: table|nil, page: trellisd.Page|nil)
function M.earlier(session_id, cursor, cb)
  daemon.request(
    "session/history",
    { sessionId = session_id, cursor = cursor, limit = M.PAGE },
    function(err, result)
      if err then
        cb(err, nil)
        return
      end
      local turns = result.turns or {}
      M.steps(turns, function()
        cb(nil, { turns = turns, cursor = compat.value(result.nextCursor) })
      end)
    end
  )
end

--- [[ in a conversation, :TrellisEarlier: draw the page of turns before the first one shown.
---@param state trellisd.State|nil the session (nil: none is current, nothing is done)
function M.load_earlier(state)
  if not state then
    return
  end
  local cursor = state.cursor
  if cursor == nil then
    ui.notify("the conversation is shown from its first turn")
    return
  end
  if state.loading_earlier then
    return
  end
  state.loading_earlier = true
  M.earlier(state.id, cursor, function(err, page)
    state.loading_earlier = nil
    if err then
      ui.error("could not load the earlier turns: " .. err.message)
      return
    end
    if state.cursor ~= cursor then
      return -- the history was drawn again meanwhile
    end
    if state.view:prepend(page.turns, page.cursor ~= nil) then
      state.cursor = page.cursor
    end
  end)
end

return M
