-- The session's life past its turns: rename it, delete it, export it to a file and import
-- one from a file.

local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

local function absolute(path)
  return vim.fn.fnamemodify(vim.fn.expand(vim.trim(path)), ":p")
end

--- :TrellisRename [title]: asked for when not given.
---@param title? string
function M.rename(title)
  local state = sessions.need_current("rename")
  if not state then
    return
  end
  if title == nil or title:match("^%s*$") then
    ui.input({ prompt = "New title: ", default = state.title }, function(text)
      if text and not text:match("^%s*$") then
        M.rename(text)
      end
    end)
    return
  end
  title = vim.trim(title)
  opening.with_daemon(function()
    daemon.request("session/rename", { sessionId = state.id, title = title }, function(err, session)
      if err then
        ui.error("could not rename the session: " .. err.message)
        return
      end
      state.title = type(session) == "table" and compat.value(session.title) or title
      state.session.title = state.title
      sessions.paint_header(state)
      ui.notify("renamed: " .. state.title)
      ui.redraw_status()
    end)
  end)
end

--- :TrellisDelete: pick a session (the open one first), confirm, delete it for good.
function M.delete()
  local current = sessions.current_state()
  local params = { limit = 100 }
  opening.pick_from_list(params, "Delete which session?", "trellisd.session", function(choice)
    local state = sessions.open[choice.sessionId]
    if state and state.running then
      ui.warn("a turn of that session is running: :TrellisCancel it before you delete it")
      return
    end
    local title = format.title(choice)
    ui.select({ "Delete it", "Keep it" }, {
      prompt = "Delete “" .. title .. "” and all its turns for good? (its forks are kept)",
      kind = "trellisd.confirm",
    }, function(_, index)
      if index ~= 1 then
        return
      end
      daemon.request("session/delete", { sessionId = choice.sessionId }, function(err)
        if err then
          ui.error("could not delete the session: " .. err.message)
          return
        end
        sessions.forget(choice.sessionId)
        ui.notify("deleted: " .. title)
        ui.redraw_status()
      end)
    end)
  end, current and current.id)
end

--- :TrellisExport [path]: asked for (with a default name) when not given.
---@param path? string
function M.export(path)
  local state = sessions.need_current("export")
  if not state then
    return
  end
  if path == nil or path:match("^%s*$") then
    local default = vim.fn.getcwd() .. "/" .. format.export_name(state.session)
    ui.input(
      { prompt = "Export the session to: ", default = default, completion = "file" },
      function(text)
        if text and not text:match("^%s*$") then
          M.export(text)
        end
      end
    )
    return
  end
  opening.with_daemon(function()
    daemon.request(
      "session/export",
      { sessionId = state.id, path = absolute(path) },
      function(err, result)
        if err then
          ui.error("could not export the session: " .. err.message)
          return
        end
        local turns = format.count(compat.value(result.turns) or 0, "turn", "turns")
        ui.notify(
          "exported " .. turns .. " (" .. tostring(result.bytes) .. " bytes) to " .. result.path
        )
      end
    )
  end)
end

--- :TrellisImport [path]: import a session from a file and open it. A session the store
--- already has can be imported as a copy, with new ids.
---@param path? string asked for when not given
function M.import(path)
  if path == nil or path:match("^%s*$") then
    ui.input({ prompt = "Import a session from: ", completion = "file" }, function(text)
      if text and not text:match("^%s*$") then
        M.import(text)
      end
    end)
    return
  end
  local file = absolute(path)
  local function import(as_new)
    local params = { path = file }
    if as_new then
      params.asNew = true
    end
    daemon.request("session/import", params, function(err, session)
      if err and err.code == Connection.CONFLICT and not as_new then
        ui.select({ "Import it as a copy", "Leave it" }, {
          prompt = err.message .. ". Import it as a copy, with new ids?",
          kind = "trellisd.confirm",
        }, function(_, index)
          if index == 1 then
            import(true)
          end
        end)
        return
      elseif err then
        ui.error("could not import the session: " .. err.message)
        return
      end
      opening.reopen(session.sessionId, function(state)
        sessions.show(state)
        ui.notify("imported: " .. format.title(state.session))
      end)
    end)
  end
  opening.with_daemon(function()
    import(false)
  end)
end

return M
