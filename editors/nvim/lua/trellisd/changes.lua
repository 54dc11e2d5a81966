-- What the last turn changed in the files (turn/changes), shown as a diff buffer by
-- :TrellisChanges, where R reverts the turn (turn/revert); files changed by a person since
-- are named and overwritten only when told.

local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

--- The lines of a change list (turn/changes): each file's diff, or a line for a binary or
--- too large file, whose content is not kept.
---@param files trellisd.FileChange[]
---@return string[]
function M.lines(files)
  local lines = {}
  for _, f in ipairs(files) do
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
    if err and not force and err.code == Connection.CONFLICT and err.data then
      local paths = type(err.data.paths) == "table" and err.data.paths or {}
      ui.ask_overwrite(paths, "Cancel the revert", function()
        revert(state, turn_id, true)
      end)
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
      local buf = windows.show_lines(name, M.lines(result.files or {}), "diff")
      vim.keymap.set("n", "R", function()
        revert(state, turn_id, false)
      end, { buffer = buf, desc = "Revert this turn's changes" })
    end)
  end)
end

return M
