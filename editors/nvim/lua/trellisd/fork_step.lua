-- Fork after a step: a new session whose copy of the turn holds only its first steps (and
-- ends `forked`), so that its next turn goes on from there (session/fork with `step`). The
-- turn's steps are read with run/steps and offered in a pick.

local compat = require("trellisd.compat")
local daemon = require("trellisd.daemon")
local format = require("trellisd.format")
local tree = require("trellisd.tree")
local ui = require("trellisd.ui")

local M = {}

--- What a step did, in a line: its tool call, else its text.
---@param step {step: integer, decision: string, text: string, toolCall: table|nil}
---@return string
function M.step_line(step)
  local call = compat.value(step.toolCall)
  if type(call) == "table" then
    local args = {}
    for _, v in pairs(compat.value(call.arguments) or {}) do
      if type(v) == "string" then
        args[#args + 1] = v
      end
    end
    return format.one_line(call.name .. " " .. table.concat(args, " "), 60)
  end
  local text = compat.value(step.text) or ""
  return text ~= "" and format.one_line(text, 60) or ("(" .. tostring(step.decision) .. ")")
end

--- The choices: before the first step (0), then after each step.
---@param steps table[]
---@return {label: string, step: integer}[]
function M.items(steps)
  local items = { { label = "before the first step: the prompt only", step = 0 } }
  for _, s in ipairs(steps) do
    items[#items + 1] = { label = "after step " .. s.step .. ": " .. M.step_line(s), step = s.step }
  end
  return items
end

--- Ask after which step of `turn` to fork; cb(step) with the answer (not called when none).
---@param turn {runId: string, prompt: string}
---@param cb fun(step: integer)
function M.pick(turn, cb)
  daemon.request("run/steps", { runId = turn.runId }, function(err, result)
    if err then
      ui.error("could not read the turn's steps: " .. err.message)
      return
    end
    ui.select(M.items(compat.value(result.steps) or {}), {
      prompt = "Fork “" .. format.one_line(tree.turn_prompt(turn), 40) .. "” after which step?",
      kind = "trellisd.fork_step",
      format_item = function(item)
        return item.label
      end,
    }, function(choice)
      if choice then
        cb(choice.step)
      end
    end)
  end)
end

return M
