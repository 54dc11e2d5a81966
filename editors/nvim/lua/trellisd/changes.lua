-- What the last turn changed in the files (turn/changes), shown as a diff buffer by
-- :TrellisChanges, where R reverts the turn (turn/revert); files changed by a person since,
-- or that another session's command may have changed at the same time, are named and
-- overwritten only when told.

local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

--- The lines of a change list (turn/changes): each file's diff, or a line for a binary or
--- too large file, whose content is not kept; a shared file's diff under a line naming the
--- other session that may have made it ("# b.txt: shared with session “…”").
---@param files trellisd.FileChange[]
---@param names? table<string, string> sessionId -> title, for the shared files
---@return string[]
function M.lines(files, names)
  local lines = {}
  for _, f in ipairs(files) do
    if f.shared then
      table.insert(lines, "# " .. f.path .. ": " .. format.shared_with(f.sharedWith, names))
    end
    if f.diff ~= "" then
      vim.list_extend(lines, vim.split(f.diff:gsub("\n$", ""), "\n", { plain = true }))
    else
      local why = f.binary and "binary" or "too large to keep"
      table.insert(lines, "# " .. f.path .. " " .. f.status .. " (" .. why .. ")")
    end
  end
  if #lines == 0 then
    lines = { "# the turn changed no file" }
  end
  return lines
end

local function revert(state, turn_id, force)
  daemon.request("turn/revert", { turnId = turn_id, force = force }, function(err, result)
    if
      not force
      and sessions.ask_restore(err, "Cancel the revert", function()
        revert(state, turn_id, true)
      end)
    then
      return
    end
    if err then
      ui.error("could not revert: " .. err.message)
      return
    end
    vim.cmd("checktime") -- buffers of reverted files reload
    ui.notify("reverted: " .. #result.restored .. " file(s) put back")
  end)
end

--- :TrellisChanges
function M.changes()
  local state = sessions.need_current("show the changes of")
  if not state then
    return
  end
  local turn_id = state.head
  if not turn_id or turn_id == vim.NIL then
    ui.warn("the conversation has no turn yet")
    return
  end
  opening.with_daemon(function()
    daemon.request("turn/changes", { turnId = turn_id }, function(err, result)
      if err then
        ui.error("could not read the changes: " .. err.message)
        return
      end
      local name = "trellis://" .. state.id .. "/changes"
      local buf = windows.show_lines(name, M.lines(result.files or {}, sessions.names()), "diff")
      vim.keymap.set("n", "R", function()
        revert(state, turn_id, false)
      end, { buffer = buf, desc = "Revert this turn's changes" })
    end)
  end)
end

return M
