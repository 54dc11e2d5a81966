local rpc = require("trellisd.rpc")

local function frame(s)
  return rpc.frame(s)
end

test("frames a body with its length in bytes, not characters", function()
  eq('Content-Length: 13\r\n\r\n{"a":"héé"}', frame('{"a":"héé"}'))
end)

test("one whole message comes out whole", function()
  local p = rpc.parser()
  eq({ '{"id":1}' }, p:feed(frame('{"id":1}')))
  eq({}, p:feed(""))
end)

test("a message split at every byte comes out once, at its last byte", function()
  local p = rpc.parser()
  local data = frame('{"text":"naïve — ünïcode"}')
  local got = {}
  for i = 1, #data do
    for _, body in ipairs(p:feed(data:sub(i, i))) do
      got[#got + 1] = { at = i, body = body }
    end
  end
  eq({ { at = #data, body = '{"text":"naïve — ünïcode"}' } }, got)
end)

test("several messages in one chunk, and one spanning two chunks", function()
  local p = rpc.parser()
  local data = frame("[1]") .. frame("[2]") .. frame("[3]")
  local last = frame("[4444]")
  eq({ "[1]", "[2]", "[3]" }, p:feed(data .. last:sub(1, 10)))
  eq({ "[4444]" }, p:feed(last:sub(11)))
end)

test("messages in one chunk all come out, in order", function()
  local p = rpc.parser()
  local data = frame("[1]") .. frame("[2]") .. frame("[3]") .. frame("[4444]")
  eq({ "[1]", "[2]" }, p:feed(data:sub(1, #frame("[1]") + #frame("[2]") + 3)))
  eq({ "[3]", "[4444]" }, p:feed(data:sub(#frame("[1]") + #frame("[2]") + 4)))
end)

test("other headers and the header's case do not matter", function()
  local p = rpc.parser()
  local data =
    "content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}"
  eq({ "{}" }, p:feed(data))
end)

test("a large body arriving in many chunks is joined once", function()
  local p = rpc.parser()
  local body = '"' .. string.rep("x", 300000) .. '"'
  local data = frame(body)
  local got = {}
  for i = 1, #data, 4096 do
    vim.list_extend(got, p:feed(data:sub(i, i + 4095)))
  end
  eq(1, #got)
  eq(#body, #got[1])
end)

test("a header without Content-Length is an error", function()
  local p = rpc.parser()
  local ok, err = pcall(p.feed, p, "Content-Type: x\r\n\r\n{}")
  eq(false, ok)
  truthy(tostring(err):find("Content%-Length"), "the error names the header")
end)
