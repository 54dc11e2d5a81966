-- The plugin's copies of the protocol's words, checked against protocol/schema.json: every
-- outcome, step kind and approval decision the plugin names, every error code it knows,
-- every method, image type and effort, is one the schema defines.

local Connection = require("trellisd.connection")

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "."
local plugin = vim.fn.fnamemodify(here .. "/..", ":p")
local schema =
  vim.fn.json_decode(table.concat(vim.fn.readfile(plugin .. "../../protocol/schema.json"), "\n"))

local function set(list)
  local out = {}
  for _, v in ipairs(list) do
    out[v] = true
  end
  return out
end

-- Every string the plugin's Lua compares a field `name` against, or sets it to.
local function named(field)
  local found = {}
  for _, file in ipairs(vim.fn.glob(plugin .. "lua/trellisd/*.lua", false, true)) do
    local text = table.concat(vim.fn.readfile(file), "\n")
    for _, pattern in ipairs({
      "[%.%s{]" .. field .. '%s*[=~]=%s*"([%w]+)"',
      "[%s{]" .. field .. '%s*=%s*"([%w]+)"',
    }) do
      for word in text:gmatch(pattern) do
        found[#found + 1] = vim.fn.fnamemodify(file, ":t") .. ": " .. word
      end
    end
  end
  return found
end

local function check(field, allowed)
  local seen = named(field)
  truthy(#seen > 0, "the plugin names some " .. field)
  for _, where in ipairs(seen) do
    local word = where:match(": (.*)$")
    truthy(allowed[word], where .. " is not a " .. field .. " in protocol/schema.json")
  end
end

test("every outcome the plugin names is in the schema", function()
  check("outcome", set(schema["$defs"].Outcome.enum))
end)

test("every approval decision and step kind the plugin names is in the schema", function()
  local allowed = set(schema["$defs"].Decision.enum)
  for _, kind in ipairs(schema["$defs"].StepKind.enum) do
    allowed[kind] = true
  end
  check("decision", allowed)
end)

test("every error code the plugin knows, but its own lost connection, is in the schema", function()
  local codes = set(schema["$defs"].Error.properties.code.enum)
  for name, value in pairs(Connection) do
    if type(value) == "number" and name:match("^[A-Z_]+$") and name ~= "LOST" then
      local what = ("Connection.%s (%d) is not an error code in the schema"):format(name, value)
      truthy(codes[value], what)
    end
  end
end)

test("every image type and effort the plugin names is in the schema", function()
  local text = table.concat(vim.fn.readfile(plugin .. "lua/trellisd/images.lua"), "\n")
  local types = set(schema["$defs"].ImageType.enum)
  local seen = 0
  for name in text:gmatch('"(image/%a+)"') do
    seen = seen + 1
    truthy(types[name], "images.lua: " .. name .. " is not an image type of the schema")
  end
  truthy(seen >= 8, "images.lua names the image types it judges and saves")
  local efforts = set(schema["$defs"].Effort.enum)
  for _, choice in ipairs(require("trellisd.effort").CHOICES) do
    truthy(efforts[choice] or choice == "default", "effort " .. choice .. " is not in the schema")
  end
end)

local images = set(schema["$defs"].ImageType.enum)

test("every method the plugin sends or answers is in the schema", function()
  local known = {}
  for _, methods in ipairs({ schema.requests, schema.clientRequests, schema.notifications }) do
    for m in pairs(methods) do
      known[m] = true
    end
  end
  local seen = 0
  for _, file in ipairs(vim.fn.glob(plugin .. "lua/trellisd/*.lua", false, true)) do
    local text = table.concat(vim.fn.readfile(file), "\n")
    for method in text:gmatch('"([%a$]+/%a+)"') do
      if not images[method] then -- an image type, not a method
        seen = seen + 1
        local where = vim.fn.fnamemodify(file, ":t")
        truthy(known[method], where .. ": " .. method .. " is not in the schema")
      end
    end
  end
  truthy(seen > 10, "the plugin names the methods it sends")
end)
