-- Thin wrappers over what the plugin asks of the editor's UI, looked up at call time so
-- that another vim.ui.select (telescope, fzf-lua, dressing) or a test's stand-in is used.

local M = {}

M.log = function() end -- set by trellisd.daemon: also write messages to the log file

---@param message string
---@param level? integer vim.log.levels; INFO when not given
function M.notify(message, level)
  level = level or vim.log.levels.INFO
  M.log("[editor] " .. message)
  vim.notify("trellis: " .. message, level, { title = "trellisd" })
end

---@param message string
function M.error(message)
  M.notify(message, vim.log.levels.ERROR)
end

---@param message string
function M.warn(message)
  M.notify(message, vim.log.levels.WARN)
end

---@param items any[]
---@param opts table vim.ui.select's options
---@param on_choice fun(item: any|nil, index: integer|nil)
function M.select(items, opts, on_choice)
  vim.ui.select(items, opts, on_choice)
end

---@param opts table vim.ui.input's options
---@param on_confirm fun(text: string|nil)
function M.input(opts, on_confirm)
  vim.ui.input(opts, on_confirm)
end

--- Files a person changed since the agent wrote them stand in the way of a restore: ask
--- whether to overwrite them. on_overwrite() when told to; on_leave() (if given) otherwise.
---@param paths string[]
---@param leave string the other choice's label ("Cancel the branch", ...)
---@param on_overwrite fun()
---@param on_leave? fun()
---@param prompt? string the question, when it is not only about files a person changed
function M.ask_overwrite(paths, leave, on_overwrite, on_leave, prompt)
  M.select({ "Overwrite them", leave }, {
    prompt = prompt or ("changed since the agent wrote them: " .. table.concat(paths, ", ")),
    kind = "trellisd.restore",
  }, function(_, index)
    if index == 1 then
      on_overwrite()
    elseif on_leave then
      on_leave()
    end
  end)
end

-- Draw the statuslines again, for what they show of the running turn.
function M.redraw_status()
  pcall(vim.cmd, "redrawstatus!")
end

return M
