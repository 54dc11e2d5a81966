-- The plugin's settings: defaults, laid under what setup() is given.

local M = {}

local function defaults()
  return {
    -- The daemon's command. Neovim started from a desktop launcher may not see your shell's
    -- PATH: give an absolute path then, e.g. { "/home/me/.local/bin/trellisd" }.
    cmd = { "trellisd" },
    -- The SQLite store (passed as --db); nil: the daemon's default.
    db = nil,
    -- The model: sent to the daemon as initializationOptions; nil: the daemon's environment.
    provider = nil, -- "openai" | "openai-responses" | "anthropic" | "openrouter" | "scripted"
    model = nil,
    base_url = nil,
    api_key = nil,
    script = nil, -- a JSON-lines script for the scripted provider
    -- How hard a reasoning model thinks in a conversation's turns until :TrellisEffort
    -- changes it (session/turn's effort): "low" | "medium" | "high"; nil: the model's default.
    effort = nil,
    -- The policy new sessions are opened with (session/open's policy), e.g.
    -- { approval = "ask" }; nil: the daemon's default and the project's .trellisd.toml.
    policy = nil,
    -- The walls every program of a new session runs in (the policy's sandbox and network):
    -- "workspace-write" | "read-only" | "off", and false (the session's own loopback only) | true |
    -- { "pypi.org:443", ... }; nil: the daemon's default (workspace-write, false) and the
    -- project's .trellisd.toml. They win over policy.sandbox and policy.network.
    sandbox = nil,
    network = nil,
    -- MCP servers sessions are opened and reopened with (mcpServers), e.g.
    -- { { name = "fs", command = "npx", args = { "-y", "@modelcontextprotocol/server-filesystem", "." } } }
    -- or { { name = "web", url = "http://127.0.0.1:8000/mcp" } }; nil: the project's only.
    mcp_servers = nil,
    -- Extra environment variables for the daemon, laid over the editor's.
    env = nil,
    -- Where the daemon's stderr goes.
    log_file = vim.fn.stdpath("cache") .. "/trellisd.log",
    -- How often streamed text is painted into the conversation, in milliseconds.
    flush_ms = 40,
    -- Where a conversation opens: "vertical", "horizontal", "tab" or "current".
    split = "vertical",
    -- How long the daemon may take to answer initialize, in milliseconds.
    start_timeout_ms = 20000,
    -- How :TrellisView opens the conversation's page: function(url) ... end; nil:
    -- vim.ui.open (0.10 on), else xdg-open or open. The URL is said either way.
    open_url = nil,
  }
end

M.options = defaults()

---@param opts? table the user's options (see :help trellisd-options)
---@return table options the defaults with `opts` laid over them
function M.set(opts)
  M.options = vim.tbl_extend("force", defaults(), opts or {})
  return M.options
end

-- Where `cmd` runs the daemon: "ssh" (`{ "ssh", "host", "trellisd" }`: the arguments after it
-- are words of the remote shell's command line), "remote" (`trellisd --remote host`, which
-- quotes them itself) or nil (this machine).
---@param cmd string[]
---@return "ssh"|"remote"|nil
function M.remote(cmd)
  if vim.fn.fnamemodify(cmd[1] or "", ":t"):gsub("%.exe$", "") == "ssh" then
    return "ssh"
  end
  for _, arg in ipairs(cmd) do
    if arg == "--remote" or vim.startswith(arg, "--remote=") then
      return "remote"
    end
  end
  return nil
end

-- One word for a POSIX shell, as it is: 'it'\''s'.
---@param word string
---@return string
local function shell_quoted(word)
  return "'" .. word:gsub("'", "'\\''") .. "'"
end

-- The command line that starts the daemon. The store (`db`) of a daemon on another machine
-- is that machine's path: passed as written, its `~` that machine's home (trellisd expands it).
---@return string[]
function M.command()
  local o = M.options
  local cmd = type(o.cmd) == "string" and { o.cmd } or vim.deepcopy(o.cmd)
  if o.db then
    local where = M.remote(cmd)
    cmd[#cmd + 1] = "--db"
    if where == "ssh" then
      cmd[#cmd + 1] = shell_quoted(o.db)
    elseif where == "remote" then
      cmd[#cmd + 1] = o.db
    else
      cmd[#cmd + 1] = vim.fn.expand(o.db)
    end
  end
  return cmd
end

--- session/open's policy: `policy` with `sandbox` and `network` laid over it; nil when none
--- is set.
---@return table|nil
function M.policy()
  local o = M.options
  if o.sandbox == nil and o.network == nil then
    return o.policy
  end
  local policy = vim.deepcopy(o.policy or {})
  if o.sandbox ~= nil then
    policy.sandbox = o.sandbox
  end
  if o.network ~= nil then
    policy.network = o.network
  end
  return policy
end

-- initialize's initializationOptions: only what the user set.
---@return table<string, any>
function M.initialization_options()
  local o = M.options
  local out = vim.empty_dict()
  local pairs_ = {
    { "provider", o.provider },
    { "model", o.model },
    { "baseUrl", o.base_url },
    { "apiKey", o.api_key },
    { "script", o.script },
  }
  for _, kv in ipairs(pairs_) do
    if kv[2] ~= nil then
      out[kv[1]] = kv[2]
    end
  end
  return out
end

return M
