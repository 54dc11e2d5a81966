-- The windows the plugin shows its buffers in: a buffer already shown in this tab is
-- focused, else a window is opened as configured (split); the tree, the changes and the
-- tools are read-only scratch buffers in a window below.

local config = require("trellisd.config")

local M = {}

--- Show a buffer: focus a window of this tab that has it, else open one as configured.
---@param buf integer
---@param split? "vertical"|"horizontal"|"tab"|"current" default: config's split
function M.show_buffer(buf, split)
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_set_current_win(win)
      return
    end
  end
  split = split or config.options.split
  if split == "vertical" then
    vim.cmd("botright vsplit")
  elseif split == "horizontal" then
    vim.cmd("botright split")
  elseif split == "tab" then
    vim.cmd("tabnew")
  end
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = true
  vim.wo.linebreak = true
  vim.wo.number = false
  vim.wo.relativenumber = false
end

--- The scratch buffer named `name` (made, with `filetype`, the first time).
---@param name string
---@param filetype? string
---@return integer buf
---@return boolean new true when it was made now
function M.scratch(name, filetype)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == name then
      return b, false
    end
  end
  local buf = vim.api.nvim_create_buf(true, true)
  vim.api.nvim_buf_set_name(buf, name)
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf, true
end

--- Show `lines` in the read-only scratch buffer `name` (made the first time), in a
--- window below.
---@param name string
---@param lines string[]
---@param filetype? string
---@return integer buf
function M.show_lines(name, lines, filetype)
  local buf = M.scratch(name, filetype)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  M.show_buffer(buf, "horizontal")
  return buf
end

return M
