-- Images given with a prompt: :TrellisImage {path} attaches a file to the next prompt
-- (:TrellisImage lists them, :TrellisImage! drops them); they go with it as session/turn's
-- `images`: `{path}` for a file under the session's folder (the daemon reads it as read_file
-- does), else `{data, mimeType}`. A turn's images (Turn.images) are drawn under its prompt;
-- `gI` on one fetches it (session/image) and opens it with the system's viewer.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local ui = require("trellisd.ui")

local M = {}

--- At most this many images a turn (the daemon refuses more).
M.MAX = 16

--- The key that opens the image under the cursor in a conversation.
M.OPEN_KEY = "gI"

---@class trellisd.Attached an image file attached to the next prompt
---@field path string absolute
---@field mimeType trellisd.ImageType
---@field bytes integer

---@type trellisd.Attached[]
M.attached = {}

-- The images drawn in conversations: the sha256 of each short id shown.
---@type table<string, string>
M.known = {}

-- The image types by their bytes' magic, as the daemon judges them.
local function sniff(head)
  if head:sub(1, 8) == "\137PNG\r\n\26\n" then
    return "image/png"
  elseif head:sub(1, 3) == "\255\216\255" then
    return "image/jpeg"
  elseif head:sub(1, 6) == "GIF87a" or head:sub(1, 6) == "GIF89a" then
    return "image/gif"
  elseif head:sub(1, 4) == "RIFF" and head:sub(9, 12) == "WEBP" then
    return "image/webp"
  end
  return nil
end

local function read(path, count)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local data = f:read(count or "*a")
  f:close()
  return data or ""
end

local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- `data` in base64 (vim.base64 where the editor has it, 0.10 on).
---@param data string
---@return string
function M.base64(data)
  if vim.base64 then
    return vim.base64.encode(data)
  end
  local out = {}
  for i = 1, #data, 3 do
    local a, b, c = data:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local d1 = math.floor(n / 262144) % 64
    local d2 = math.floor(n / 4096) % 64
    local d3 = math.floor(n / 64) % 64
    local d4 = n % 64
    out[#out + 1] = ALPHABET:sub(d1 + 1, d1 + 1)
      .. ALPHABET:sub(d2 + 1, d2 + 1)
      .. (b and ALPHABET:sub(d3 + 1, d3 + 1) or "=")
      .. (c and ALPHABET:sub(d4 + 1, d4 + 1) or "=")
  end
  return table.concat(out)
end

--- "12.3 KiB", "2.0 MiB", "512 B".
---@param bytes integer
---@return string
function M.size(bytes)
  if bytes >= 1024 * 1024 then
    return string.format("%.1f MiB", bytes / (1024 * 1024))
  elseif bytes >= 1024 then
    return string.format("%.1f KiB", bytes / 1024)
  end
  return bytes .. " B"
end

--- The line of an attached image: "📎 shot.png (image/png, 12.3 KiB)".
---@param a trellisd.Attached
---@return string
function M.attached_line(a)
  local name = vim.fn.fnamemodify(a.path, ":t")
  return "📎 " .. name .. " (" .. a.mimeType .. ", " .. M.size(a.bytes) .. ")"
end

--- The line of a turn's image (Turn.images): "🖼 image/png · 12.3 KiB · 3f2a9c1b0d4e".
---@param ref trellisd.ImageRef
---@return string
function M.ref_line(ref)
  M.known[ref.sha256:sub(1, 12)] = ref.sha256
  return "🖼 " .. ref.mimeType .. " · " .. M.size(ref.bytes) .. " · " .. ref.sha256:sub(1, 12)
end

--- Attach the image file `path` to the next prompt; a message says why not when it cannot be.
---@param path string
---@return boolean attached
function M.attach(path)
  local full = vim.fn.fnamemodify(vim.fn.expand(path), ":p")
  local stat = compat.uv.fs_stat(full)
  if not stat or stat.type ~= "file" then
    ui.warn("no such image file: " .. path)
    return false
  end
  local mime = sniff(read(full, 12) or "")
  if not mime then
    ui.warn(path .. " is not a PNG, JPEG, GIF or WebP image")
    return false
  end
  if #M.attached >= M.MAX then
    ui.warn("a prompt takes at most " .. M.MAX .. " images")
    return false
  end
  M.attached[#M.attached + 1] = { path = full, mimeType = mime, bytes = stat.size }
  ui.notify(
    "attached to the next prompt: "
      .. M.attached_line(M.attached[#M.attached])
      .. " ("
      .. #M.attached
      .. " in all)"
  )
  ui.redraw_status()
  return true
end

--- :TrellisImage[!] [path]: attach `path`; without it, list what is attached; with the
--- bang, drop them all.
---@param path string
---@param bang boolean
function M.command(path, bang)
  if bang then
    local count = #M.attached
    M.attached = {}
    local said = count == 0 and "no image was attached"
      or ("dropped " .. count .. " attached image(s)")
    ui.notify(said)
    ui.redraw_status()
    return
  end
  if path ~= nil and not path:match("^%s*$") then
    M.attach(path)
    return
  end
  if #M.attached == 0 then
    ui.notify("no image is attached: :TrellisImage {file} attaches one to the next prompt")
    return
  end
  local lines = {}
  for _, a in ipairs(M.attached) do
    lines[#lines + 1] = M.attached_line(a) .. " " .. a.path
  end
  ui.notify("attached to the next prompt:\n" .. table.concat(lines, "\n"))
end

--- The statusline's part: "2 images attached", or nil.
---@return string|nil
function M.status()
  if #M.attached == 0 then
    return nil
  end
  return #M.attached .. (#M.attached == 1 and " image" or " images") .. " attached"
end

--- Take the attached images for a prompt to the session over `root`: session/turn's
--- `images` (nil when none) and the attached images themselves (to put back when refused).
---@param root string
---@return table[]|nil images
---@return trellisd.Attached[] taken
function M.take(root)
  local taken = M.attached
  M.attached = {}
  ui.redraw_status()
  if #taken == 0 then
    return nil, taken
  end
  local base = compat.realpath(root)
  base = base:sub(-1) == "/" and base or (base .. "/")
  local out = {}
  for _, a in ipairs(taken) do
    local real = compat.realpath(a.path)
    if real:sub(1, #base) == base then
      out[#out + 1] = { path = real:sub(#base + 1) }
    else
      out[#out + 1] = { data = M.base64(read(a.path) or ""), mimeType = a.mimeType }
    end
  end
  return out, taken
end

--- Put images a refused prompt took back, before any attached since.
---@param taken trellisd.Attached[]
function M.restore(taken)
  if #taken == 0 then
    return
  end
  local again = vim.deepcopy(taken)
  vim.list_extend(again, M.attached)
  M.attached = again
  ui.redraw_status()
end

local EXTENSIONS =
  { ["image/png"] = "png", ["image/jpeg"] = "jpg", ["image/gif"] = "gif", ["image/webp"] = "webp" }

--- Fetch a turn's image (session/image), write it to the cache and open it with the system's
--- viewer (vim.ui.open, 0.10 on; else its path is said); cb(path) once written.
---@param session_id trellisd.Id
---@param sha256 string
---@param cb? fun(path: string)
function M.open(session_id, sha256, cb)
  daemon.request("session/image", { sessionId = session_id, sha256 = sha256 }, function(err, r)
    if err then
      ui.error("could not fetch the image: " .. err.message)
      return
    end
    local folder = vim.fn.stdpath("cache") .. "/trellisd/images"
    vim.fn.mkdir(folder, "p")
    local path = folder .. "/" .. r.sha256 .. "." .. (EXTENSIONS[r.mimeType] or "img")
    local f = io.open(path, "wb")
    if not f then
      ui.error("could not write the image to " .. path)
      return
    end
    local decode = vim.base64 and vim.base64.decode or M.decode
    f:write(decode(r.data))
    f:close()
    if vim.ui.open then
      vim.ui.open(path)
    else
      ui.notify("the image is at " .. path)
    end
    if cb then
      cb(path)
    end
  end)
end

--- Decode base64 (for editors before 0.10, which have no vim.base64).
---@param text string
---@return string
function M.decode(text)
  local values = {}
  for i = 1, #ALPHABET do
    values[ALPHABET:byte(i)] = i - 1
  end
  local out = {}
  text = text:gsub("[^%w%+/]", "")
  for i = 1, #text, 4 do
    local a, b, c, d = text:byte(i, i + 3)
    local n = values[a] * 262144 + values[b] * 4096
    n = n + (c and values[c] or 0) * 64 + (d and values[d] or 0)
    out[#out + 1] = string.char(math.floor(n / 65536) % 256)
    if c then
      out[#out + 1] = string.char(math.floor(n / 256) % 256)
    end
    if d then
      out[#out + 1] = string.char(n % 256)
    end
  end
  return table.concat(out)
end

--- The sha256 of the image a conversation's line shows (M.ref_line), or nil.
---@param line string
---@return string|nil
function M.at_line(line)
  local short = line:match("^🖼 .* · (%x+)$")
  return short and M.known[short] or nil
end

return M
