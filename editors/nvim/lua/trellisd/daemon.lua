-- The daemon process as the editor sees it: started on first use, initialized, its stderr
-- written to the log file, and started again on the next action after it exits.

local compat = require("trellisd.compat")
local config = require("trellisd.config")
local Connection = require("trellisd.connection")
local ui = require("trellisd.ui")

local uv = compat.uv

local M = {}

-- The protocol this plugin speaks; a daemon with another major version is warned about.
M.PROTOCOL = "0.1"
local LOG_ROTATE_BYTES = 2 * 1024 * 1024

M.state = "stopped" -- "stopped" | "starting" | "ready"
M.spawn = nil -- the process function for Connection; nil: the real one (tests put a fake)
M.conn = nil
M.server = nil -- initialize's result
M.starts = 0
local waiting = {}
local stderr_tail = {}
local log_fd = nil
local stopping = false

-- What the plugin's controller hands in: dispatch tables and what to do on an exit.
M.handlers = {
  notifications = {},
  requests = {},
  on_exit = function() end,
}

---@return string
function M.log_path()
  return config.options.log_file
end

local function open_log()
  if log_fd then
    return
  end
  local path = M.log_path()
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local stat = uv.fs_stat(path)
  if stat and stat.size > LOG_ROTATE_BYTES then
    uv.fs_rename(path, path .. ".1")
  end
  log_fd = uv.fs_open(path, "a", 420)
end

---@param text string a line (a newline is added)
function M.log(text)
  open_log()
  if log_fd then
    if text:sub(-1) ~= "\n" then
      text = text .. "\n"
    end
    uv.fs_write(log_fd, text, -1)
  end
end
ui.log = M.log

local function on_stderr(data)
  M.log(data)
  for _, line in ipairs(compat.lines(data)) do
    if line:match("%S") then
      stderr_tail[#stderr_tail + 1] = line
      if #stderr_tail > 20 then
        table.remove(stderr_tail, 1)
      end
    end
  end
end

-- Why the daemon went away, for a person: its exit code and the last thing it said.
local function exit_reason(code, signal)
  local why
  if signal and signal ~= 0 then
    why = "was killed (signal " .. signal .. ")"
  else
    why = "exited with code " .. tostring(code)
  end
  local last = stderr_tail[#stderr_tail]
  if last then
    why = why .. ": " .. last
  end
  return why
end

local function finish(err, conn, fresh)
  local callbacks = waiting
  waiting = {}
  for _, cb in ipairs(callbacks) do
    cb(err, conn, fresh)
  end
end

local function exited(conn, code, signal)
  M.log(
    string.format("==== %s trellisd %s", os.date("%Y-%m-%d %H:%M:%S"), exit_reason(code, signal))
  )
  if conn ~= M.conn then
    return
  end
  local was = M.state
  M.state, M.conn, M.server = "stopped", nil, nil
  if was == "starting" then
    finish("the daemon " .. exit_reason(code, signal) .. " (see :TrellisLog)")
    return
  end
  local unexpected = not stopping
  if unexpected then
    ui.error(
      "the daemon "
        .. exit_reason(code, signal)
        .. ". It starts again on your next action; :TrellisLog shows its log."
    )
  end
  M.handlers.on_exit(unexpected)
end

local leave_hooked = false

local function start()
  if not leave_hooked then
    leave_hooked = true
    vim.api.nvim_create_autocmd("VimLeavePre", {
      group = vim.api.nvim_create_augroup("trellisd", { clear = true }),
      callback = function()
        M.stop(1000)
      end,
    })
  end
  M.state = "starting"
  M.starts = M.starts + 1
  stopping = false
  stderr_tail = {}
  local cmd = config.command()
  M.log(string.format("==== %s starting: %s", os.date("%Y-%m-%d %H:%M:%S"), table.concat(cmd, " ")))
  local conn
  conn = Connection.new({
    cmd = cmd,
    env = config.options.env,
    cwd = vim.fn.getcwd(),
    spawn = M.spawn,
    -- looked up at each message, so handlers registered after the start count too
    notifications = setmetatable({}, {
      __index = function(_, method)
        return M.handlers.notifications[method]
      end,
    }),
    requests = setmetatable({}, {
      __index = function(_, method)
        return M.handlers.requests[method]
      end,
    }),
    on_stderr = on_stderr,
    on_exit = function(code, signal)
      exited(conn, code, signal)
    end,
    on_error = function(message)
      M.log("[editor] " .. message)
    end,
  })
  local ok, err = conn:start()
  if not ok then
    M.state = "stopped"
    M.log("[editor] could not start " .. cmd[1] .. ": " .. tostring(err))
    finish(
      string.format(
        "could not start the daemon `%s`: %s. Neovim may not see your shell's PATH: set cmd"
          .. " to an absolute path in require('trellisd').setup({ cmd = { '/path/to/trellisd' } }).",
        cmd[1],
        tostring(err)
      )
    )
    return
  end
  M.conn = conn
  local version = vim.version()
  conn:request("initialize", {
    processId = vim.fn.getpid(),
    clientInfo = {
      name = "Neovim",
      version = string.format("%d.%d.%d", version.major, version.minor, version.patch),
    },
    rootUri = vim.NIL,
    capabilities = vim.empty_dict(),
    initializationOptions = config.initialization_options(),
  }, function(e, result)
    if conn ~= M.conn or M.state ~= "starting" then
      return
    end
    if e then
      if e.code ~= Connection.LOST then
        conn:kill()
        M.state, M.conn = "stopped", nil
        finish("the daemon refused to start: " .. e.message)
      end
      return -- an exit: reported by exited(), with the daemon's last words
    end
    local info = result and compat.value(result.serverInfo)
    if type(info) ~= "table" or info.name ~= "trellisd" then
      conn:kill()
      M.state, M.conn = "stopped", nil
      finish("`" .. cmd[1] .. "` answered, but it is not trellisd; check cmd in setup()")
      return
    end
    local caps = compat.value(result.capabilities) or {}
    local experimental = compat.value(caps.experimental) or {}
    local trellis = compat.value(experimental.trellisd) or {}
    local protocol = compat.value(trellis.protocolVersion)
    if protocol and protocol:match("^(%d+)") ~= M.PROTOCOL:match("^(%d+)") then
      ui.warn(
        ("the daemon speaks protocol %s, this plugin %s: update one of them"):format(
          protocol,
          M.PROTOCOL
        )
      )
    end
    conn:notify("initialized", vim.empty_dict())
    M.state, M.server = "ready", result
    finish(nil, conn, true)
  end)
  local timeout = config.options.start_timeout_ms
  vim.defer_fn(function()
    if M.conn == conn and M.state == "starting" then
      M.state, M.conn = "stopped", nil
      conn:kill()
      finish(("the daemon did not answer within %d s (see :TrellisLog)"):format(timeout / 1000))
    end
  end, timeout)
end

-- Run cb(err, conn, fresh) with a ready daemon; fresh is true when it was just started.
---@param cb fun(err: string|nil, conn: trellisd.Connection|nil, fresh: boolean|nil)
function M.ensure(cb)
  if M.state == "ready" and M.conn and M.conn.running then
    cb(nil, M.conn, false)
    return
  end
  waiting[#waiting + 1] = cb
  if M.state ~= "starting" then
    start()
  end
end

-- A request to a ready daemon (started first if need be): cb(err, result), err a table
-- {code, message}.
---@param method string
---@param params table|nil
---@param cb fun(err: trellisd.Error|nil, result: any)
function M.request(method, params, cb)
  M.ensure(function(err, conn)
    if err then
      cb({ code = Connection.LOST, message = err })
      return
    end
    conn:request(method, params, cb)
  end)
end

---@return integer|nil
function M.pid()
  return M.conn and M.conn.pid
end

-- Stop the daemon politely (shutdown, exit), waiting up to `ms` for it to go.
---@param ms? integer how long to wait
function M.stop(ms)
  local conn = M.conn
  if not conn or not conn.running then
    return
  end
  stopping = true
  conn:shutdown()
  vim.wait(ms or 1500, function()
    return not conn.running
  end, 20)
  if conn.running then
    conn:kill()
  end
end

return M
