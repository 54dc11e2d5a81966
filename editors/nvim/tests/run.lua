-- Runs the plugin's Lua tests in a headless Neovim (0.7 and later):
--
--   nvim --headless -u NONE -i NONE -c "luafile editors/nvim/tests/run.lua"
--
-- Every *_spec.lua beside this file is run, or those named in $TRELLIS_SPECS (comma
-- separated, e.g. "rpc,tree"). A spec calls test(name, fn); fn fails by raising an error.
-- Prints one line a test and "N passed, M failed"; the exit code is 1 if any failed.

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "."
here = vim.fn.fnamemodify(here, ":p"):gsub("/$", "") -- absolute: specs may change directory
local root = vim.fn.fnamemodify(here .. "/..", ":p")
vim.opt.runtimepath:prepend(root)

local tests = {}

function _G.test(name, fn)
  tests[#tests + 1] = { name = name, fn = fn }
end

function _G.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(
      string.format(
        "%sexpected %s, got %s",
        what and (what .. ": ") or "",
        vim.inspect(expected),
        vim.inspect(actual)
      ),
      2
    )
  end
end

function _G.truthy(value, what)
  if not value then
    error((what or "expected a true value") .. ", got " .. vim.inspect(value), 2)
  end
  return value
end

-- How long a spec waits for something before it fails: a safety net for a stuck spec on a
-- busy machine, never a measure of speed.
_G.SAFETY_MS = 30000

-- Run the event loop until cond() holds; fail after ms (default SAFETY_MS).
function _G.wait_for(cond, ms, what)
  if not vim.wait(ms or SAFETY_MS, cond, 5) then
    error("timed out waiting for " .. (what or "a condition"), 2)
  end
end

local wanted = nil
if vim.env.TRELLIS_SPECS and vim.env.TRELLIS_SPECS ~= "" then
  wanted = {}
  for name in vim.env.TRELLIS_SPECS:gmatch("[^,%s]+") do
    wanted[name] = true
  end
end

local out = io.stdout
local passed, failed = 0, 0
local files = vim.fn.glob(here .. "/*_spec.lua", false, true)
table.sort(files)
for _, file in ipairs(files) do
  local spec = vim.fn.fnamemodify(file, ":t"):gsub("_spec%.lua$", "")
  if wanted == nil or wanted[spec] then
    tests = {}
    local loaded, err = pcall(dofile, file)
    if not loaded then
      failed = failed + 1
      out:write(("FAIL %s: the spec does not load: %s\n"):format(spec, tostring(err)))
    end
    for _, t in ipairs(tests) do
      local ok, e = xpcall(t.fn, debug.traceback)
      if ok then
        passed = passed + 1
        out:write(("ok   %s: %s\n"):format(spec, t.name))
      else
        failed = failed + 1
        out:write(("FAIL %s: %s\n%s\n"):format(spec, t.name, tostring(e)))
      end
    end
  end
end
out:write(("%d passed, %d failed\n"):format(passed, failed))
out:flush()
-- :cquit and :qall (not os.exit) so that Neovim cleans up after itself
if failed > 0 or passed == 0 then
  vim.cmd("cquit 1")
else
  vim.cmd("qall!")
end
