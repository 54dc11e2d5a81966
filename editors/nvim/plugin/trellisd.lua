-- The commands exist from startup; the plugin itself loads on first use.
if vim.g.loaded_trellisd then
  return
end
vim.g.loaded_trellisd = true
if vim.fn.has("nvim-0.7") == 0 then
  vim.api.nvim_err_writeln("trellisd needs Neovim 0.7 or newer")
  return
end
require("trellisd").create_commands()
