local View = require("trellisd.view")
local uv = vim.uv or vim.loop

local n = 0
local function new_view(flush_ms)
  n = n + 1
  return View.new("trellis://test-" .. n, flush_ms or 40)
end

local function lines(view)
  return vim.api.nvim_buf_get_lines(view.buf, 0, -1, false)
end

test("the buffer is a read-only scratch buffer named after the session", function()
  local v = View.new("trellis://s-abc", 40)
  eq("trellis://s-abc", vim.api.nvim_buf_get_name(v.buf))
  eq("nofile", vim.bo[v.buf].buftype)
  eq("markdown", vim.bo[v.buf].filetype)
  eq(false, vim.bo[v.buf].modifiable)
  eq(v.buf, View.new("trellis://s-abc", 40).buf, "the same name reuses the buffer")
end)

test("a fast stream is painted in a few batches, not piece by piece", function()
  local v = new_view(40)
  v:render({ "# t" })
  local pieces, sent = 600, 0
  local expected = {}
  for i = 1, pieces do
    expected[i] = "w" .. i .. (i % 100 == 0 and "\n" or " ")
  end
  -- 600 pieces at about one a millisecond, as a fast model streams them
  local began = uv.hrtime()
  local timer = uv.new_timer()
  timer:start(
    1,
    1,
    vim.schedule_wrap(function()
      for _ = 1, 2 do
        if sent < pieces then
          sent = sent + 1
          v:stream(expected[sent])
        end
      end
      if sent >= pieces and not timer:is_closing() then
        timer:stop()
        timer:close()
      end
    end)
  )
  wait_for(function()
    return sent == pieces and #v.pending == 0 and not v.scheduled
  end, nil, "the stream to be painted")
  local elapsed_ms = (uv.hrtime() - began) / 1e6
  local text = table.concat(lines(v), "\n", 3)
  eq(table.concat(expected), text)
  -- one write per 40 ms at most, whatever the machine's speed
  local most = math.floor(elapsed_ms / 40) + 3
  truthy(
    v.writes <= most and v.writes < pieces / 5,
    ("at most %d buffer writes in %d ms for %d pieces, got %d"):format(
      most,
      elapsed_ms,
      pieces,
      v.writes
    )
  )
  truthy(v.writes >= 2, "painted while streaming, not only at the end: " .. v.writes)
end)

test("text streams into the last line; a block ends it after a blank line", function()
  local v = new_view(10)
  v:render({ "# t" })
  v:block({ "### You", "hi", "", "### trellisd" })
  v:stream("Hello ")
  v:stream("wor")
  v:stream("ld.\nSecond line")
  v:flush()
  v:block({ "> tool read_file {}", "> → ok" })
  v:stream("After the tool.")
  v:block({ "*finished*" })
  eq({
    "# t",
    "",
    "### You",
    "hi",
    "",
    "### trellisd",
    "",
    "Hello world.",
    "Second line",
    "",
    "> tool read_file {}",
    "> → ok",
    "",
    "After the tool.",
    "",
    "*finished*",
  }, lines(v))
end)

test("a live turn and the same turn rendered from history look the same", function()
  local session = { sessionId = "s-1", root = "/w", title = "hi", head = "t-1" }
  local turn = {
    turnId = "t-1",
    prompt = "hi\nthere",
    reply = "Hello.\nBye.",
    outcome = "finished",
    tokens = { input = 3, output = 2, total = 5, cached = vim.NIL },
  }
  local live = new_view(10)
  live:render(View.header(session))
  live:block(View.prompt_lines(turn.prompt))
  live:stream("Hello.\n")
  live:stream("Bye.")
  live:block({ require("trellisd.format").footer(turn) })
  eq(View.history_lines(session, { turn }), lines(live))
end)

test("a window at the end of the conversation follows the stream", function()
  local v = new_view(10)
  v:render({ "# t", "", "x" })
  vim.api.nvim_set_current_buf(v.buf)
  vim.api.nvim_win_set_cursor(0, { 3, 0 })
  v:block({ "a", "b", "c" })
  eq(7, vim.api.nvim_win_get_cursor(0)[1])
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  v:block({ "d" })
  eq(1, vim.api.nvim_win_get_cursor(0)[1], "a window looking elsewhere stays put")
end)

test("a wiped buffer is not written to", function()
  local v = new_view(10)
  v:stream("x")
  vim.cmd("bwipeout! " .. v.buf)
  v:flush()
  v:block({ "y" })
  eq(false, v:valid())
end)

test("the header is replaced in place: a lineage line added, the title changed", function()
  local session = { sessionId = "s-2", root = "/w", title = "hi" }
  local v = new_view(10)
  v:render(View.history_lines(session, {}))
  v.header_count = #View.header(session)
  v:block({ "### You", "hello" })
  v:set_header(View.header(session, "forked from “x” at turn 2"))
  eq({ "# hi", "/w · s-2", "forked from “x” at turn 2", "", "### You", "hello" }, lines(v))
  session.title = "renamed"
  v:set_header(View.header(session, "forked from “x” at turn 2"))
  eq("# renamed", lines(v)[1])
  eq(6, #lines(v))
end)
