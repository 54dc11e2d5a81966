local tree = require("trellisd.tree")

local function turn(id, parent, prompt, outcome)
  return {
    turnId = id,
    parentTurnId = parent or vim.NIL,
    prompt = prompt or id,
    outcome = outcome or "finished",
  }
end

test("a straight conversation reads straight down, head marked", function()
  local turns = { turn("t1"), turn("t2", "t1"), turn("t3", "t2") }
  eq({
    "◇ (start: an empty conversation)",
    "● t1",
    "● t2",
    "● t3  ← head",
  }, tree.lines(tree.build(turns, "t3")))
end)

test("a fork indents; the current path comes first; left branches are ○", function()
  local turns = {
    turn("t1", nil, "fix the parser"),
    turn("t2", "t1", "rewrite it instead"),
    turn("t3", "t2", "and test it"),
    turn("t4", "t1", "add a test", "cancelled"),
  }
  local entries = tree.build(turns, "t4")
  eq({
    "◇ (start: an empty conversation)",
    "● fix the parser",
    "├─ ● add a test [cancelled]  ← head",
    "└─ ○ rewrite it instead",
    "   ○ and test it",
  }, tree.lines(entries))
  eq("t4", entries[3].turn.turnId)
  eq(true, entries[3].head)
  eq(false, entries[4].on_path)
  eq(nil, entries[1].turn, "the first entry is the start (branch to null)")
end)

test("forks under forks keep their rails", function()
  local turns = {
    turn("a"),
    turn("b", "a"),
    turn("c", "b"),
    turn("d", "b"),
    turn("e", "a"),
  }
  eq({
    "◇ (start: an empty conversation)",
    "● a",
    "├─ ● b",
    "│  ├─ ● c  ← head",
    "│  └─ ○ d",
    "└─ ○ e",
  }, tree.lines(tree.build(turns, "c")))
end)

test("before the first turn the start is the head; several first turns fork", function()
  local turns = { turn("a"), turn("b") }
  eq({
    "◇ (start: an empty conversation)  ← head",
    "├─ ○ a",
    "└─ ○ b",
  }, tree.lines(tree.build(turns, vim.NIL)))
end)

test("long prompts are cut to one line", function()
  local entries = tree.build({ turn("a", nil, "first line\nsecond line") }, "a")
  eq("● first line…  ← head", entries[2].line)
end)

test("a conversation thousands of turns deep renders without recursion", function()
  local turns = { turn("t1") }
  for i = 2, 5000 do
    turns[i] = turn("t" .. i, "t" .. (i - 1))
  end
  local entries = tree.build(turns, "t5000")
  eq(5001, #entries)
  eq("● t5000  ← head", entries[5001].line)
end)

test("a custom command's turn is named as it was typed, not by its expansion", function()
  local ran = turn("t1", nil, "Create done.txt, then check it.")
  ran.command = { name = "check", arguments = "done.txt", source = "user" }
  local bare = turn("t2", "t1", "Tidy the imports.")
  bare.command = { name = "tidy", arguments = "", source = "project" }
  local typed = turn("t3", "t2", "/check not a command's turn")
  typed.command = vim.NIL
  eq({
    "◇ (start: an empty conversation)",
    "● /check done.txt",
    "● /tidy",
    "● /check not a command's turn  ← head",
  }, tree.lines(tree.build({ ran, bare, typed }, "t3")))
end)
