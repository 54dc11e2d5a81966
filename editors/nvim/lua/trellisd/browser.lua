-- :TrellisView: the conversation in the browser. session/view answers with the URL of the
-- session's read-only page on the daemon's view server (127.0.0.1, with a one-time token that
-- lets in the first browser to bring it). The URL is opened with the `open_url` option of
-- setup() when it is set, else with vim.ui.open (Neovim 0.10 on), else with xdg-open or open
-- when one is executable; and it is always said, so that a user on another machine (over
-- SSH) can copy it into a browser of their own.

local config = require("trellisd.config")
local daemon = require("trellisd.daemon")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

--- The programs that open a URL in the browser, tried in turn when the editor has no
--- vim.ui.open: the desktop's (Linux and BSD), then macOS's.
M.OPENERS = { "xdg-open", "open" }

--- The first program of M.OPENERS that is executable, or nil.
---@return string|nil
function M.opener()
  for _, program in ipairs(M.OPENERS) do
    if vim.fn.executable(program) == 1 then
      return program
    end
  end
  return nil
end

--- Open `url` in the browser: with `open_url` (setup()), else vim.ui.open, else xdg-open or
--- open.
---@param url string
---@return string|nil how what opened it ("open_url", "vim.ui.open", "xdg-open", "open"); nil: nothing could
---@return string|nil why why it could not be opened, when something tried and failed
function M.open_url(url)
  local custom = config.options.open_url
  if custom then
    local ok, err = pcall(custom, url)
    if not ok then
      return nil, "open_url failed: " .. tostring(err)
    end
    return "open_url"
  end
  local why
  if vim.ui.open then
    -- 0.10 on: a process, or nil and why (no handler found, say)
    local process, err = vim.ui.open(url)
    if process then
      return "vim.ui.open"
    end
    why = err and tostring(err) or nil
  end
  local program = M.opener()
  if program then
    local job = vim.fn.jobstart({ program, url }, { detach = true })
    if job > 0 then
      return program
    end
    why = program .. " could not be started"
  end
  return nil, why
end

--- What the user is told of the page: where it is, and whether it was opened.
---@param url string
---@param how string|nil what opened it; nil: nothing did
---@param why string|nil why it could not be opened
---@return string
function M.message(url, how, why)
  if how then
    return "opened the conversation in the browser: "
      .. url
      .. " (the link lets in one browser; :TrellisView again for another)"
  end
  return "the conversation's page: "
    .. url
    .. " (open it in a browser on this machine; the link lets in one browser"
    .. (why and ("; " .. why) or "")
    .. ")"
end

--- :TrellisView: ask the daemon for the current conversation's page and open it; cb(url)
--- once it is opened or said (nil when there is none).
---@param cb? fun(url: string|nil)
function M.open(cb)
  local state = sessions.need_current("open in the browser")
  if not state then
    if cb then
      cb(nil)
    end
    return
  end
  daemon.request("session/view", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not open the conversation in the browser: " .. err.message)
      if cb then
        cb(nil)
      end
      return
    end
    local url = result.url
    local how, why = M.open_url(url)
    ui.notify(M.message(url, how, why))
    if cb then
      cb(url)
    end
  end)
end

return M
