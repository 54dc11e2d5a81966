-- The conversation's tree of turns: branch from an earlier turn (session/branch, restoring
-- the files or not), fork a new session from a turn or after one of its steps
-- (session/fork), and the tree buffer (:TrellisTree) where <CR> branches, f and F fork and
-- p pins the turn under the cursor.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local fork_step = require("trellisd.fork_step")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local paging = require("trellisd.paging")
local pins = require("trellisd.pins")
local sessions = require("trellisd.sessions")
local tree = require("trellisd.tree")
local ui = require("trellisd.ui")
local windows = require("trellisd.windows")

local M = {}

local tree_buffers = {} -- buffer -> {session id, entries, offset}

local function branch_to(state, turn_id, cb)
  if state.running then
    ui.warn("a turn is running: wait for it to end or :TrellisCancel it before you branch")
    return
  end
  local function send(restore, force)
    daemon.request("session/branch", {
      sessionId = state.id,
      turnId = turn_id or vim.NIL,
      restoreFiles = restore,
      force = force,
    }, function(err, session)
      if
        restore
        and not force
        and sessions.ask_restore(err, "Cancel the branch", function()
          send(true, true)
        end)
      then
        return
      end
      if err then
        ui.error("could not branch: " .. err.message)
        return
      end
      local files = session.files
      session.files = nil
      sessions.adopt(session)
      if files then
        vim.cmd("checktime") -- buffers of restored files reload
      end
      daemon.request("session/history", { sessionId = state.id, limit = paging.PAGE }, function(e, result)
        if e then
          ui.error("could not read the new path: " .. e.message)
          return
        end
        state.cursor = compat.value(result.nextCursor)
        sessions.render(state, result.turns)
        local last = result.turns[#result.turns]
        local restored = files and (" (" .. #files.restored .. " file(s) restored)") or ""
        ui.notify(
          (
            last
              and ("branched: the next prompt follows “" .. format.one_line(tree.turn_prompt(last), 40) .. "”")
            or "branched: the next prompt starts the conversation afresh"
          ) .. restored
        )
        if cb then
          cb(state)
        end
      end)
    end)
  end
  ui.select({ "Restore the files as they were there", "Leave the files as they are" }, {
    prompt = "branch: restore the files the turns changed?",
    kind = "trellisd.restore",
  }, function(_, index)
    if index then
      send(index == 1, false)
    end
  end)
end

local function with_tree(state, cb)
  daemon.request("session/turns", { sessionId = state.id }, function(err, result)
    if err then
      ui.error("could not read the turns: " .. err.message)
      return
    end
    cb(tree.build(result.turns or {}, state.head, compat.value(state.session.pinned)))
  end)
end

-- A turn of the current session's tree, picked by the user for `what` ("branch", "fork"):
-- then(state, turn_id), turn_id nil for before the first turn.
local function pick_turn(what, prompt, then_)
  local state = sessions.need_current(what)
  if not state then
    return
  end
  opening.with_daemon(function()
    with_tree(state, function(entries)
      ui.select(entries, {
        prompt = prompt .. " (● current path, ○ left branch)",
        kind = "trellisd." .. what,
        format_item = function(e)
          return e.line
        end,
      }, function(choice)
        if choice then
          then_(state, choice.turn and choice.turn.turnId)
        end
      end)
    end)
  end)
end

local function paint_tree(state, buf, entries)
  local lines =
    {
      "# Turns of " .. format.title(state),
      tree.LEGEND,
      "<CR> on a turn branches from it, f forks from it, F after one of its steps, p pins it",
      "",
    }
  local offset = #lines
  for _, l in ipairs(tree.lines(entries)) do
    lines[#lines + 1] = l
  end
  tree_buffers[buf] = { id = state.id, entries = entries, offset = offset }
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

-- Paint the tree buffer again from the session's turns, if it is still there.
local function repaint_tree(state, buf)
  with_tree(state, function(entries)
    if vim.api.nvim_buf_is_valid(buf) then
      paint_tree(state, buf, entries)
    end
  end)
end

-- The session of a tree buffer and the entry under the cursor, or nil.
local function entry_at_cursor(buf)
  local info = tree_buffers[buf]
  if not info then
    return nil
  end
  local entry = info.entries[vim.api.nvim_win_get_cursor(0)[1] - info.offset]
  local state = sessions.open[info.id]
  if entry and state then
    return state, entry
  end
end

-- Fork the session at turn_id (nil: before the first turn): a new session whose history is
-- the path to that turn, opened in its own buffer; the origin is left as it was.
-- With `step`, the fork's copy of the turn keeps only its first `step` steps.
local function fork_at(state, turn_id, step)
  daemon.request(
    "session/fork",
    { sessionId = state.id, turnId = turn_id or vim.NIL, step = step },
    function(err, fork)
      if err then
        ui.error("could not fork: " .. err.message)
        return
      end
      opening.reopen(fork.sessionId, function(forked)
        sessions.show(forked)
        ui.notify("forked into a new session: " .. format.title(forked.session))
      end)
    end
  )
end

--- :TrellisBranch
function M.branch()
  pick_turn("branch", "Branch from which turn?", function(state, turn_id)
    branch_to(state, turn_id, function()
      sessions.show(state)
    end)
  end)
end

--- :TrellisFork
function M.fork()
  pick_turn("fork", "Fork a new session from which turn?", fork_at)
end

--- :TrellisTree
function M.tree()
  local state = sessions.need_current("show")
  if not state then
    return
  end
  opening.with_daemon(function()
    with_tree(state, function(entries)
      local buf, new = windows.scratch("trellis://" .. state.id .. "/tree", "trellistree")
      if new then
        vim.keymap.set("n", "<CR>", function()
          M.branch_at_cursor(buf)
        end, { buffer = buf, desc = "Branch from the turn under the cursor" })
        vim.keymap.set("n", "f", function()
          M.fork_at_cursor(buf)
        end, { buffer = buf, desc = "Fork a new session from the turn under the cursor" })
        vim.keymap.set("n", "F", function()
          M.fork_step_at_cursor(buf)
        end, { buffer = buf, desc = "Fork a new session after a step of the turn under the cursor" })
        vim.keymap.set("n", "p", function()
          M.pin_at_cursor(buf)
        end, { buffer = buf, desc = "Pin or unpin the turn under the cursor" })
      end
      paint_tree(state, buf, entries)
      windows.show_buffer(buf, "horizontal")
    end)
  end)
end

--- <CR> in the tree: branch from the turn under the cursor.
---@param buf integer the tree buffer
function M.branch_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state then
    return
  end
  branch_to(state, entry.turn and entry.turn.turnId, function()
    repaint_tree(state, buf)
  end)
end

--- f in the tree: fork a new session from the turn under the cursor.
---@param buf integer the tree buffer
function M.fork_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if state then
    fork_at(state, entry.turn and entry.turn.turnId)
  end
end

--- F in the tree: pick a step of the turn under the cursor, and fork after it.
---@param buf integer the tree buffer
function M.fork_step_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state or not entry.turn then
    return
  end
  fork_step.pick(entry.turn, function(step)
    fork_at(state, entry.turn.turnId, step)
  end)
end

--- p in the tree: pin the turn under the cursor, or unpin it; the tree marks pinned turns.
---@param buf integer the tree buffer
function M.pin_at_cursor(buf)
  local state, entry = entry_at_cursor(buf)
  if not state or not entry.turn then
    return
  end
  pins.toggle(state, entry.turn, function()
    repaint_tree(state, buf)
  end, sessions.offer_takeover)
end

return M
