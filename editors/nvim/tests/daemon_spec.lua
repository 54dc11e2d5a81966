local config = require("trellisd.config")
local daemon = require("trellisd.daemon")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")

local log_file = vim.fn.tempname()
local notes = {}
vim.notify = function(message, level)
  notes[#notes + 1] = { message = message, level = level }
end

local function fresh(opts, methods)
  opts = opts or {}
  opts.cmd = opts.cmd or { "trellisd-fake" }
  opts.log_file = log_file
  config.set(opts)
  local fake = Fake.new(methods)
  daemon.spawn = fake.spawn
  notes = {}
  return fake
end

local function ensure()
  local got
  daemon.ensure(function(err, conn, was_fresh)
    got = { err = err, conn = conn, fresh = was_fresh }
  end)
  wait_for(function()
    return got
  end, nil, "ensure to call back")
  return got
end

local function stop()
  if daemon.conn then
    daemon.stop(500)
  end
  eq("stopped", daemon.state)
end

test("a command that cannot be found is explained, with the PATH advice", function()
  local fake = fresh()
  fake.refuse = "ENOENT: no such file or directory"
  local got = ensure()
  truthy(got.err:find("could not start the daemon `trellisd%-fake`: ENOENT"), got.err)
  truthy(got.err:find("absolute path"), got.err)
  eq("stopped", daemon.state)
end)

test("a daemon that dies while starting: its exit code and its last words", function()
  fresh(nil, {
    initialize = function(_, proc)
      proc.stderr("Traceback (most recent call last):\n  ...\n")
      proc.stderr("ValueError: TRELLISD_PROVIDER must be one of openai, scripted\n")
      proc.exit(2)
    end,
  })
  local got = ensure()
  eq(
    "the daemon exited with code 2: ValueError: TRELLISD_PROVIDER must be one of openai, scripted (see :TrellisLog)",
    got.err
  )
  local log = table.concat(vim.fn.readfile(log_file), "\n")
  truthy(log:find("Traceback", 1, true), "the log has the daemon's stderr")
end)

test("initialize carries the provider settings, an empty object when none", function()
  local fake = fresh()
  truthy(ensure().conn)
  local init = fake.sent("initialize")[1]
  eq({}, init.params.initializationOptions)
  truthy(
    fake.raw[1]:find('"initializationOptions":{}', 1, true),
    "an object, not an array: " .. fake.raw[1]
  )
  eq(1, #fake.sent("initialized"))
  stop()
  fake = fresh({ provider = "scripted", model = "m1", api_key = "k" })
  ensure()
  eq(
    { provider = "scripted", model = "m1", apiKey = "k" },
    fake.sent("initialize")[1].params.initializationOptions
  )
  stop()
end)

test("callers that ask while it starts share one start", function()
  local fake = fresh()
  local calls = 0
  for _ = 1, 3 do
    daemon.ensure(function(err)
      eq(nil, err)
      calls = calls + 1
    end)
  end
  wait_for(function()
    return calls == 3
  end)
  eq(1, #fake.procs)
  stop()
end)

test("a daemon that dies is reported once and started again on the next action", function()
  local fake = fresh()
  local first = ensure()
  eq(true, first.fresh)
  eq(false, ensure().fresh, "a running daemon is reused")
  fake.proc.stderr("MemoryError: boom\n")
  fake.proc.exit(1)
  wait_for(function()
    return daemon.state == "stopped"
  end)
  eq(1, #notes)
  eq(
    "trellis: the daemon exited with code 1: MemoryError: boom. It starts again on your next action; :TrellisLog shows its log.",
    notes[1].message
  )
  eq(vim.log.levels.ERROR, notes[1].level)
  local again = ensure()
  eq(true, again.fresh)
  eq(2, #fake.procs)
  stop()
  eq(1, #notes, "a stop the editor asked for is not reported")
end)

test("a program that is not trellisd is refused", function()
  fresh(nil, {
    initialize = function()
      return { serverInfo = { name = "pyright" }, capabilities = {} }
    end,
  })
  local got = ensure()
  truthy(got.err:find("not trellisd"), got.err)
end)

test("stop() says shutdown then exit, and waits for the exit", function()
  local fake = fresh()
  ensure()
  daemon.stop(500)
  eq(1, #fake.sent("shutdown"))
  eq(1, #fake.sent("exit"))
  eq(false, fake.proc.alive)
end)
