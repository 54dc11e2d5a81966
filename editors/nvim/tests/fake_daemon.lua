-- A stand-in for the daemon process, for Connection's injectable spawn function. It
-- speaks the same framing; `methods[method](params, proc, message)` answers the editor's
-- requests (return a result, or nil and answer later with proc.reply).
--
--   local fake = dofile(dir .. "/fake_daemon.lua").new({ ["session/open"] = function(p) ... end })
--   require("trellisd.daemon").spawn = fake.spawn

local compat = require("trellisd.compat")
local rpc = require("trellisd.rpc")

local F = {}

function F.new(methods)
  local fake = { procs = {}, received = {}, raw = {}, methods = methods or {} }
  fake.methods.initialize = fake.methods.initialize
    or function()
      return {
        serverInfo = { name = "trellisd", version = "0.0-fake" },
        capabilities = { experimental = { trellisd = { protocolVersion = "0.1" } } },
      }
    end
  fake.methods.shutdown = fake.methods.shutdown or function()
    return vim.NIL
  end

  fake.spawn = function(cmd, opts, on)
    if fake.refuse then
      return nil, fake.refuse
    end
    local parser = rpc.parser()
    local proc = { pid = 4000 + #fake.procs, alive = true, cmd = cmd, next_id = 0, answers = {} }
    function proc.send(message)
      message.jsonrpc = "2.0"
      local framed = rpc.frame(compat.encode(message))
      vim.schedule(function()
        if proc.alive then
          on.stdout(framed)
        end
      end)
    end
    function proc.reply(id, result, err)
      proc.send({
        id = id,
        result = err == nil and (result == nil and vim.NIL or result) or nil,
        error = err,
      })
    end
    function proc.notify(method, params)
      proc.send({ method = method, params = params })
    end
    -- A request from the daemon to the editor; on_answer(message) gets the editor's answer.
    function proc.request(method, params, on_answer)
      proc.next_id = proc.next_id + 1
      proc.answers[proc.next_id] = on_answer
      proc.send({ id = proc.next_id, method = method, params = params })
    end
    function proc.stderr(text)
      vim.schedule(function()
        on.stderr(text)
      end)
    end
    function proc.exit(code, signal)
      if not proc.alive then
        return
      end
      proc.alive = false
      vim.schedule(function()
        on.exit(code, signal or 0)
      end)
    end
    proc.write = function(data)
      assert(proc.alive, "a write to a process that exited")
      for _, body in ipairs(parser:feed(data)) do
        local m = compat.decode(body)
        fake.raw[#fake.raw + 1] = body
        fake.received[#fake.received + 1] = m
        if m.method == nil and proc.answers[m.id] then
          proc.answers[m.id](m)
        elseif m.method == "exit" then
          proc.exit(0)
        elseif m.method and m.id ~= nil then
          local handler = fake.methods[m.method]
          if handler == nil then
            proc.reply(m.id, nil, { code = -32601, message = "Method Not Found: " .. m.method })
          else
            local result, err = handler(compat.value(m.params) or {}, proc, m)
            if result ~= nil or err ~= nil then
              proc.reply(m.id, result, err)
            end
          end
        end
      end
    end
    proc.close = function() end
    proc.kill = function()
      proc.exit(nil, 15)
    end
    fake.procs[#fake.procs + 1] = proc
    fake.proc = proc
    return proc
  end

  -- The messages the editor sent with this method.
  function fake.sent(method)
    local out = {}
    for _, m in ipairs(fake.received) do
      if m.method == method then
        out[#out + 1] = m
      end
    end
    return out
  end

  return fake
end

return F
