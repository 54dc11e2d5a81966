-- The LSP base protocol's framing: "Content-Length: N\r\n\r\n" then N bytes of JSON.
-- Pure: no I/O and no Neovim state, so it is tested on its own.

local M = {}

local MAX_HEADER = 65536

---@param body string a JSON text
---@return string
function M.frame(body)
  return "Content-Length: " .. #body .. "\r\n\r\n" .. body
end

local Parser = {}
Parser.__index = Parser

-- Feed it chunks as they come from the pipe (split anywhere, several messages in one
-- chunk); it returns the complete bodies so far. A malformed header raises an error.
---@return {feed: fun(self: table, chunk: string): string[]}
function M.parser()
  return setmetatable({ chunks = {}, size = 0, length = nil }, Parser)
end

local function content_length(head)
  for line in (head .. "\r\n"):gmatch("(.-)\r\n") do
    local name, value = line:match("^%s*([^:]+):%s*(.-)%s*$")
    if name and name:lower() == "content-length" then
      local n = tonumber(value)
      if n and n >= 0 and n == math.floor(n) then
        return n
      end
    end
  end
  error("a message from the daemon has no valid Content-Length header: " .. head:sub(1, 200))
end

function Parser:feed(chunk)
  local bodies = {}
  self.chunks[#self.chunks + 1] = chunk
  self.size = self.size + #chunk
  if self.length ~= nil and self.size < self.length then
    return bodies -- a large body still arriving: join its pieces once, at the end
  end
  local data = table.concat(self.chunks)
  local pos = 1
  while true do
    if self.length == nil then
      local head_end = data:find("\r\n\r\n", pos, true)
      if head_end == nil then
        if #data - pos > MAX_HEADER then
          error("no end of header in the first 64 KiB from the daemon")
        end
        break
      end
      self.length = content_length(data:sub(pos, head_end - 1))
      pos = head_end + 4
    end
    if #data - pos + 1 < self.length then
      break
    end
    bodies[#bodies + 1] = data:sub(pos, pos + self.length - 1)
    pos = pos + self.length
    self.length = nil
  end
  local rest = data:sub(pos)
  self.chunks = { rest }
  self.size = #rest
  return bodies
end

return M
