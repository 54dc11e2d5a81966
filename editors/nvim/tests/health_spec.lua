local health = require("trellisd.health")
local trellis = require("trellisd")
local daemon = require("trellisd.daemon")
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local Fake = dofile(here .. "/fake_daemon.lua")

test("the provider is found the way the daemon finds it", function()
  eq(
    { "openai", "setup({ provider = ... })", "setup({ api_key = ... })" },
    { health.provider({ ANTHROPIC_API_KEY = "a" }, { provider = "openai", apiKey = "k" }) }
  )
  eq(
    { "anthropic", "TRELLISD_PROVIDER", "ANTHROPIC_API_KEY" },
    { health.provider({ TRELLISD_PROVIDER = "anthropic", ANTHROPIC_API_KEY = "a" }, {}) }
  )
  eq(
    { "openrouter", "OPENROUTER_API_KEY is set", "OPENROUTER_API_KEY" },
    { health.provider({ OPENAI_API_KEY = "o", OPENROUTER_API_KEY = "r" }, {}) }
  )
  eq(
    { "openai", "OPENAI_API_KEY is set", "TRELLISD_API_KEY" },
    { health.provider({ OPENAI_API_KEY = "o", TRELLISD_API_KEY = "t" }, {}) }
  )
  eq(
    { "scripted", "TRELLISD_SCRIPT is set" },
    { health.provider({ TRELLISD_SCRIPT = "/s.jsonl" }, {}) }
  )
  eq({}, { health.provider({}, {}) })
end)

local function checkhealth()
  vim.cmd("silent checkhealth trellisd")
  return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
end

test(":checkhealth trellisd starts the daemon, names the provider, stops it", function()
  local fake = Fake.new()
  daemon.spawn = fake.spawn
  trellis.setup({ cmd = { "cat" }, provider = "scripted", log_file = vim.fn.tempname() })
  local report = checkhealth()
  truthy(report:find("the daemon starts: trellisd 0.0-fake, protocol 0.1", 1, true), report)
  truthy(
    report:find(
      "provider: scripted (from setup({ provider = ... })): an offline stand-in model",
      1,
      true
    ),
    report
  )
  truthy(report:find("it shuts down cleanly", 1, true), report)
  eq(1, #fake.sent("shutdown"))
  eq(false, fake.proc.alive)
  vim.cmd("bwipeout!")
end)

test(":checkhealth trellisd says what is wrong when the daemon cannot start", function()
  daemon.spawn = nil
  trellis.setup({ cmd = { "/nonexistent/trellisd" }, log_file = vim.fn.tempname() })
  local report = checkhealth()
  truthy(
    report:find("`/nonexistent/trellisd` is not an executable on Neovim's PATH", 1, true),
    report
  )
  truthy(report:find("absolute path", 1, true), report)
  vim.cmd("bwipeout!")
end)
