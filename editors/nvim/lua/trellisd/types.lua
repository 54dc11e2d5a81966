-- LuaCATS annotations for the protocol's shapes the plugin reads and writes, with the field
-- names of protocol/schema.json (camelCase, as on the wire). Nothing here runs: the modules
-- name these types in their ---@param and ---@return lines. A field the schema allows to be
-- null arrives as vim.NIL; compat.value turns it into nil.

---@alias trellisd.Id string an opaque id
---@alias trellisd.Timestamp string ISO 8601, UTC, milliseconds
---@alias trellisd.Outcome "running"|"finished"|"error"|"cancelled"|"interrupted"|"exhausted"|"success"|"failure"|"paused"|"forked"
---@alias trellisd.StepKind "reply"|"tool"|"error"|"cancelled"|"compaction"
---@alias trellisd.CallStatus "proposed"|"running"|"done"|"refused"|"failed"|"cancelled"
---@alias trellisd.Decision "allow"|"allowAlways"|"allowAlwaysProject"|"allowRule"|"allowRuleProject"|"deny"|"timeout"
---@alias trellisd.ApprovalMode "all"|"auto"|"acceptEdits"|"ask"|"plan"|"never"
---@alias trellisd.PlanStatus "pending"|"in_progress"|"completed"

---@class trellisd.PlanEntry an entry of a plan
---@field content string what the step of the plan does, in a line
---@field status trellisd.PlanStatus
---@field priority? "high"|"medium"|"low" left out when the model gave none

---@class trellisd.Plan a turn's plan as its last update_plan call left it (Turn.plan)
---@field step integer the step whose update_plan call made it
---@field entries trellisd.PlanEntry[]

---@class trellisd.PlanUpdate session/plan: TurnRef + the step and the whole plan
---@field sessionId trellisd.Id
---@field turnId trellisd.Id
---@field runId trellisd.Id
---@field step integer
---@field entries trellisd.PlanEntry[]

---@class trellisd.Tokens
---@field input integer|nil nil: the provider reported no figure
---@field output integer|nil
---@field total integer|nil
---@field cached integer|nil
---@field reasoning? integer|nil of output, the tokens spent reasoning; left out when none were told

---@alias trellisd.ImageType "image/png"|"image/jpeg"|"image/gif"|"image/webp"

---@class trellisd.ImageRef an image a turn's prompt carried (Turn.images); session/image gives it
---@field sha256 string
---@field mimeType trellisd.ImageType
---@field bytes integer

---@alias trellisd.ImageInput {path: string}|{data: string, mimeType: trellisd.ImageType} session/turn's images

---@alias trellisd.Effort "low"|"medium"|"high"

---@class trellisd.Process a program a turn's start_process call started (session/processes)
---@field processId trellisd.Id
---@field argv string[]
---@field cwd string absolute
---@field startedAt trellisd.Timestamp
---@field turnId trellisd.Id|nil the turn whose call started it
---@field running boolean
---@field exitCode integer|nil once ended: its exit code, or minus the signal that killed it

---@class trellisd.Thought session/thought: TurnRef + a piece of what the model reasons in a step
---@field sessionId trellisd.Id
---@field turnId trellisd.Id
---@field runId trellisd.Id
---@field step integer
---@field text string

---@class trellisd.ProcessOutput session/processOutput
---@field sessionId trellisd.Id
---@field processId trellisd.Id
---@field text string

---@class trellisd.ProcessExited: trellisd.Process session/processExited: the process as it ended
---@field sessionId trellisd.Id

---@class trellisd.ProcessPrinted session/process/output's result
---@field sessionId trellisd.Id
---@field processId trellisd.Id
---@field text string from `since` on
---@field next integer the offset after text
---@field dropped integer bytes from `since` on gone from the ring before text
---@field running boolean
---@field exitCode integer|nil

---@class trellisd.ForkedFrom
---@field sessionId trellisd.Id the origin
---@field turnId trellisd.Id|nil the origin's turn the fork follows; nil: before its first

---@class trellisd.Budget
---@field tokens? integer|nil
---@field usd? number|nil

---@class trellisd.Spent
---@field tokens integer
---@field usd number|nil

---@class trellisd.Session
---@field sessionId trellisd.Id
---@field root string the folder the session works in
---@field title string
---@field head trellisd.Id|nil the last turn of the current path
---@field createdAt trellisd.Timestamp
---@field updatedAt trellisd.Timestamp
---@field provider table
---@field forkedFrom? trellisd.ForkedFrom|nil
---@field parentSessionId? trellisd.Id|nil the session whose `task` call started this child session
---@field instructions? string|nil
---@field headHash? string|nil
---@field importedFrom? table
---@field pinned trellisd.Id[] the pinned turns
---@field budget? trellisd.Budget|nil
---@field spent? trellisd.Spent
---@field recovery? trellisd.Recovery a decision the session waits for
---@field files? trellisd.Restored what a branch or a recovery put back
---@field worktree? trellisd.Worktree the session's own git worktree, until it is discarded

---@class trellisd.Worktree session/open's worktree
---@field path string the worktree's folder (the daemon's own); the session's root is in it
---@field branch string trellisd/<name>
---@field base string the checkout's branch it started from, which a merge merges into
---@field baseCommit string
---@field checkout string the top folder of the user's checkout

---@class trellisd.Merged session/worktree/merge's answer
---@field sessionId trellisd.Id
---@field base string
---@field commit string the base branch's commit now
---@field paths string[] the files the merge changed
---@field checkoutUpdated boolean whether they were written into the checkout

---@class trellisd.SessionSummary: trellisd.Session
---@field turns integer
---@field match? table what a search matched

---@class trellisd.TurnRecovery
---@field required boolean
---@field tool string
---@field argv string[]

---@class trellisd.TurnCommand
---@field name string what follows `/`
---@field arguments string what followed the name ("" when nothing did)
---@field source "user"|"project"

---@class trellisd.Turn
---@field turnId trellisd.Id
---@field sessionId trellisd.Id
---@field parentTurnId trellisd.Id|nil
---@field runId trellisd.Id
---@field prompt string
---@field reply string
---@field outcome trellisd.Outcome
---@field error? string
---@field tokens trellisd.Tokens
---@field createdAt trellisd.Timestamp
---@field model string|nil
---@field cost number|nil
---@field recovery? trellisd.TurnRecovery a command of the turn killed mid-run
---@field plan? trellisd.Plan the turn's last plan; left out when it made none
---@field followsPlan? {turnId: trellisd.Id} session/plan/approve: the turn whose plan it carries out
---@field images? trellisd.ImageRef[] the images its prompt carried; left out when none
---@field command? trellisd.TurnCommand the custom command it ran (its prompt is the expansion); left out when none
---@field texts? (string|{thought: string})[] every step's thought and text that has any, in order (set by trellisd.paging)

---@class trellisd.TurnResult
---@field turnId trellisd.Id
---@field runId trellisd.Id
---@field outcome trellisd.Outcome
---@field reply string
---@field tokens trellisd.Tokens
---@field steps integer
---@field error? string
---@field model string|nil
---@field cost number|nil
---@field spent? trellisd.Spent
---@field recovery? trellisd.TurnRecovery

---@class trellisd.ToolCall
---@field id string
---@field name string
---@field arguments table

---@class trellisd.Step
---@field step integer
---@field decision trellisd.StepKind
---@field prompt string|nil
---@field text string
---@field toolCall trellisd.ToolCall|nil
---@field result string|nil
---@field thought? string what the model reasoned in the step; left out when it did not
---@field tokens trellisd.Tokens

---@class trellisd.Event
---@field seq integer
---@field kind string
---@field step integer|nil
---@field detail table
---@field createdAt trellisd.Timestamp

---@alias trellisd.HookEvent "sessionStart"|"sessionEnd"|"userPromptSubmit"|"preToolUse"|"permissionRequest"|"postToolUse"|"preCompact"|"postCompact"|"stop"|"turnEnd"

---@class trellisd.CommandSettings the settings a custom command's turn runs with (a project's once narrowed)
---@field verify? string[]
---@field maxSteps? integer
---@field budget? number USD
---@field model? string
---@field approval? trellisd.ApprovalMode
---@field effort? trellisd.Effort

---@class trellisd.Narrowed a setting of a project's command not let through as asked
---@field setting "approval"|"maxSteps"|"budget"|"model"|"verify"
---@field asked any
---@field applied any what applies instead; nil (vim.NIL): the session's own
---@field reason string

---@class trellisd.CustomCommand an entry of session/commands
---@field name string what follows / (session/turn's command)
---@field source "user"|"project"
---@field description? string
---@field argumentHint? string what to type after the name
---@field settings trellisd.CommandSettings
---@field narrowed? trellisd.Narrowed[] a project's command
---@field shadowsProject? true a user's command used over the project's of the same name

---@class trellisd.Hook an entry of session/hooks
---@field event trellisd.HookEvent
---@field command string[] the program and its arguments
---@field commandLine string the command line as approved (session/revoke's target)
---@field matcher? string tool events: a tool name or an fnmatch glob of them
---@field timeout number seconds
---@field source "config"|"project"
---@field approved boolean
---@field state "approved"|"awaiting approval"|"declined"

---@class trellisd.FileChange
---@field path string
---@field status "added"|"modified"|"deleted"
---@field diff string "" for a binary or too large file
---@field binary? boolean
---@field tooLarge? boolean
---@field shared? boolean another session's command ran meanwhile and may have made it too
---@field sharedWith? trellisd.SharedWith[]

---@class trellisd.SharedWith a turn of another session that may have made a change
---@field sessionId trellisd.Id
---@field turnId trellisd.Id

---@class trellisd.ChangeSet turn/changes' answer
---@field files trellisd.FileChange[]

---@class trellisd.Restored
---@field restored string[] the paths put back
---@field skipped string[]

---@class trellisd.Recovery a decision about a command killed mid-run
---@field turnId trellisd.Id the cancelled turn
---@field runId trellisd.Id
---@field tool string the tool whose command was killed
---@field argv string[] the command

---@class trellisd.Queued session/queued, and an entry of session/queue
---@field sessionId trellisd.Id
---@field queueId trellisd.Id
---@field position integer 1: runs next
---@field prompt string
---@field queuedAt trellisd.Timestamp

---@class trellisd.LiveCall a tool call of a step not committed yet
---@field step integer
---@field callId string
---@field tool string
---@field arguments table
---@field status trellisd.CallStatus
---@field output string what it printed so far

---@class trellisd.Running session/reopen's running: a turn running in the daemon
---@field sessionId trellisd.Id
---@field turnId trellisd.Id
---@field runId trellisd.Id
---@field prompt string
---@field step integer|nil the step being streamed; nil between steps
---@field text string that step's text so far
---@field thought? string what the model reasoned so far in that step
---@field calls? trellisd.LiveCall[]

---@class trellisd.Reopened: trellisd.Session session/reopen's answer
---@field history trellisd.Turn[] the newest page of the current path, oldest first
---@field historyCursor? string the cursor for the page before
---@field running? trellisd.Running
---@field integrity "unchecked"|"ok"|"broken"

---@class trellisd.Usage session/usage
---@field sessionId trellisd.Id
---@field turnId trellisd.Id
---@field contextTokens integer
---@field contextWindow integer
---@field tokens table
---@field cost table

---@class trellisd.Grant a remembered approval (session/policy's grants)
---@field kind "read"|"write"|"exec"|"rule"
---@field target string for a rule, the pattern as a JSON array (session/revoke takes it)
---@field scope? "session"|"project"|"policy"
---@field rule? string[] kind rule: the argv prefix pattern (a last word ** is any arguments)

---@class trellisd.ApprovalRequest session/requestApproval's params
---@field sessionId trellisd.Id
---@field turnId trellisd.Id
---@field runId trellisd.Id
---@field tool string
---@field arguments table
---@field summary? string
---@field diff? string a unified diff of what a write would change
---@field mcp? {server: string, tool?: string, start?: string}
---@field kind? "tool"|"escalate" escalate: a command asks to run outside the walls
---@field command? string an escalation's command line
---@field reason? string why the model says the escalation is needed
---@field proposedRule? string[] run_command: the rule allowRule or allowRuleProject would save
---@field hook? {event: trellisd.HookEvent, source: "project", command: string} tool run_hook: a project's hook asks to run

---@class trellisd.Walls the walls of a session's programs (session/policy's walls)
---@field mode "workspace-write"|"read-only"|"off"
---@field network boolean|string[] false: the session's own loopback only; a list: those host:port
---@field writable string[]
---@field hidden string[] what programs may not even read
---@field protected string[] root-relative paths read-only under workspace-write
---@field tempBytes integer the private /tmp's size
---@field processes integer how many processes a program may run at once

---@class trellisd.ContextEntry what the editor attaches to a prompt (session/turn's context)
---@field kind "file"|"selection"
---@field path string
---@field range? {startLine: integer, endLine: integer}
---@field text? string

---@class trellisd.Error an error answer
---@field code integer
---@field message string
---@field data? table|nil

-- The plugin's own shapes.

---@class trellisd.Run a turn drawn in a conversation buffer while it runs
---@field prompt string
---@field tokens integer tokens streamed
---@field step integer|nil the step being streamed
---@field steers integer steers sent, not yet said delivered
---@field approval boolean an approval is asked
---@field call? string the tool running
---@field calls? table<string, trellisd.CallStatus> the calls drawn, by callId
---@field output_at_start? boolean
---@field followed? boolean started by another window (or before a reattach)
---@field turnId? trellisd.Id
---@field runId? trellisd.Id
---@field model? string|nil
---@field request? integer the session/turn request's id
---@field retry? fun() sends the prompt again (after a takeover)
---@field command? string the custom command it runs (session/turn's command)
---@field started? boolean a queued prompt whose turn started
---@field queueId? trellisd.Id
---@field tasks? trellisd.TaskCall[] the turn's `task` calls, in order (trellisd.children)
---@field plan? trellisd.Plan the turn's plan so far (session/plan)
---@field name? string the turn, as its plan's heading names it (trellisd.plan)
---@field images? trellisd.Attached[] the image files its prompt took (trellisd.images)
---@field thought? {step: integer, text: string} the thought streamed so far (trellisd.thoughts)

---@class trellisd.State a session open in this editor
---@field id trellisd.Id
---@field root string
---@field title string
---@field head trellisd.Id|nil
---@field session trellisd.Session the daemon's last word on it
---@field view trellisd.View the conversation buffer
---@field running trellisd.Run|nil
---@field waiting (string|{prompt: string, context: trellisd.ContextEntry[]})[] prompts given while a turn ran
---@field cursor string|nil session/history's cursor for the turns before those shown
---@field lineage? string where a fork came from, as the header says it
---@field usage? trellisd.Usage
---@field step_mode? boolean
---@field budget? trellisd.Budget
---@field spent? trellisd.Spent
---@field walls? string the walls its programs run in, as the header says it (trellisd.walls)
---@field mode? trellisd.ApprovalMode the session's approval mode (session/policy, session/mode)
---@field before_plan? trellisd.ApprovalMode the mode plan mode was switched on from here
---@field plan? trellisd.LivePlan the newest plan, in the header's live spot (trellisd.plan)
---@field effort? trellisd.Effort|false set by :TrellisEffort (false: the model's default)

return {}
