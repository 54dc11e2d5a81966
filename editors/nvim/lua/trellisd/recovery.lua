-- A cancelled command that had to be killed mid-run leaves the conversation waiting for a
-- person: keep the files as the command left them, or revert the turn's changes
-- (session/recover). No turn runs until then; this module asks and sends the answer.

local compat = require("trellisd.compat")
local Connection = require("trellisd.connection")
local daemon = require("trellisd.daemon")
local ui = require("trellisd.ui")

local M = {}

-- A pending decision is a trellisd.Recovery (types.lua): Session.recovery's shape.

M.CHOICES = { "Keep the files as they are", "Revert the turn's changes" }
M.DECISIONS = { "keep", "revert" }

--- What was killed, as a person reads it: "pytest -x (run_command)".
---@param r trellisd.Recovery
---@return string
function M.command(r)
  local argv = compat.value(r.argv)
  local text = type(argv) == "table" and #argv > 0 and table.concat(argv, " ") or tostring(r.tool)
  return text == r.tool and text or (text .. " (" .. tostring(r.tool) .. ")")
end

--- The pending decision a refused turn names (-32020's data.recovery), or nil.
---@param data any
---@return trellisd.Recovery|nil
function M.pending_from(data)
  local r = type(data) == "table" and compat.value(data.recovery) or nil
  if type(r) == "table" and type(r.turnId) == "string" then
    return r
  end
  return nil
end

--- A turn's recovery ({required, tool, argv}) as a pending decision about that turn.
---@param turn {turnId: string, runId: string}
---@param killed {tool: string, argv: string[]}
---@return trellisd.Recovery
function M.pending(turn, killed)
  return { turnId = turn.turnId, runId = turn.runId, tool = killed.tool, argv = killed.argv }
end

--- Send the decision; files a person changed since are named and overwritten only when told.
---@param state {id: string, view: table}
---@param decision "keep"|"revert"
---@param done fun(session: table|nil)
function M.send(state, decision, done, force)
  daemon.request(
    "session/recover",
    { sessionId = state.id, decision = decision, force = force or nil },
    function(err, session)
      local paths = err and type(err.data) == "table" and compat.value(err.data.paths)
      if err and err.code == Connection.CONFLICT and type(paths) == "table" and not force then
        ui.ask_overwrite(paths, "Leave them (the decision still waits)", function()
          M.send(state, decision, done, true)
        end, function()
          done(nil)
        end)
        return
      end
      if err then
        ui.error("could not answer the decision: " .. err.message)
        done(nil)
        return
      end
      local files = compat.value(session.files)
      session.files = nil
      if decision == M.DECISIONS[1] then
        state.view:block({ "*kept the files as the killed command left them; the conversation goes on*" })
      else
        local restored = type(files) == "table" and #(compat.value(files.restored) or {}) or 0
        state.view:block({
          "*reverted the turn's changes ("
            .. restored
            .. " file(s) put back); the conversation goes on*",
        })
      end
      done(session)
    end
  )
end

--- Show the choice about a command killed mid-run, and send the answer.
---@param state {id: string, view: table}
---@param pending trellisd.Recovery
---@param done fun(session: table|nil) the Session after the answer, nil when none was given
function M.offer(state, pending, done)
  local what = M.command(pending)
  state.view:block({ "*a cancelled command was killed mid-run: " .. what .. "; keep the files or revert the turn?*" })
  ui.select(M.CHOICES, {
    prompt = "a cancelled command was killed mid-run: "
      .. what
      .. ". No turn runs until you decide:",
    kind = "trellisd.recovery",
  }, function(_, index)
    if not index then
      ui.warn("the conversation still waits for a decision: :TrellisRecover asks again")
      done(nil)
      return
    end
    M.send(state, M.DECISIONS[index], done)
  end)
end

return M
