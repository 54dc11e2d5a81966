local format = require("trellisd.format")

test("a footer says outcome, tokens and cost", function()
  eq(
    "*finished · 52 tokens (in 40, out 12) · $0.0012*",
    format.footer({
      outcome = "finished",
      tokens = { input = 40, output = 12, total = 52, cached = vim.NIL },
      cost = 0.0012,
    })
  )
  eq(
    "*finished · 1000 tokens (in 900, out 100, cached 800) · gpt-4o · $1.50*",
    format.footer({
      outcome = "finished",
      steps = 3,
      model = "gpt-4o",
      tokens = { input = 900, output = 100, total = 1000, cached = 800 },
      cost = 1.5,
    })
  )
end)

test("a footer with an error, unknown tokens and no cost", function()
  eq(
    "*error: 401 Unauthorized: the key was refused · tokens not reported*",
    format
      .footer({
        outcome = "error",
        error = "401 Unauthorized: the key was refused\ntraceback...",
        tokens = { input = vim.NIL, output = vim.NIL, total = vim.NIL, cached = vim.NIL },
        model = vim.NIL,
        cost = vim.NIL,
      })
      :gsub("…", "")
  )
end)

test("times: ISO 8601 with offsets, and how long ago", function()
  local t = format.parse_time("2026-12-02T18:10:00.207+00:00")
  eq(
    os.time({ year = 2026, month = 12, day = 2, hour = 18, min = 10, sec = 0, isdst = false })
      - (os.time() - os.time(os.date("!*t"))),
    t
  )
  eq(t, format.parse_time("2026-12-02T20:10:00+02:00"))
  eq(t, format.parse_time("2026-12-02T18:10:00Z"))
  eq(0, format.parse_time("1970-01-01T00:00:00Z"))
  eq("just now", format.ago("2026-12-02T18:10:00Z", t + 30))
  eq("5 min ago", format.ago("2026-12-02T18:10:00Z", t + 300))
  eq("2 h ago", format.ago("2026-12-02T18:10:00Z", t + 7300))
  eq("1 day ago", format.ago("2026-12-02T18:10:00Z", t + 90000))
  eq("2026-12-02", format.ago("2026-12-02T18:10:00Z", t + 30 * 86400))
  eq("?", format.ago(vim.NIL))
end)

test("a session in the list: title, folder, turns, last used", function()
  local now = format.parse_time("2026-12-02T18:15:00Z")
  eq(
    "fix the parser · ~/src/app · 3 turns · 5 min ago",
    format.session_item({
      title = "fix the parser",
      root = "/home/me/src/app",
      turns = 3,
      updatedAt = "2026-12-02T18:10:00.000+00:00",
    }, now, "/home/me")
  )
  eq(
    "(untitled) · /srv/x · 1 turn · just now",
    format.session_item(
      { title = "", root = "/srv/x", turns = 1, updatedAt = "2026-12-02T18:15:00Z" },
      now,
      "/home/me"
    )
  )
end)

test("a tool call and its result, on two lines", function()
  eq(
    { "> tool `write_file` `path: a/b.txt`", "> → wrote 2 bytes (2 lines)" },
    format.tool_lines(
      { name = "write_file", arguments = { path = "a/b.txt" } },
      "wrote 2 bytes\nmore"
    )
  )
  eq(
    { "> tool `list_dir` `no arguments`" },
    format.tool_lines({ name = "list_dir", arguments = {} }, vim.NIL)
  )
  eq("`` a`b ``", format.code("a`b"))
end)

test("arguments: the path first, long and multi-line values cut", function()
  eq(
    "path: notes.txt, content: first line… (3 lines), mode: 420",
    format.arguments({ content = "first line\nsecond\nthird", mode = 420, path = "notes.txt" })
  )
  eq(
    'command: pytest -q, env: {"CI":"1"}',
    format.arguments({ env = { CI = "1" }, command = "pytest -q" })
  )
  eq("path: " .. string.rep("x", 31) .. "…", format.arguments({ path = string.rep("x", 60) }))
end)

test("one_line cuts by characters, not bytes", function()
  eq("ééé…", format.one_line("ééééé", 4))
  eq("éééé", format.one_line("éééé", 4))
end)

test("a fork in the list names its origin; a search hit ends with what matched", function()
  local now = format.parse_time("2026-12-02T18:15:00Z")
  local fork = {
    sessionId = "s-2",
    title = "try again",
    root = "/srv/x",
    turns = 2,
    updatedAt = "2026-12-02T18:15:00Z",
    forkedFrom = { sessionId = "s-1", turnId = "t-1" },
    match = { turnId = "t-1", snippet = "the [parser]\n  reads" },
  }
  eq(
    "try again · /srv/x · 2 turns · just now · forked from “fix it” — the [parser] reads",
    format.session_item(fork, now, "/home/me", { ["s-1"] = "fix it" })
  )
  fork.match = vim.NIL
  eq("try again · /srv/x · 2 turns · just now · a fork", format.session_item(fork, now, "/home/me"))
end)

test("a session's lineage, in words", function()
  local fork = { forkedFrom = { sessionId = "s-1", turnId = "t-3" } }
  eq("forked from “fix it” at turn 3", format.lineage(fork, { title = "fix it", turn = 3 }))
  eq("forked from a session that was deleted", format.lineage(fork, nil))
  eq(
    "forked from “an untitled session” before its first turn",
    format.lineage({ forkedFrom = { sessionId = "s-1", turnId = vim.NIL } }, { title = "", turn = 0 })
  )
  eq("imported as a copy", format.lineage({ forkedFrom = vim.NIL, importedFrom = "s-9" }))
  eq(nil, format.lineage({ title = "plain" }))
  -- imported as it was (same id): where it came from is not a copy's lineage
  eq(nil, format.lineage({ sessionId = "s-9", importedFrom = { sessionId = "s-9", headHash = "h" } }))
  eq("imported as a copy", format.lineage({ sessionId = "s-2", importedFrom = { sessionId = "s-9" } }))
  eq(
    "forked from “fix it” at turn 3 · imported as a copy",
    format.lineage({ forkedFrom = fork.forkedFrom, importedFrom = "s-9" }, { title = "fix it", turn = 3 })
  )
end)

test("an export is offered under the session's title", function()
  eq("fix-the-parser.trellisd", format.export_name({ sessionId = "s-1", title = "Fix the parser!" }))
  eq("s-1.trellisd", format.export_name({ sessionId = "s-1", title = "" }))
end)

test("a worktree session is marked with its branch and base, in the list too", function()
  local wt = { path = "/d/wt/fix-login", branch = "trellisd/fix-login", base = "main" }
  eq("⎇ trellisd/fix-login → main", format.worktree({ worktree = wt }))
  eq(nil, format.worktree({ worktree = vim.NIL }))
  eq(nil, format.worktree({}))
  local item = format.session_item(
    { sessionId = "s-1", title = "fix it", root = "/src/app", turns = 2, worktree = wt },
    0,
    "/home/me"
  )
  eq("⎇ trellisd/fix-login → main", item:match("⎇ [^·]*$"))
end)

test("a shared change names the other session by title, else by its id's start", function()
  local id = "s-0123456789"
  local with = { { sessionId = id, turnId = "t-1" }, { sessionId = id, turnId = "t-2" } }
  eq("shared with session “write b.txt”", format.shared_with(with, { [id] = "write b.txt" }))
  eq("shared with session s-012345", format.shared_with(with, {}))
  eq("shared with another session", format.shared_with(vim.NIL))
end)

test("a refused restore says which paths are shared and which a person changed", function()
  local data = {
    paths = { "a.txt", "b.txt" },
    shared = { { path = "b.txt", sharedWith = { { sessionId = "s-2", turnId = "t-9" } } } },
  }
  eq(
    "another session's command ran at the same time and may have made these changes:"
      .. " b.txt (shared with session “other”); changed since the agent wrote them: a.txt",
    format.restore_conflict(data, { ["s-2"] = "other" })
  )
  eq("changed since the agent wrote them: a.txt", format.restore_conflict({ paths = { "a.txt" } }))
end)

test("a child session is listed right under its parent, marked and naming it", function()
  local now = format.parse_time("2026-12-02T18:15:00Z")
  local function summary(id, title, parent)
    return {
      sessionId = id,
      title = title,
      root = "/srv/x",
      turns = 1,
      updatedAt = "2026-12-02T18:15:00Z",
      parentSessionId = parent or vim.NIL,
    }
  end
  -- newest first: the children ran after their parent's turn began, an orphan's parent is gone
  local list = {
    summary("s-4", "count b", "s-1"),
    summary("s-3", "count a", "s-1"),
    summary("s-2", "other"),
    summary("s-1", "count files"),
    summary("s-9", "lost", "s-0"),
  }
  local ids = vim.tbl_map(function(s)
    return s.sessionId
  end, format.nest(list))
  eq({ "s-2", "s-1", "s-4", "s-3", "s-9" }, ids)
  eq(
    "↳ count a · /srv/x · 1 turn · just now · child of “count files”",
    format.session_item(list[2], now, "/home/me", { ["s-1"] = "count files" })
  )
  eq("↳ lost · /srv/x · 1 turn · just now · a child session", format.session_item(list[5], now))
  eq(
    "a child session, started by a task call of another session",
    format.lineage({ parentSessionId = "s-1" })
  )
end)
