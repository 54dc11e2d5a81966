-- Where a fork came from: the origin's title (session/list) and the forked turn's place on
-- its path (session/turns), said in the conversation's header once known.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")

local M = {}

-- The most pages of a paged request read to find what is looked for.
local MAX_PAGES = 20

--- Every page of a paged request (session/list, session/turns), joined: cb(err, items).
--- `found(items)`: true when what is looked for is among the items, and no page more is read.
---@param method string
---@param params table
---@param key string the answer's list ("sessions", "turns")
---@param cb fun(err: trellisd.Error|nil, items: table[])
---@param found? fun(items: table[]): boolean
function M.all_pages(method, params, key, cb, found)
  local items = {}
  local function page(cursor, n)
    local p = vim.deepcopy(params)
    p.cursor = cursor
    daemon.request(method, p, function(err, result)
      if err then
        cb(err, items)
        return
      end
      vim.list_extend(items, result[key] or {})
      local next_cursor = compat.value(result.nextCursor)
      if next_cursor and n < MAX_PAGES and not (found and found(items)) then
        page(next_cursor, n + 1)
      else
        cb(nil, items)
      end
    end)
  end
  page(nil, 1)
end

--- Look up where the forked `session` came from: done(text), the lineage line of its header
--- (format.lineage), said without the origin when it cannot be found.
---@param session trellisd.Session
---@param done fun(text: string|nil)
function M.describe(session, done)
  local from = compat.value(session.forkedFrom)
  if type(from) ~= "table" then
    return
  end
  local function said(origin)
    done(format.lineage(session, origin))
  end
  M.all_pages("session/list", { limit = 200 }, "sessions", function(err, sessions)
    local title
    for _, s in ipairs(sessions) do
      if s.sessionId == from.sessionId then
        title = compat.value(s.title) or ""
      end
    end
    if err or title == nil then
      said(nil)
      return
    end
    local turn_id = compat.value(from.turnId)
    if turn_id == nil then
      said({ title = title, turn = 0 })
      return
    end
    M.all_pages("session/turns", { sessionId = from.sessionId }, "turns", function(e, turns)
      if e then
        said(nil)
        return
      end
      local parents = {}
      for _, t in ipairs(turns) do
        parents[t.turnId] = compat.value(t.parentTurnId) or false
      end
      local depth, cursor = 0, turn_id
      while cursor and parents[cursor] ~= nil and depth <= #turns do
        depth = depth + 1
        cursor = parents[cursor]
      end
      said({ title = title, turn = depth > 0 and depth or nil })
    end)
  end, function(sessions)
    for _, s in ipairs(sessions) do
      if s.sessionId == from.sessionId then
        return true
      end
    end
    return false
  end)
end

return M
