-- What the model reasons in a step (its thinking, or the summary its service gives): streamed
-- by session/thought, kept as the step's `thought` (run/steps), and drawn in the
-- conversation as lines marked "┊ " that the window folds away, closed by default (zo opens
-- one, zc closes it again). The reasoning tokens are told where tokens are (trellisd.format).

local M = {}

--- The mark of a thought's lines.
M.MARK = "┊ "

-- The fold of every run of thought lines, and what a closed one shows.
local FOLDEXPR = "getline(v:lnum)=~#'^┊'"
local FOLDTEXT = [['┊ thought: '.strcharpart(substitute(getline(v:foldstart),'^┊ *','',''),0,60)]]
  .. [[.'… ('.(v:foldend-v:foldstart+1).' lines, zo opens it)']]

--- The lines a thought is drawn as.
---@param text string
---@return string[]
function M.lines(text)
  local lines = {}
  for _, l in ipairs(vim.split(text, "\n", { plain = true })) do
    lines[#lines + 1] = M.MARK .. l
  end
  return lines
end

--- Fold the thought lines of the buffer in window `win` (closed by default).
---@param win integer
function M.fold(win)
  if not vim.api.nvim_win_is_valid(win) then
    return
  end
  -- local to the conversation in that window: another buffer shown there keeps its folds
  vim.api.nvim_win_call(win, function()
    local o = vim.opt_local
    o.foldmethod = "expr"
    o.foldexpr = FOLDEXPR
    o.foldtext = FOLDTEXT
    o.foldminlines = 0
    o.foldlevel = 0
    o.foldenable = true
  end)
end

--- Fold thoughts in every window that shows the conversation buffer `buf`, now and later.
---@param buf integer
function M.folding(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    M.fold(win)
  end
  vim.api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      M.fold(vim.api.nvim_get_current_win())
    end,
  })
end

--- A piece of a step's thought came (session/thought): the thought so far is drawn (again)
--- in its block at the end of the conversation.
---@param view trellisd.View
---@param run trellisd.Run
---@param step integer
---@param text string
function M.stream(view, run, step, text)
  local thought = run.thought
  if not thought or thought.step ~= step then
    thought = { step = step, text = "" }
    run.thought = thought
  end
  thought.text = thought.text .. text
  view:thought(step, M.lines(thought.text))
end

--- The texts a history turn draws, from run/steps' steps: each step's thought (as
--- {thought = text}) before its text.
---@param steps table[] run/steps' steps
---@return (string|{thought: string})[]
function M.step_texts(steps)
  local out = {}
  for _, step in ipairs(steps) do
    local thought = step.thought
    if type(thought) == "string" and thought ~= "" then
      out[#out + 1] = { thought = thought }
    end
    local text = step.text
    if type(text) == "string" and text ~= "" then
      out[#out + 1] = text
    end
  end
  return out
end

return M
