-- Pins: a pinned turn is sent to the model verbatim after compaction, and the prompt
-- cache's breakpoint sits after the last pinned one (session/pin, session/unpin). The tree
-- buffer marks pinned turns and pins or unpins the turn under the cursor with p.

local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local tree = require("trellisd.tree")
local ui = require("trellisd.ui")

local M = {}

--- Whether the session (Session.pinned) pins the turn.
---@param session table
---@param turn_id string
---@return boolean
function M.is_pinned(session, turn_id)
  for _, id in ipairs(compat.value(session and session.pinned) or {}) do
    if id == turn_id then
      return true
    end
  end
  return false
end

--- Pin the turn, or unpin it when it is pinned; then cb() with state.session updated.
---@param state {id: string, session: table}
---@param turn {turnId: string, prompt: string}
---@param cb fun()
---@param offer_takeover? fun(state: table, err: table, retry: fun()) asked when another daemon writes the session
function M.toggle(state, turn, cb, offer_takeover)
  local pinned = M.is_pinned(state.session, turn.turnId)
  local method = pinned and "session/unpin" or "session/pin"
  daemon.request(method, { sessionId = state.id, turnId = turn.turnId }, function(err, session)
    if err and err.code == Connection.LEASE_HELD and offer_takeover then
      offer_takeover(state, err, function()
        M.toggle(state, turn, cb)
      end)
      return
    end
    if err then
      ui.error("could not " .. (pinned and "unpin" or "pin") .. " the turn: " .. err.message)
      return
    end
    state.session.pinned = compat.value(session.pinned) or {}
    ui.notify(
      (pinned and "unpinned: " or "pinned (sent whole after compaction): ")
        .. "“"
        .. format.one_line(tree.turn_prompt(turn), 40)
        .. "”"
    )
    cb()
  end)
end

return M
