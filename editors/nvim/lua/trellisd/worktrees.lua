-- Sessions in a git worktree of their own: :TrellisWorktree opens one (session/open's
-- worktree), on a new branch trellisd/<name> from the branch checked out here, so that the
-- agent works beside the checkout instead of in it; :TrellisMerge merges its branch into that
-- base branch (session/worktree/merge), :TrellisDiscard removes the worktree and its branch
-- (session/worktree/discard). The session's header and the session list mark such a session
-- "⎇ trellisd/<name> → <base>" (format.worktree).

local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

M.DISCARD = { "Discard the worktree", "Keep it" }

--- :TrellisWorktree [name]: a new session in a new worktree of this folder's repository,
--- named `name` (the daemon makes one up without it).
---@param name? string
function M.open(name)
  name = name and vim.trim(name) or ""
  opening.with_daemon(function()
    opening.open_awaited({ worktree = name ~= "" and name or true }, function(state)
      sessions.show(state)
      local wt = compat.value(state.session.worktree)
      if type(wt) == "table" then
        ui.notify(
          "working in a new worktree on "
            .. wt.branch
            .. " (from "
            .. wt.base
            .. "): "
            .. format.folder(wt.path)
            .. "; :TrellisMerge merges it, :TrellisDiscard discards it"
        )
      end
    end)
  end)
end

-- The current session and its worktree, or nil after saying why there is none to `what`.
local function current_worktree(what)
  local state = sessions.need_current(what)
  if not state then
    return nil
  end
  local wt = state.session and compat.value(state.session.worktree)
  if type(wt) ~= "table" then
    ui.warn(
      "the conversation works in no worktree of its own: :TrellisWorktree opens one that does"
    )
    return nil
  end
  if state.running then
    ui.warn("a turn is running: wait for it to end or :TrellisCancel it before you " .. what)
    return nil
  end
  return state, wt
end

--- :TrellisMerge: merge the current session's branch into its base branch; the files the
--- merge changed are written into the checkout when the base is checked out there.
function M.merge()
  local state, wt = current_worktree("merge")
  if not state then
    return
  end
  opening.with_daemon(function()
    daemon.request("session/worktree/merge", { sessionId = state.id }, function(err, merged)
      if err then
        local data = compat.value(err.data)
        local paths = type(data) == "table" and compat.value(data.paths) or nil
        if err.code == Connection.CONFLICT and type(paths) == "table" and #paths > 0 then
          local over = "; the files in the way: " .. table.concat(paths, ", ")
          state.view:block({ "*not merged into " .. wt.base .. over .. "*" })
        end
        ui.error("could not merge: " .. err.message)
        return
      end
      local paths = compat.value(merged.paths) or {}
      local what = #paths == 0 and "nothing new"
        or (format.count(#paths, "file", "files") .. " (" .. table.concat(paths, ", ") .. ")")
      local where = merged.checkoutUpdated and ", written into the checkout" or ""
      local text = "merged "
        .. wt.branch
        .. " into "
        .. merged.base
        .. ": "
        .. what
        .. where
        .. " (commit "
        .. tostring(merged.commit):sub(1, 8)
        .. ")"
      state.view:block({ "*" .. text .. "*" })
      vim.cmd("checktime") -- buffers of merged files reload
      ui.notify(text)
    end)
  end)
end

--- :TrellisDiscard: remove the current session's worktree, with what it holds that was not
--- merged, and its branch (after a confirmation). The session stays, without a worktree.
function M.discard()
  local state, wt = current_worktree("discard its worktree")
  if not state then
    return
  end
  ui.select(M.DISCARD, {
    prompt = "Discard the worktree "
      .. format.folder(wt.path)
      .. " and its branch "
      .. wt.branch
      .. ", with what was not merged into "
      .. wt.base
      .. "?",
    kind = "trellisd.discard",
  }, function(_, index)
    if index ~= 1 then
      return
    end
    opening.with_daemon(function()
      daemon.request("session/worktree/discard", { sessionId = state.id }, function(err, session)
        if err then
          ui.error("could not discard the worktree: " .. err.message)
          return
        end
        sessions.adopt(session)
        sessions.paint_header(state)
        local text = "discarded the worktree and its branch "
          .. wt.branch
          .. "; "
          .. wt.base
          .. " was not changed"
        state.view:block({ "*" .. text .. "*" })
        ui.notify(text)
      end)
    end)
  end)
end

return M
