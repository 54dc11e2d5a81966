-- :TrellisProcesses: the programs a session's turns started with start_process, which
-- outlive the call (a dev server, a watcher), listed one a line (session/processes: its
-- command line, running or its exit code, the turn that started it), with the output of
-- the one under the cursor below the list, live (session/processOutput); `s` stops it
-- (session/process/stop), `r` reads the list again. The list is read again when a
-- start_process or stop_process call of a turn ends, and a process's row says how it ended
-- as soon as it does (session/processExited). A process first shown here (this editor opened
-- the session after it started) has what it printed so far read from the daemon
-- (session/process/output), then goes on live.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

--- How much of a process's output is kept here, in bytes (its newest).
M.KEEP = 64 * 1024

--- How many lines of the output the list's buffer shows (its last).
M.SHOWN = 200

-- The tools whose calls start or stop a process.
local TOOLS = { start_process = true, stop_process = true }

---@type table<trellisd.Id, trellisd.Process[]> the last list read, by session
M.lists = {}
---@type table<trellisd.Id, table<trellisd.Id, string>> what each process printed, by session
M.outputs = {}
---@type table<trellisd.Id, table<trellisd.Id, "reading"|"read">> whose output was read back
M.read_back = {}
-- by session: {buf, selected (processId), scheduled}
local shown = {}

--- The line of a process: "● running · npm run dev · turn 3f2a9c1b", "○ exit 0 · …".
---@param p trellisd.Process
---@return string
function M.line(p)
  local state
  local code = compat.value(p.exitCode)
  if p.running then
    state = "● running"
  elseif code == nil then
    state = "○ ended"
  elseif code < 0 then
    state = "○ killed by signal " .. -code
  else
    state = "○ exit " .. code
  end
  local line = state .. " · " .. table.concat(p.argv, " ")
  local turn = compat.value(p.turnId)
  if turn then
    line = line .. " · turn " .. tostring(turn):sub(1, 8)
  end
  return line
end

local HEADER = "# processes: s stops the one under the cursor · r reads the list again · q closes"

-- The process of row `row` of the list's buffer (1-based), or nil.
local function at_row(id, row)
  local list = M.lists[id] or {}
  return list[row - 1]
end

local render

-- Read what a process printed before this editor followed it (session/process/output): it
-- replaces what came live so far, which it holds.
local function read_back(id, process_id)
  local done = M.read_back[id] or {}
  M.read_back[id] = done
  if done[process_id] then
    return
  end
  done[process_id] = "reading"
  local params = { sessionId = id, processId = process_id }
  daemon.request("session/process/output", params, function(err, result)
    done[process_id] = "read"
    if err then
      ui.warn("could not read what it printed: " .. err.message)
      return
    end
    local text = result.text
    if result.dropped > 0 then
      text = ("(its first %d bytes are gone)\n"):format(result.dropped) .. text
    end
    if #text > M.KEEP then
      text = text:sub(#text - M.KEEP + 1)
    end
    M.outputs[id] = M.outputs[id] or {}
    M.outputs[id][process_id] = text
    render(id)
  end)
end

render = function(id)
  local s = shown[id]
  if not s or not vim.api.nvim_buf_is_valid(s.buf) then
    return
  end
  local list = M.lists[id] or {}
  local lines = { HEADER }
  local selected
  for i, p in ipairs(list) do
    lines[#lines + 1] = M.line(p)
    if p.processId == s.selected then
      selected = list[i]
    end
  end
  if #list == 0 then
    lines[#lines + 1] = "(no process: a turn starts one with start_process)"
  end
  selected = selected or list[#list]
  if selected then
    read_back(id, selected.processId)
    lines[#lines + 1] = ""
    lines[#lines + 1] = "── output of " .. table.concat(selected.argv, " ") .. " ──"
    local text = (M.outputs[id] or {})[selected.processId] or ""
    local out = vim.split((text:gsub("\r", "")), "\n", { plain = true })
    if out[#out] == "" then
      out[#out] = nil
    end
    if #out == 0 then
      out = { "(no output yet)" }
    end
    for i = math.max(1, #out - M.SHOWN + 1), #out do
      lines[#lines + 1] = out[i]
    end
  end
  vim.bo[s.buf].modifiable = true
  vim.api.nvim_buf_set_lines(s.buf, 0, -1, false, lines)
  vim.bo[s.buf].modifiable = false
end

--- The process a window's cursor is on in the list's buffer of session `id`, or nil.
---@param id trellisd.Id
---@return trellisd.Process|nil
function M.under_cursor(id)
  return at_row(id, vim.api.nvim_win_get_cursor(0)[1])
end

--- Read the session's processes again (session/processes) and draw them where they are
--- shown; cb() once read.
---@param state trellisd.State
---@param cb? fun()
function M.refresh(state, cb)
  daemon.request("session/processes", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not list the processes: " .. err.message)
      return
    end
    M.lists[state.id] = result.processes or {}
    render(state.id)
    if cb then
      cb()
    end
  end)
end

--- Stop the process under the cursor of the list (session/process/stop).
---@param state trellisd.State
function M.stop(state)
  local p = M.under_cursor(state.id)
  if not p then
    ui.warn("the cursor is on no process")
    return
  end
  if not p.running then
    ui.notify("it has ended already: " .. M.line(p))
    return
  end
  local params = { sessionId = state.id, processId = p.processId }
  daemon.request("session/process/stop", params, function(err, ended)
    if err then
      ui.error("could not stop it: " .. err.message)
      return
    end
    ui.notify("stopped: " .. M.line(ended))
    M.refresh(state)
  end)
end

local function make_buffer(state)
  local buf = windows.scratch("trellis://" .. state.id .. "/processes")
  local s = { buf = buf }
  shown[state.id] = s
  local function map(key, fn, desc)
    vim.keymap.set("n", key, fn, { buffer = buf, desc = desc, nowait = true })
  end
  map("s", function()
    M.stop(state)
  end, "Stop the process under the cursor")
  map("r", function()
    M.refresh(state)
  end, "Read the list of processes again")
  map("q", "<cmd>close<CR>", "Close the list")
  vim.api.nvim_create_autocmd("CursorMoved", {
    buffer = buf,
    callback = function()
      local p = M.under_cursor(state.id)
      if p and p.processId ~= s.selected then
        s.selected = p.processId
        render(state.id)
      end
    end,
  })
  return s
end

--- :TrellisProcesses: the current session's processes, in a window below.
function M.show()
  local state = sessions.need_current("list the processes of")
  if not state then
    return
  end
  opening.with_daemon(function()
    local s = shown[state.id]
    if not s or not vim.api.nvim_buf_is_valid(s.buf) then
      s = make_buffer(state)
    end
    render(state.id)
    windows.show_buffer(s.buf, "horizontal")
    M.refresh(state)
  end)
end

--- What a process printed (session/processOutput): kept, and drawn when it is shown.
---@param id trellisd.Id the session
---@param process_id trellisd.Id
---@param text string
function M.output(id, process_id, text)
  local outputs = M.outputs[id] or {}
  M.outputs[id] = outputs
  local all = (outputs[process_id] or "") .. text
  if #all > M.KEEP then
    all = all:sub(#all - M.KEEP + 1)
  end
  outputs[process_id] = all
  local s = shown[id]
  if s and not s.scheduled then
    s.scheduled = true
    vim.defer_fn(function()
      s.scheduled = false
      render(id)
    end, 40)
  end
end

--- A process ended (session/processExited): its row says how, at once.
---@param p trellisd.ProcessExited
function M.exited(p)
  local list = M.lists[p.sessionId] or {}
  M.lists[p.sessionId] = list
  local found = false
  for i, known in ipairs(list) do
    if known.processId == p.processId then
      list[i], found = p, true
    end
  end
  if not found then
    list[#list + 1] = p
  end
  render(p.sessionId)
end

--- A step of a turn ended: when it called start_process or stop_process, the list is read
--- again.
---@param state trellisd.State
---@param call trellisd.ToolCall|nil
function M.after_step(state, call)
  if type(call) == "table" and TOOLS[call.name] then
    M.refresh(state)
  end
end

return M
