-- trellisd for Neovim: durable, branchable conversations with a coding agent that runs in
-- the trellisd daemon. require("trellisd").setup({...}); see :help trellisd.

local config = require("trellisd.config")

local M = {}

local COMMANDS = {
  {
    "Trellis",
    "?",
    "Send a prompt to the conversation over this folder",
    function(o)
      M.ask(o.args)
    end,
    function(lead, line)
      return M.complete_command(lead, line)
    end,
  },
  {
    "TrellisAsk",
    "?",
    "Ask about the selected lines (:'<,'>TrellisAsk), or about the current buffer",
    function(o)
      if o.range > 0 then
        M.ask_about(o.args, o.line1, o.line2)
      else
        M.ask_about(o.args)
      end
    end,
    nil,
    true,
  },
  {
    "TrellisNew",
    "?",
    "Start a new conversation over this folder",
    function(o)
      M.new(o.args)
    end,
  },
  {
    "TrellisWorktree",
    "?",
    "Start a new conversation in a new git worktree of this folder's repository",
    function(o)
      M.worktree(o.args)
    end,
  },
  {
    "TrellisMerge",
    0,
    "Merge the conversation's worktree branch into the branch it started from",
    function()
      M.merge()
    end,
  },
  {
    "TrellisDiscard",
    0,
    "Discard the conversation's worktree and its branch (after a confirmation)",
    function()
      M.discard()
    end,
  },
  {
    "TrellisSessions",
    "?",
    "Reopen a conversation; with words, search the conversations for them",
    function(o)
      M.sessions(o.args)
    end,
  },
  {
    "TrellisChildren",
    0,
    "Open one of the child sessions the conversation's task calls started",
    function()
      M.children()
    end,
  },
  {
    "TrellisSteer",
    "?",
    "Steer the running turn",
    function(o)
      M.steer(o.args)
    end,
  },
  {
    "TrellisCancel",
    0,
    "Cancel the running turn",
    function()
      M.cancel()
    end,
  },
  {
    "TrellisResume",
    0,
    "Continue the paused or interrupted last turn",
    function()
      M.resume()
    end,
  },
  {
    "TrellisPause",
    0,
    "Pause the running turn at its next step",
    function()
      M.pause()
    end,
  },
  {
    "TrellisStep",
    0,
    "Toggle step mode: pause after every step",
    function()
      M.step()
    end,
  },
  {
    "TrellisBranch",
    0,
    "Branch the conversation from an earlier turn",
    function()
      M.branch()
    end,
  },
  {
    "TrellisTools",
    0,
    "List the tools the model sees (built-in and MCP) and the MCP servers",
    function()
      M.tools()
    end,
  },
  {
    "TrellisTree",
    0,
    "Show the conversation's tree of turns",
    function()
      M.tree()
    end,
  },
  {
    "TrellisChanges",
    0,
    "Show what the last turn changed in the files; R reverts it",
    function()
      M.changes()
    end,
  },
  {
    "TrellisFork",
    0,
    "Fork a new conversation from a turn of this one",
    function()
      M.fork()
    end,
  },
  {
    "TrellisRename",
    "?",
    "Rename the conversation",
    function(o)
      M.rename(o.args)
    end,
  },
  {
    "TrellisDelete",
    0,
    "Delete a conversation (after a confirmation)",
    function()
      M.delete()
    end,
  },
  {
    "TrellisGrants",
    0,
    "List the remembered approvals and revoke one",
    function()
      M.grants()
    end,
  },
  {
    "TrellisWalls",
    0,
    "Show the walls the conversation's programs run in: mode, network, writable and hidden paths",
    function()
      M.walls()
    end,
  },
  {
    "TrellisMode",
    "?",
    "Set the conversation's approval mode (all, auto, acceptEdits, ask, plan, never); asks without one",
    function(o)
      M.mode(o.args)
    end,
    function()
      return { "all", "auto", "acceptEdits", "ask", "plan", "never" }
    end,
  },
  {
    "TrellisPlanMode",
    0,
    "Switch plan mode on (the model reads and plans, nothing changes), or back to the mode before",
    function()
      M.plan_mode()
    end,
  },
  {
    "TrellisRunPlan",
    0,
    "Run the plan of the planned turn under the cursor (else the newest) in a new turn",
    function()
      M.run_plan()
    end,
  },
  {
    "TrellisExport",
    "?",
    "Export the conversation to a file",
    function(o)
      M.export(o.args)
    end,
    "file",
  },
  {
    "TrellisImport",
    "?",
    "Import a conversation from a file",
    function(o)
      M.import(o.args)
    end,
    "file",
  },
  {
    "TrellisCompact",
    0,
    "Summarize the oldest turns, so that the conversation fits the model's context window",
    function()
      M.compact()
    end,
  },
  {
    "TrellisQueue",
    0,
    "List the prompts queued behind the running turn; pick one to drop it",
    function()
      M.queue()
    end,
  },
  {
    "TrellisBudget",
    "?",
    "Set what the conversation may spend: tokens=N usd=X, or off",
    function(o)
      M.budget(o.args)
    end,
  },
  {
    "TrellisEarlier",
    0,
    "Load the turns before those shown in the conversation (also [[ in its buffer)",
    function()
      M.earlier()
    end,
  },
  {
    "TrellisRecover",
    0,
    "Decide about a command killed mid-run: keep the files or revert the turn",
    function()
      M.recover()
    end,
  },
  {
    "TrellisImage",
    "?",
    "Attach an image file to the next prompt; without one, list those attached; ! drops them",
    function(o)
      M.image(o.args, o.bang)
    end,
    "file",
    nil,
    true,
  },
  {
    "TrellisEffort",
    "?",
    "Set how hard the model thinks in the next turns (low, medium, high, default); asks without one",
    function(o)
      M.effort(o.args)
    end,
    function()
      return { "low", "medium", "high", "default" }
    end,
  },
  {
    "TrellisProcesses",
    0,
    "List the programs the conversation's turns started (start_process), their output; s stops one",
    function()
      M.processes()
    end,
  },
  {
    "TrellisCommands",
    0,
    "List the custom commands (/name) of the conversation: source, description, settings",
    function()
      M.commands()
    end,
  },
  {
    "TrellisHooks",
    0,
    "List the hooks in effect for the conversation: event, matcher, command, source, approved",
    function()
      M.hooks()
    end,
  },
  {
    "TrellisView",
    0,
    "Open the conversation's read-only page in the browser (its URL is said too)",
    function()
      M.view()
    end,
  },
  {
    "TrellisLog",
    0,
    "Open the daemon's log",
    function()
      M.log()
    end,
  },
}

function M.create_commands()
  for _, c in ipairs(COMMANDS) do
    vim.api.nvim_create_user_command(
      c[1],
      c[4],
      { nargs = c[2], desc = c[3], complete = c[5], range = c[6], bang = c[7], force = true }
    )
  end
end

--- Set the options (:help trellisd-options) and create the user commands.
---@param opts? table
function M.setup(opts)
  config.set(opts)
  M.create_commands()
end

local wired = false

-- A feature module (trellisd.<name>), loaded on first use; from the first on, the
-- daemon's notifications and requests go to trellisd.events and trellisd.approvals.
local function feature(name)
  if not wired then
    wired = true
    require("trellisd.events").wire()
  end
  return require("trellisd." .. name)
end

--- :Trellis [prompt]
---@param prompt? string asked for when not given
function M.ask(prompt)
  feature("ask").ask(prompt)
end

--- :[range]TrellisAsk [prompt]: about the lines line1..line2, or the whole buffer.
---@param prompt? string
---@param line1? integer
---@param line2? integer
function M.ask_about(prompt, line1, line2)
  feature("ask").ask_about(prompt, line1, line2)
end

--- :TrellisNew [title]
---@param title? string
function M.new(title)
  feature("opening").new(title)
end

--- :TrellisWorktree [name]
---@param name? string the worktree's name (trellisd/<name>); made up when not given
function M.worktree(name)
  feature("worktrees").open(name)
end

function M.merge()
  feature("worktrees").merge()
end

function M.discard()
  feature("worktrees").discard()
end

--- :TrellisSessions [query]
---@param query? string words to search the sessions for
function M.sessions(query)
  feature("opening").pick_session(query)
end

--- :TrellisSteer [text]
---@param text? string asked for when not given
function M.steer(text)
  feature("controls").steer(text)
end

function M.earlier()
  feature("paging").load_earlier(feature("sessions").current_state())
end

function M.recover()
  feature("controls").recover()
end

function M.cancel()
  feature("controls").cancel()
end

function M.resume()
  feature("controls").resume()
end

function M.changes()
  feature("changes").changes()
end

function M.tools()
  feature("tools").tools()
end

function M.pause()
  feature("controls").pause()
end

function M.step()
  feature("controls").toggle_step()
end

function M.branch()
  feature("branching").branch()
end

function M.tree()
  feature("branching").tree()
end

function M.fork()
  feature("branching").fork()
end

--- :TrellisRename [title]
---@param title? string asked for when not given
function M.rename(title)
  feature("lifecycle").rename(title)
end

function M.delete()
  feature("lifecycle").delete()
end

function M.grants()
  feature("grants").grants()
end

function M.walls()
  feature("walls").show()
end

--- :TrellisMode [mode]
---@param mode? string asked for when not given
function M.mode(mode)
  feature("planning").mode(mode)
end

function M.plan_mode()
  feature("planning").toggle_plan_mode()
end

function M.run_plan()
  feature("planning").run_plan()
end

function M.children()
  feature("children").pick()
end

--- :TrellisExport [path]
---@param path? string asked for when not given
function M.export(path)
  feature("lifecycle").export(path)
end

--- :TrellisImport [path]
---@param path? string asked for when not given
function M.import(path)
  feature("lifecycle").import(path)
end

function M.compact()
  feature("controls").compact()
end

--- :TrellisImage[!] [path]
---@param path string
---@param bang boolean drop the attached images
function M.image(path, bang)
  feature("images").command(path, bang)
end

--- :TrellisEffort [low|medium|high|default]
---@param choice? string asked for when not given
function M.effort(choice)
  feature("effort").pick(choice)
end

function M.processes()
  feature("processes").show()
end

function M.commands()
  feature("commands").show()
end

function M.hooks()
  feature("hooks").show()
end

--- The completion of :Trellis: a custom command's /name.
---@param lead string
---@param line string
---@return string[]
function M.complete_command(lead, line)
  return package.loaded["trellisd.sessions"] and feature("commands").complete(lead, line) or {}
end

function M.log()
  feature("status").open_log()
end

function M.view()
  feature("browser").open()
end

function M.queue()
  feature("controls").queue()
end

--- :TrellisBudget tokens=N usd=X, or off
---@param args string
function M.budget(args)
  feature("controls").budget(args)
end

-- For the statusline: "trellis: streaming 42 tok", "trellis: idle", ...
---@return string
function M.statusline()
  if not package.loaded["trellisd.sessions"] then
    return "trellis: idle"
  end
  return feature("status").statusline()
end

-- For the statusline: the context meter and the session's cost, "ctx 12% · $0.0123" (""
-- until the daemon has told them).
---@return string
function M.usage()
  return package.loaded["trellisd.sessions"] and feature("status").usage() or ""
end

-- The conversation commands act on: {sessionId, root, title, head, buf, running} or nil.
---@return {sessionId: trellisd.Id, root: string, title: string, head: trellisd.Id|nil, buf: integer|nil, running: boolean}|nil
function M.current()
  local state = package.loaded["trellisd.sessions"] and feature("sessions").current_state()
  if not state then
    return nil
  end
  return {
    sessionId = state.id,
    root = state.root,
    title = state.title,
    head = state.head,
    buf = state.view and state.view.buf,
    running = state.running ~= nil,
  }
end

return M
