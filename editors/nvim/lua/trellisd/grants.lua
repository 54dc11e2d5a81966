-- The remembered approvals of a session (“allow always” answers and rules, session/policy's
-- grants): listed by :TrellisGrants, a rule by its words, one revoked after a confirmation
-- (session/revoke, a rule by its target: the pattern as a JSON array).

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local opening = require("trellisd.opening")
local sessions = require("trellisd.sessions")
local ui = require("trellisd.ui")

local M = {}

local GRANT_SCOPES = { session = "this session", project = "this project", policy = "its policy" }

--- A rule's words as code: `pytest **` (the program and its fixed leading words, then **
--- for any further arguments).
---@param rule string[]
---@return string
function M.rule_words(rule)
  local words = {}
  for i, word in ipairs(rule) do
    word = tostring(word)
    words[i] = (word == "" or word:find("[%s'\"]")) and vim.fn.shellescape(word) or word
  end
  return format.code(table.concat(words, " "))
end

--- One line for a remembered approval: what it allows (a rule by its words) and where it
--- is kept.
---@param grant trellisd.Grant
---@return string
function M.grant_label(grant)
  local scope = compat.value(grant.scope) or "session"
  local rule = compat.value(grant.rule)
  local what = tostring(grant.kind) .. " " .. format.one_line(tostring(grant.target), 100)
  if grant.kind == "rule" and type(rule) == "table" and #rule > 0 then
    what = "rule " .. M.rule_words(rule)
  end
  return what .. " · " .. (GRANT_SCOPES[scope] or scope)
end

--- :TrellisGrants: the remembered approvals of the session; pick one to revoke it.
function M.grants()
  local state = sessions.need_current("show the grants of")
  if not state then
    return
  end
  opening.with_daemon(function()
    daemon.request("session/policy", { sessionId = state.id }, function(err, policy)
      if err then
        ui.error("could not read the session's policy: " .. err.message)
        return
      end
      local grants = type(policy) == "table" and compat.value(policy.grants) or {}
      if #grants == 0 then
        ui.notify("no remembered approvals: “allow always” answers are kept here")
        return
      end
      local labels = {}
      for i, grant in ipairs(grants) do
        labels[i] = M.grant_label(grant)
      end
      ui.select(
        labels,
        { prompt = "Remembered approvals (pick one to revoke)", kind = "trellisd.grants" },
        function(grant, index)
          if not index then
            return
          end
          grant = grants[index]
          if compat.value(grant.scope) == "policy" then
            ui.warn("that grant came with the session's policy; open a session with another")
            return
          end
          ui.select({ "Revoke it", "Keep it" }, {
            prompt = "Revoke " .. labels[index] .. "? It will be asked again.",
            kind = "trellisd.confirm",
          }, function(_, answer)
            if answer ~= 1 then
              return
            end
            local revoked = { kind = grant.kind, target = grant.target, scope = grant.scope }
            daemon.request(
              "session/revoke",
              { sessionId = state.id, grant = revoked },
              function(failed)
                if failed then
                  ui.error("could not revoke: " .. failed.message)
                  return
                end
                ui.notify("revoked: " .. labels[index])
              end
            )
          end)
        end
      )
    end)
  end)
end

return M
