-- Opening sessions: a new one over the current folder (session/open), the one a prompt goes
-- to, one picked from the list or a search (session/list), and reopening one
-- (session/reopen), which draws its history and follows a turn still running. A daemon
-- started again after an exit reopens the current session first. Either way the walls its
-- programs run in are read for its header (trellisd.walls), and its custom commands for the
-- completion of :Trellis /name (trellisd.commands).

local commands = require("trellisd.commands")
local compat = require("trellisd.compat")
local config = require("trellisd.config")
local daemon = require("trellisd.daemon")
local follow = require("trellisd.follow")
local format = require("trellisd.format")
local paging = require("trellisd.paging")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local View = require("trellisd.view")
local walls = require("trellisd.walls")

local M = {}

local opening = {} -- root -> the callbacks waiting for the session being opened over it

local function cwd_root()
  local cwd = vim.fn.getcwd()
  return compat.uv.fs_realpath(cwd) or cwd
end

--- Reopen a session: its newest turns drawn, a turn still running followed; then cb(state).
---@param id trellisd.Id
---@param cb? fun(state: trellisd.State)
function M.reopen(id, cb)
  -- The configured MCP servers again: a daemon started since the session was opened has
  -- only the config file's and the project's.
  local params = { sessionId = id, mcpServers = config.options.mcp_servers, limit = paging.PAGE }
  daemon.request("session/reopen", params, function(err, result)
    if err then
      ui.error("could not reopen the session: " .. err.message)
      return
    end
    local state = sessions.adopt(result)
    state.cursor = compat.value(result.historyCursor)
    local history = result.history or {}
    local live = compat.value(result.running)
    if live and not (state.running and not state.running.followed) then
      follow.follow(state, history, live)
    else
      sessions.render(state, history)
    end
    local last = history[#history]
    if last and last.outcome == "interrupted" and not state.running then
      ui.notify("the last turn was interrupted before it ended: :TrellisResume continues it")
    elseif last and last.outcome == "paused" and not state.running then
      ui.notify("the last turn is paused: :TrellisResume continues it")
    end
    walls.load(state)
    commands.refresh(state)
    if compat.value(result.integrity) == "broken" then
      state.view:block({ "*the session's log is broken: its store was changed by hand*" })
      ui.error("the session's log is broken: rows of it were changed outside trellisd")
    end
    if cb then
      cb(state)
    end
    sessions.offer_recovery(state, compat.value(result.recovery))
  end)
end

--- Run cb(conn) with a ready daemon. When it was just started (after an exit), the current
--- session is reopened first, so that its buffer shows what the store kept.
---@param cb fun(conn: trellisd.Connection)
function M.with_daemon(cb)
  daemon.ensure(function(err, conn, fresh)
    if err then
      ui.error(err)
      return
    end
    local current = sessions.current_state()
    if fresh and current then
      M.reopen(current.id, function()
        cb(conn)
      end)
    else
      cb(conn)
    end
  end)
end

--- Open a new session over the current folder (session/open) and draw it; cb(state).
--- `extra`: more of session/open's params (worktree, ...); failed() when it is refused.
---@param title? string
---@param cb fun(state: trellisd.State)
---@param failed? fun()
---@param extra? table
function M.open_session(title, cb, failed, extra)
  local params = vim.tbl_extend("force", { root = cwd_root() }, extra or {})
  if title and title ~= "" then
    params.title = title
  end
  local policy = config.policy()
  if policy ~= nil then
    params.policy = policy
  end
  if config.options.mcp_servers ~= nil then
    params.mcpServers = config.options.mcp_servers
  end
  daemon.request("session/open", params, function(err, session)
    if err then
      ui.error("could not open a session: " .. err.message)
      if failed then
        failed()
      end
      return
    end
    local state = sessions.adopt(session)
    sessions.render(state, {})
    walls.load(state)
    commands.refresh(state)
    cb(state)
  end)
end

--- The session a prompt goes to: the current one if it is over this folder (or over the same
--- folder of its worktree of this checkout), else the one this editor used last over it,
--- else a new one.
---@param cb fun(state: trellisd.State)
function M.session_for_cwd(cb)
  local root = cwd_root()
  local current = sessions.current_state()
  if current and sessions.works_over(current, root) then
    cb(current)
    return
  end
  for _, state in pairs(sessions.open) do
    if state.root == root then
      sessions.current = state.id
      cb(state)
      return
    end
  end
  -- A second prompt while the session is being opened goes to that session, after the first.
  if opening[root] then
    table.insert(opening[root], cb)
    return
  end
  M.open_awaited(nil, cb)
end

--- Open a new session over the current folder, with `extra` of session/open's params, and
--- draw it; cb(state). Prompts sent over this folder meanwhile wait for it and go to it,
--- after cb.
---@param extra? table
---@param cb fun(state: trellisd.State)
function M.open_awaited(extra, cb)
  local root = cwd_root()
  if opening[root] then -- prompts wait for the session being opened already
    M.open_session(nil, cb, nil, extra)
    return
  end
  opening[root] = {}
  local function done(state)
    local waiting = opening[root]
    opening[root] = nil
    if state then
      cb(state)
      for _, waiter in ipairs(waiting) do
        waiter(state)
      end
    end
  end
  M.open_session(nil, done, function()
    done(nil)
  end, extra)
end

--- The session's conversation buffer, made again (from its history) if it was wiped.
---@param state trellisd.State
---@param cb fun(state: trellisd.State)
function M.ensure_view(state, cb)
  if state.view:valid() then
    cb(state)
    return
  end
  state.view = View.new("trellis://" .. state.id, config.options.flush_ms)
  daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(err, result)
    if not err then
      state.cursor = compat.value(result.nextCursor)
      sessions.render(state, result.turns)
    end
    cb(state)
  end)
end

--- :TrellisNew [title]
---@param title? string
function M.new(title)
  M.with_daemon(function()
    M.open_session(title, function(state)
      sessions.show(state)
    end)
  end)
end

--- Ask the user to pick one of the sessions session/list gives for `params`; cb(session).
---@param params table session/list's params
---@param prompt string
---@param kind string vim.ui.select's kind
---@param cb fun(session: trellisd.SessionSummary)
---@param first? trellisd.Id a session to put first (marked as open)
---@param empty? string what to say when the list is empty
function M.pick_from_list(params, prompt, kind, cb, first, empty)
  M.with_daemon(function()
    daemon.request("session/list", params, function(err, result)
      if err then
        ui.error("could not list the sessions: " .. err.message)
        return
      end
      local list = result.sessions or {}
      if #list == 0 then
        if empty then
          ui.notify(empty)
        elseif params.query then
          ui.notify("no session matches “" .. params.query .. "”")
        else
          ui.notify("there are no sessions yet: :Trellis starts one")
        end
        return
      end
      list = format.nest(list)
      local titles = {}
      for _, x in ipairs(list) do
        titles[x.sessionId] = compat.value(x.title) or ""
      end
      for i, x in ipairs(list) do
        if x.sessionId == first and i > 1 then
          table.insert(list, 1, table.remove(list, i))
        end
      end
      local now = os.time()
      ui.select(list, {
        prompt = prompt,
        kind = kind,
        format_item = function(x)
          local item = format.session_item(x, now, nil, titles)
          return x.sessionId == first and ("● " .. item .. " (open)") or item
        end,
      }, function(choice)
        if choice then
          cb(choice)
        end
      end)
    end)
  end)
end

--- :TrellisSessions [query]: reopen a session, the most recent first; with a query, those
--- whose title, prompts or replies match it, best first, each with the text that matched.
---@param query? string
function M.pick_session(query)
  local params = { limit = 100 }
  local prompt = "Reopen which session?"
  if query and not query:match("^%s*$") then
    params.query = vim.trim(query)
    prompt = "Sessions matching “" .. params.query .. "”:"
  end
  M.pick_from_list(params, prompt, "trellisd.session", function(choice)
    M.reopen(choice.sessionId, sessions.show)
  end)
end

return M
