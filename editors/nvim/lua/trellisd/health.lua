-- :checkhealth trellisd: does the daemon start, and which model will answer?

local compat = require("trellisd.compat")
local config = require("trellisd.config")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")

local M = {}

local KEY_VARIABLES = {
  { "openrouter", "OPENROUTER_API_KEY" },
  { "openai", "OPENAI_API_KEY" },
  { "openai-responses", "OPENAI_API_KEY" },
  { "anthropic", "ANTHROPIC_API_KEY" },
}

local function set(v)
  return v ~= nil and v ~= ""
end

-- Which provider the daemon will pick, worked out the way it does: the editor's
-- initializationOptions, then TRELLISD_PROVIDER, then the first *_API_KEY it finds, then
-- TRELLISD_SCRIPT. Returns name (or nil), where it comes from, and the key's source.
---@param env table<string, string> the environment the daemon gets
---@param options table the plugin's options
---@return string|nil name
---@return string|nil from
---@return string|nil key_from
function M.provider(env, options)
  local name, from
  if set(options.provider) then
    name, from = options.provider, "setup({ provider = ... })"
  elseif set(env.TRELLISD_PROVIDER) then
    name, from = env.TRELLISD_PROVIDER, "TRELLISD_PROVIDER"
  else
    for _, kv in ipairs(KEY_VARIABLES) do
      if set(env[kv[2]]) then
        name, from = kv[1], kv[2] .. " is set"
        break
      end
    end
    if name == nil and (set(options.script) or set(env.TRELLISD_SCRIPT)) then
      name, from = "scripted", "TRELLISD_SCRIPT is set"
    end
  end
  local key
  if set(options.apiKey) then
    key = "setup({ api_key = ... })"
  elseif set(env.TRELLISD_API_KEY) then
    key = "TRELLISD_API_KEY"
  else
    for _, kv in ipairs(KEY_VARIABLES) do
      if kv[1] == name and set(env[kv[2]]) then
        key = kv[2]
      end
    end
  end
  return name, from, key
end

local function report_provider(h, result)
  local caps = compat.value(result.capabilities) or {}
  local trellis = compat.value((compat.value(caps.experimental) or {}).trellisd) or {}
  local reported = compat.value(trellis.provider)
  if type(reported) == "table" and compat.value(reported.name) then
    local text = "provider: " .. tostring(reported.name)
    if compat.value(reported.model) then
      text = text .. ", model " .. tostring(reported.model)
    end
    h.ok(text .. " (as the daemon reports it)")
    return
  end
  local env = vim.fn.environ()
  for k, v in pairs(config.options.env or {}) do
    env[k] = v
  end
  local options = config.initialization_options()
  local name, from, key = M.provider(env, options)
  if name == nil then
    h.warn("no model provider is configured: turns will fail with an error", {
      "set TRELLISD_PROVIDER (openai, openai-responses, anthropic, openrouter or scripted)"
        .. " and TRELLISD_API_KEY in the environment Neovim starts the daemon with",
      "or set OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY",
      "or pass provider, model and api_key to require('trellisd').setup()",
    })
    return
  end
  local model = options.model or env.TRELLISD_MODEL
  local text = "provider: " .. name .. " (from " .. from .. ")"
  if set(model) then
    text = text .. ", model " .. model
  end
  if name == "scripted" then
    h.ok(text .. ": an offline stand-in model")
  elseif key then
    h.ok(text .. ", API key from " .. key)
  else
    h.warn(
      text .. ", but no API key is set",
      { "set TRELLISD_API_KEY or the provider's own *_API_KEY" }
    )
  end
end

function M.check()
  local h = compat.health()
  h.start("trellisd")
  local cmd = config.command()
  local exe = vim.fn.exepath(cmd[1])
  if exe == "" then
    h.error("`" .. cmd[1] .. "` is not an executable on Neovim's PATH", {
      "install trellisd (pip install trellisd) or give its absolute path:"
        .. " require('trellisd').setup({ cmd = { '/path/to/trellisd' } })",
      "Neovim started from a desktop launcher may not have your shell's PATH",
    })
    return
  end
  h.ok("command: " .. table.concat(cmd, " ") .. " (" .. exe .. ")")

  local stderr = {}
  local conn = Connection.new({
    cmd = cmd,
    env = config.options.env,
    spawn = daemon.spawn,
    on_stderr = function(data)
      stderr[#stderr + 1] = data
    end,
  })
  local ok, err = conn:start()
  if not ok then
    h.error("the daemon does not start: " .. tostring(err))
    return
  end
  local done, failure, result = false, nil, nil
  conn:request("initialize", {
    processId = vim.fn.getpid(),
    rootUri = vim.NIL,
    capabilities = vim.empty_dict(),
    initializationOptions = config.initialization_options(),
  }, function(e, r)
    done, failure, result = true, e, r
  end)
  vim.wait(config.options.start_timeout_ms, function()
    return done
  end, 20)
  local last = vim.trim(table.concat(stderr)):match("([^\n]*)$") or ""
  if not done then
    conn:kill()
    h.error(
      "the daemon started but did not answer initialize in time",
      { "see " .. daemon.log_path() }
    )
    return
  end
  if failure then
    conn:kill()
    h.error(
      "the daemon does not start: " .. failure.message .. (last ~= "" and (": " .. last) or "")
    )
    return
  end
  local info = compat.value(result.serverInfo) or {}
  local caps = compat.value(result.capabilities) or {}
  local trellis = compat.value((compat.value(caps.experimental) or {}).trellisd) or {}
  if info.name ~= "trellisd" then
    conn:kill()
    h.error("`" .. cmd[1] .. "` answered, but it is " .. tostring(info.name) .. ", not trellisd")
    return
  end
  local protocol = compat.value(trellis.protocolVersion) or "?"
  h.ok(("the daemon starts: trellisd %s, protocol %s"):format(tostring(info.version), protocol))
  if protocol:match("^(%d+)") ~= daemon.PROTOCOL:match("^(%d+)") then
    h.warn(("the daemon speaks protocol %s, this plugin %s"):format(protocol, daemon.PROTOCOL))
  end
  conn:notify("initialized", vim.empty_dict())
  report_provider(h, result)

  conn:shutdown()
  vim.wait(3000, function()
    return not conn.running
  end, 20)
  if conn.running then
    conn:kill()
    h.warn("the daemon did not exit after shutdown and exit; it was killed")
  elseif conn.exit_code ~= 0 then
    h.warn("the daemon exited with code " .. tostring(conn.exit_code) .. " after shutdown")
  else
    h.ok("it shuts down cleanly")
  end
  h.info("the daemon's log: " .. daemon.log_path() .. " (:TrellisLog)")
end

return M
