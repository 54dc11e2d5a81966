-- Prompts: :Trellis sends one to the conversation over the current folder (opening it if
-- needed); :TrellisAsk sends one with the lines of a range or a buffer attached. A prompt
-- given while a turn runs is queued behind it. A prompt `/name args` runs a custom command
-- (trellisd.commands); `/` alone picks one.

local commands = require("trellisd.commands")
local compat = require("trellisd.compat")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local turn = require("trellisd.turn")
local ui = require("trellisd.ui")

local M = {}

-- The most text of a buffer sent with a prompt; past it, the daemon reads the file itself.
local CONTEXT_BYTES = 256 * 1024

--- :Trellis [prompt]: asked for when not given.
---@param prompt? string
---@param context? trellisd.ContextEntry[] what the editor attaches to it (see M.ask_about)
function M.ask(prompt, context)
  if prompt == nil or prompt:match("^%s*$") then
    ui.input({ prompt = "Trellis: " }, function(text)
      if text and not text:match("^%s*$") then
        M.ask(text, context)
      end
    end)
    return
  end
  opening.with_daemon(function(conn)
    opening.session_for_cwd(function(state)
      if vim.trim(prompt) == "/" then -- pick the custom command to run
        commands.pick(state, function(text)
          M.ask(text, context)
        end)
        return
      end
      opening.ensure_view(state, function()
        sessions.show(state)
        if state.running then
          turn.send_queued(state, conn, prompt, context)
        else
          turn.send(state, conn, prompt, context)
        end
      end)
    end)
  end)
end

--- :[range]TrellisAsk [prompt]: ask about the lines of the range (a selection: :'<,'>), or
--- without a range about the whole current buffer. The text goes as the editor shows it,
--- unsaved changes included.
---@param prompt? string
---@param line1? integer the range's first line
---@param line2? integer its last
function M.ask_about(prompt, line1, line2)
  local buf = vim.api.nvim_get_current_buf()
  local name = vim.api.nvim_buf_get_name(buf)
  if name == "" or vim.bo[buf].buftype ~= "" then
    ui.warn("this buffer is not a file: open the file to ask about it")
    return
  end
  local entry = { path = compat.realpath(name) }
  local lines
  if line1 then
    entry.kind = "selection"
    entry.range = { startLine = line1, endLine = line2 }
    lines = vim.api.nvim_buf_get_lines(buf, line1 - 1, line2, false)
  else
    entry.kind = "file"
    lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  end
  local text = table.concat(lines, "\n") .. "\n"
  if #text <= CONTEXT_BYTES then
    entry.text = text
  end
  M.ask(prompt, { entry })
end

return M
