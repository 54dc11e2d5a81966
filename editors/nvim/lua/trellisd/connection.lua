-- A JSON-RPC connection to one daemon process over its stdin and stdout.
--
-- The process comes from a `spawn` function, injectable so that tests can stand a fake
-- process in for the daemon. Messages from the daemon go to dispatch tables keyed by
-- method: `notifications[method](params)` and `requests[method](params, reply)`, where
-- the request handler answers later with `reply(result)` or `reply(nil, error)`.
-- Every callback runs on Neovim's main loop, never in a luv callback.
--
-- The daemon may withdraw a request it sent (a `$/cancelRequest` with its id): the handler's
-- `request.on_withdraw()` runs, if it set one, and its reply is then not sent.

local compat = require("trellisd.compat")
local rpc = require("trellisd.rpc")

local uv = compat.uv

---@class trellisd.Connection
---@field pid integer|nil the daemon's process id
---@field running boolean the process runs
local Connection = {}
Connection.__index = Connection

-- The code of the error a pending request gets when the daemon goes away. JSON-RPC leaves
-- -32099..-32000 to implementations; the daemon itself never sends this one.
Connection.LOST = -32099
Connection.METHOD_NOT_FOUND = -32601
Connection.REQUEST_CANCELLED = -32800
Connection.CONFLICT = -32020
Connection.NOT_RUNNING = -32021
Connection.LEASE_HELD = -32030
Connection.NOT_FOUND = -32010
Connection.CONFLICT = -32020

-- The real process: uv.spawn with three pipes. Its callbacks are moved onto the main loop.
-- Returns {pid, write(data), close(), kill(signal)} or nil and an error message.
---@param cmd string[]
---@param opts {env: string[]|nil, cwd: string|nil}
---@param on {stdout: fun(data: string), stderr: fun(data: string), exit: fun(code: integer, signal: integer)}
---@return {pid: integer, write: fun(data: string), close: fun(), kill: fun(sig?: string)}|nil
---@return string|nil err
function Connection.uv_spawn(cmd, opts, on)
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  -- Report the exit once the process has ended and both pipes are drained, so that the
  -- last answers and the last words on stderr come first. A grandchild that keeps a pipe
  -- open must not hold the report back for long: 300 ms after the exit it goes anyway.
  local open_pipes, exited, reported = 2, false, false
  local code, signal
  local function report()
    if reported then
      return
    end
    reported = true
    vim.schedule(function()
      on.exit(code, signal)
    end)
  end
  local function pipe_done()
    open_pipes = open_pipes - 1
    if exited and open_pipes == 0 then
      report()
    end
  end
  local args = {}
  for i = 2, #cmd do
    args[#args + 1] = cmd[i]
  end
  local handle, pid_or_err
  handle, pid_or_err = uv.spawn(cmd[1], {
    args = args,
    stdio = { stdin, stdout, stderr },
    env = opts.env,
    cwd = opts.cwd,
  }, function(c, s)
    code, signal, exited = c, s, true
    if handle and not handle:is_closing() then
      handle:close()
    end
    if not stdin:is_closing() then
      stdin:close()
    end
    if open_pipes == 0 then
      report()
    else
      local timer = uv.new_timer()
      timer:start(300, 0, function()
        timer:close()
        report()
      end)
    end
  end)
  if not handle then
    stdin:close()
    stdout:close()
    stderr:close()
    return nil, tostring(pid_or_err)
  end
  local function reader(pipe, deliver)
    pipe:read_start(function(_, data)
      if data then
        vim.schedule(function()
          deliver(data)
        end)
      else
        pipe:close()
        pipe_done()
      end
    end)
  end
  reader(stdout, on.stdout)
  reader(stderr, on.stderr)
  return {
    pid = pid_or_err,
    write = function(data)
      if not stdin:is_closing() then
        stdin:write(data)
      end
    end,
    close = function()
      if not stdin:is_closing() then
        stdin:close()
      end
    end,
    kill = function(sig)
      if not handle:is_closing() then
        handle:kill(sig or "sigterm")
      end
    end,
  }
end

-- opts: cmd (list), env (extra variables), cwd, spawn, notifications, requests,
-- on_stderr(data), on_exit(code, signal), on_error(message).
---@param opts table
---@return trellisd.Connection
function Connection.new(opts)
  local self = setmetatable({}, Connection)
  self.cmd = opts.cmd
  self.env = opts.env
  self.cwd = opts.cwd
  self.spawn = opts.spawn or Connection.uv_spawn
  self.notifications = opts.notifications or {}
  self.requests = opts.requests or {}
  self.on_stderr = opts.on_stderr or function() end
  self.on_exit = opts.on_exit or function() end
  self.on_error = opts.on_error or function() end
  self.parser = rpc.parser()
  self.next_id = 0
  self.pending = {} -- id -> {method, callback}
  self.serving = {} -- id -> the daemon's request being answered: {id, method, withdrawn}
  self.running = false
  return self
end

---@return true|nil started
---@return string|nil err
function Connection:start()
  local proc, err = self.spawn(self.cmd, { env = compat.environment(self.env), cwd = self.cwd }, {
    stdout = function(data)
      self:_receive(data)
    end,
    stderr = function(data)
      self.on_stderr(data)
    end,
    exit = function(code, signal)
      self:_exited(code, signal)
    end,
  })
  if not proc then
    return nil, err
  end
  self.proc = proc
  self.pid = proc.pid
  self.running = true
  return true
end

function Connection:_send(message)
  message.jsonrpc = "2.0"
  self.proc.write(rpc.frame(compat.encode(message)))
end

-- Send a request; callback(err, result) runs once, with err = {code, message, data}.
-- Returns the request's id.
---@param method string
---@param params table|nil
---@param callback fun(err: trellisd.Error|nil, result: any)
---@return integer id
function Connection:request(method, params, callback)
  callback = callback or function() end
  if not self.running then
    vim.schedule(function()
      callback({ code = Connection.LOST, message = "the trellisd daemon is not running" })
    end)
    return nil
  end
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = { method = method, callback = callback }
  self:_send({ id = id, method = method, params = params })
  return id
end

---@param method string
---@param params table|nil
function Connection:notify(method, params)
  if self.running then
    self:_send({ method = method, params = params })
  end
end

-- Ask the daemon to cancel a request it is serving (LSP's $/cancelRequest).
---@param id integer the request's id, as Connection:request returned it
function Connection:cancel_request(id)
  self:notify("$/cancelRequest", { id = id })
end

function Connection:_call(what, fn, ...)
  local ok, err = xpcall(fn, debug.traceback, ...)
  if not ok then
    self.on_error(what .. " failed: " .. tostring(err))
  end
end

function Connection:_receive(data)
  local ok, bodies = pcall(self.parser.feed, self.parser, data)
  if not ok then
    self.on_error("the daemon's output is not framed as expected: " .. tostring(bodies))
    self:kill()
    return
  end
  for _, body in ipairs(bodies) do
    local decoded, message = pcall(compat.decode, body)
    if not decoded or type(message) ~= "table" then
      self.on_error("the daemon sent a message that is not JSON: " .. body:sub(1, 200))
    else
      self:_dispatch(message)
    end
  end
end

function Connection:_dispatch(message)
  local id, method = compat.value(message.id), compat.value(message.method)
  local params = compat.value(message.params) or {}
  if method and id ~= nil then
    self:_serve(id, method, params)
  elseif method == "$/cancelRequest" then
    local request = self.serving[compat.value(params.id)]
    if request then
      self.serving[request.id] = nil
      request.withdrawn = true
      if request.on_withdraw then
        self:_call(request.method .. " withdrawal", request.on_withdraw)
      end
    end
  elseif method then
    local handler = self.notifications[method]
    if handler then
      self:_call(method, handler, params)
    end
  elseif id ~= nil then
    local entry = self.pending[id]
    if entry then
      self.pending[id] = nil
      local err = compat.value(message.error)
      if err then
        err = {
          code = err.code,
          message = compat.value(err.message) or "",
          data = compat.value(err.data),
        }
        self:_call(entry.method, entry.callback, err, nil)
      else
        self:_call(entry.method, entry.callback, nil, compat.value(message.result))
      end
    end
  else
    local err = compat.value(message.error)
    if err then
      self.on_error("the daemon reported: " .. tostring(compat.value(err.message)))
    end
  end
end

function Connection:_serve(id, method, params)
  local handler = self.requests[method]
  if not handler then
    self:_send({
      id = id,
      error = {
        code = Connection.METHOD_NOT_FOUND,
        message = "the editor does not handle " .. method,
      },
    })
    return
  end
  local request = { id = id, method = method, withdrawn = false }
  self.serving[id] = request
  local answered = false
  local function reply(result, err)
    if answered or request.withdrawn or not self.running then
      return
    end
    answered = true
    self.serving[id] = nil
    if err then
      self:_send({ id = id, error = err })
    else
      self:_send({ id = id, result = result == nil and vim.NIL or result })
    end
  end
  self:_call(method, handler, params, reply, request)
end

function Connection:_exited(code, signal)
  self.running = false
  self.exit_code, self.exit_signal = code, signal
  local pending = self.pending
  self.pending = {}
  local ids = vim.tbl_keys(pending)
  table.sort(ids)
  local message = "the trellisd daemon exited"
  if signal and signal ~= 0 then
    message = message .. " (signal " .. signal .. ")"
  elseif code then
    message = message .. " (code " .. code .. ")"
  end
  for _, id in ipairs(ids) do
    self:_call(
      pending[id].method,
      pending[id].callback,
      { code = Connection.LOST, message = message },
      nil
    )
  end
  self.on_exit(code, signal)
end

-- The LSP goodbye: shutdown, then exit. callback() runs once the daemon has answered.
---@param callback? fun()
function Connection:shutdown(callback)
  self:request("shutdown", nil, function()
    self:notify("exit")
    if self.proc then
      self.proc.close()
    end
    if callback then
      callback()
    end
  end)
end

---@param signal? string "sigterm" when not given
function Connection:kill(signal)
  if self.proc and self.running then
    self.proc.kill(signal)
  end
end

return Connection
