-- What differs between Neovim 0.7 and 0.11, in one place: the event loop, JSON, health.

local M = {}

M.uv = vim.uv or vim.loop

-- JSON. vim.json exists from 0.6 on and, unlike vim.fn.json_*, may be called from a luv
-- callback. An empty Lua table is ambiguous: use vim.empty_dict() for an empty object.
---@param value any
---@return string
function M.encode(value)
  return vim.json.encode(value)
end

---@param text string
---@return any
function M.decode(text)
  return vim.json.decode(text)
end

-- JSON null decodes to vim.NIL; most code wants nil.
---@generic T
---@param v T|userdata
---@return T|nil
function M.value(v)
  if v == vim.NIL then
    return nil
  end
  return v
end

-- Split on newlines, keeping empty pieces ("a\n" is {"a", ""}), the way buffer lines work.
---@param text string
---@return string[]
function M.lines(text)
  local out = {}
  local start = 1
  while true do
    local nl = text:find("\n", start, true)
    if not nl then
      out[#out + 1] = text:sub(start)
      return out
    end
    out[#out + 1] = text:sub(start, nl - 1)
    start = nl + 1
  end
end

--- A path with its links resolved, as the file system names the file; the absolute path
--- when it does not exist.
---@param path string
---@return string
function M.realpath(path)
  return M.uv.fs_realpath(path) or vim.fn.fnamemodify(path, ":p")
end

-- :checkhealth reporting: vim.health.ok in 0.10+, require("health").report_ok in 0.7.
---@return {start: fun(name: string), ok: fun(msg: string), info: fun(msg: string), warn: fun(msg: string, advice?: string|string[]), error: fun(msg: string, advice?: string|string[])}
function M.health()
  local h = vim.health
  if h == nil or (h.ok == nil and h.report_ok == nil) then
    h = require("health")
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    info = h.info or h.report_info,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
  }
end

-- The environment a child process gets: the editor's, with `extra` laid over it, as the
-- "NAME=value" list that uv.spawn takes. nil when there is nothing to add.
---@param extra table<string, string|false>|nil variables to set (false: unset)
---@return string[]|nil
function M.environment(extra)
  if extra == nil or next(extra) == nil then
    return nil
  end
  local env = vim.fn.environ()
  for k, v in pairs(extra) do
    env[k] = v
  end
  local list = {}
  for k, v in pairs(env) do
    if v ~= false then
      list[#list + 1] = k .. "=" .. tostring(v)
    end
  end
  table.sort(list)
  return list
end

return M
