-- Thin wrappers over what the plugin asks of the editor's UI, looked up at call time so
-- that another vim.ui.select (telescope, fzf-lua, dressing) or a test's stand-in is used.

local M = {}

M.log = function() end -- set by trellisd.daemon: also write messages to the log file

function M.notify(message, level)
  level = level or vim.log.levels.INFO
  M.log("[editor] " .. message)
  vim.notify("trellis: " .. message, level, { title = "trellisd" })
end

function M.error(message)
  M.notify(message, vim.log.levels.ERROR)
end

function M.warn(message)
  M.notify(message, vim.log.levels.WARN)
end

function M.select(items, opts, on_choice)
  vim.ui.select(items, opts, on_choice)
end

function M.input(opts, on_confirm)
  vim.ui.input(opts, on_confirm)
end

return M
