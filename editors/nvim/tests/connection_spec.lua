local Connection = require("trellisd.connection")
local compat = require("trellisd.compat")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")

local function connect(fake, opts)
  opts = opts or {}
  opts.cmd = { "trellisd" }
  opts.spawn = fake.spawn
  local conn = Connection.new(opts)
  truthy(conn:start(), "the connection starts")
  return conn
end

test("a request gets its own answer, matched by id", function()
  local fake = Fake.new({
    ["session/open"] = function(p)
      return { sessionId = "s-1", root = p.root }
    end,
    ["session/list"] = function()
      return { sessions = {} }
    end,
  })
  local conn = connect(fake)
  local a, b
  conn:request("session/open", { root = "/w" }, function(err, result)
    a = { err, result }
  end)
  conn:request("session/list", vim.empty_dict(), function(err, result)
    b = { err, result }
  end)
  wait_for(function()
    return a and b
  end)
  eq({ nil, { sessionId = "s-1", root = "/w" } }, a)
  eq(nil, b[1])
  eq({}, b[2].sessions)
  eq(
    '"params":{}',
    compat.encode({ params = vim.empty_dict() }):match('"params":{}'),
    "an empty object stays an object"
  )
end)

test("an error answer reaches the callback as {code, message, data}", function()
  local fake = Fake.new({
    ["session/turn"] = function()
      return nil, { code = -32010, message = "unknown session s-9", data = { sessionId = "s-9" } }
    end,
  })
  local conn = connect(fake)
  local got
  conn:request("session/turn", { sessionId = "s-9", prompt = "hi" }, function(err, result)
    got = { err = err, result = result }
  end)
  wait_for(function()
    return got
  end)
  eq({ code = -32010, message = "unknown session s-9", data = { sessionId = "s-9" } }, got.err)
  eq(nil, got.result)
end)

test("notifications go to the handler of their method; others are ignored", function()
  local fake = Fake.new()
  local seen = {}
  local conn = connect(fake, {
    notifications = {
      ["session/token"] = function(p)
        seen[#seen + 1] = p.text
      end,
    },
  })
  fake.proc.notify("session/unknown", { x = 1 })
  fake.proc.notify("session/token", { text = "a" })
  fake.proc.notify("session/token", { text = "b" })
  wait_for(function()
    return #seen == 2
  end)
  eq({ "a", "b" }, seen)
  truthy(conn.running)
end)

test("a request from the daemon is answered when its handler replies, later", function()
  local fake = Fake.new()
  local reply_later
  connect(fake, {
    requests = {
      ["session/requestApproval"] = function(p, reply)
        reply_later = function()
          reply({ decision = p.tool == "write_file" and "allow" or "deny" })
        end
      end,
    },
  })
  local answer
  fake.proc.request("session/requestApproval", { tool = "write_file", arguments = {} }, function(m)
    answer = m
  end)
  wait_for(function()
    return reply_later
  end)
  eq(nil, answer)
  reply_later()
  reply_later() -- a second reply is not sent
  wait_for(function()
    return answer
  end)
  eq({ jsonrpc = "2.0", id = 1, result = { decision = "allow" } }, answer)
end)

test("a request from the daemon that the editor does not know gets -32601", function()
  local fake = Fake.new()
  connect(fake)
  local answer
  fake.proc.request("editor/unknown", {}, function(m)
    answer = m
  end)
  wait_for(function()
    return answer
  end)
  eq(-32601, answer.error.code)
end)

test("when the daemon exits, every pending request fails and on_exit runs", function()
  local fake = Fake.new({
    ["session/turn"] = function()
      return nil -- never answered
    end,
  })
  local exited, failures = nil, {}
  local conn = connect(fake, {
    on_exit = function(code)
      exited = code
    end,
  })
  for i = 1, 2 do
    conn:request("session/turn", { prompt = tostring(i) }, function(err)
      failures[#failures + 1] = err
    end)
  end
  fake.proc.exit(1)
  wait_for(function()
    return exited
  end)
  eq(1, exited)
  eq(2, #failures)
  eq(Connection.LOST, failures[1].code)
  eq("the trellisd daemon exited (code 1)", failures[1].message)
  local late
  conn:request("session/list", {}, function(err)
    late = err
  end)
  wait_for(function()
    return late
  end)
  eq(Connection.LOST, late.code)
end)

test("a handler that raises is reported and the connection goes on", function()
  local fake = Fake.new()
  local errors, seen = {}, 0
  connect(fake, {
    on_error = function(m)
      errors[#errors + 1] = m
    end,
    notifications = {
      ["session/token"] = function(p)
        seen = seen + 1
        if p.text == "boom" then
          error("boom")
        end
      end,
    },
  })
  fake.proc.notify("session/token", { text = "boom" })
  fake.proc.notify("session/token", { text = "fine" })
  wait_for(function()
    return seen == 2
  end)
  eq(1, #errors)
  truthy(errors[1]:find("session/token failed"), "the error names the method")
end)

test("the real process function reports a missing command as an error", function()
  local conn = Connection.new({ cmd = { "/nonexistent/trellisd" } })
  local ok, err = conn:start()
  eq(nil, ok)
  truthy(tostring(err):find("ENOENT"), "ENOENT in " .. tostring(err))
end)

test("the real process function: bytes both ways, then the exit code", function()
  -- cat echoes what it is sent: a frame sent comes back as a notification to ourselves.
  local seen, exited = nil, nil
  local conn = Connection.new({
    cmd = { "cat" },
    notifications = {
      ["echo"] = function(p)
        seen = p.text
      end,
    },
    on_exit = function(code)
      exited = code
    end,
  })
  truthy(conn:start())
  conn:notify("echo", { text = "héllo" })
  wait_for(function()
    return seen
  end)
  eq("héllo", seen)
  conn.proc.close()
  wait_for(function()
    return exited ~= nil
  end, nil, "cat to exit")
  eq(0, exited)
end)

test("a request the daemon withdraws is not answered, and its handler hears of it", function()
  local fake = Fake.new()
  local reply, withdrawn
  local conn = connect(fake, {
    requests = {
      ["session/requestApproval"] = function(_, r, request)
        reply = r
        request.on_withdraw = function()
          withdrawn = true
        end
      end,
    },
  })
  local answer
  fake.proc.request("session/requestApproval", { tool = "run_command" }, function(m)
    answer = m
  end)
  wait_for(function()
    return reply
  end)
  fake.proc.notify("$/cancelRequest", { id = 1 })
  wait_for(function()
    return withdrawn
  end)
  reply({ decision = "allow" })
  -- messages leave in order: an answer sent by the late reply would arrive before this one
  conn:notify("after", vim.empty_dict())
  wait_for(function()
    return #fake.sent("after") == 1
  end)
  eq(nil, answer)
end)
