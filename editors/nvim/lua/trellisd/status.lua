-- What a statusline shows of the current session: the running turn ("trellis: streaming 42
-- tok"), the context meter and the cost; and the daemon's log, opened by :TrellisLog.

local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local images = require("trellisd.images")
local queue = require("trellisd.queue")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

--- The statusline's text: "trellis: idle", "trellis: streaming 42 tok, 1 steer queued", ...;
--- idle in a worktree session: "trellis: idle · ⎇ trellisd/fix-login → main".
---@return string
function M.statusline()
  if daemon.state == "starting" then
    return "trellis: starting"
  end
  local state = sessions.current_state()
  local run = state and state.running
  if not run then
    local spend = state and state.budget and queue.spend_text(state)
    local mark = state and state.session and format.worktree(state.session)
    local text = "trellis: idle" .. (mark and (" · " .. mark) or "")
    local attached = images.status()
    text = text .. (attached and (" · " .. attached) or "")
    return text .. (spend and (" · " .. spend) or "")
  end
  ---@cast state trellisd.State
  if run.approval then
    return "trellis: approval needed"
  end
  if run.call then
    return "trellis: running " .. run.call
  end
  local text = "trellis: streaming " .. run.tokens .. " tok"
  if run.steers > 0 then
    text = text .. ", " .. format.count(run.steers, "steer", "steers") .. " queued"
  end
  if #state.waiting > 0 then
    text = text .. ", " .. format.count(#state.waiting, "prompt", "prompts") .. " waiting"
  end
  if queue.count(state) > 0 then
    text = text .. ", " .. format.count(queue.count(state), "prompt", "prompts") .. " queued"
  end
  local attached = images.status()
  return text .. (attached and (", " .. attached) or "")
end

--- The context meter and the session's cost, for a statusline: "ctx 12% · $0.0123", or ""
--- before the daemon has said.
---@return string
function M.usage()
  local state = sessions.current_state()
  if not state or not state.usage then
    return ""
  end
  return format.usage_short(state.usage)
end

--- :TrellisLog: the daemon's log file, followed as it grows ('autoread').
function M.open_log()
  local path = daemon.log_path()
  if vim.fn.filereadable(path) == 0 then
    ui.notify("there is no log yet: the daemon has not been started (" .. path .. ")")
    return
  end
  vim.cmd("botright split " .. vim.fn.fnameescape(path))
  vim.bo.autoread = true
  vim.cmd("normal! G")
end

return M
