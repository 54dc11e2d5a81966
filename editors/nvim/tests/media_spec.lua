-- The pure parts of images, thoughts, processes and reasoning tokens: what a person reads.

local format = require("trellisd.format")
local images = require("trellisd.images")
local processes = require("trellisd.processes")
local thoughts = require("trellisd.thoughts")

test("base64 round-trips bytes of every length, as the daemon reads them", function()
  eq("aGVsbG8hPw==", images.base64("hello!?"))
  eq("iVBO", images.base64("\137PN"))
  for _, s in ipairs({ "", "a", "ab", "abc", "\0\255\128\1", string.rep("\200xy", 100) }) do
    eq(s, images.decode(images.base64(s)))
  end
end)

test("an image is told by its type and size", function()
  eq("512 B", images.size(512))
  eq("12.0 KiB", images.size(12 * 1024))
  eq("2.5 MiB", images.size(2.5 * 1024 * 1024))
  local sha = string.rep("ab", 32)
  local line = images.ref_line({ sha256 = sha, mimeType = "image/webp", bytes = 2048 })
  eq("🖼 image/webp · 2.0 KiB · abababababab", line)
  eq(sha, images.at_line(line))
  eq(nil, images.at_line("### You"))
  eq(
    "📎 shot.png (image/png, 1.0 KiB)",
    images.attached_line({ path = "/x/shot.png", mimeType = "image/png", bytes = 1024 })
  )
end)

test("a thought is marked line by line, before its step's text", function()
  eq({ "┊ Look first.", "┊ Then act." }, thoughts.lines("Look first.\nThen act."))
  eq(
    { { thought = "Plan it." }, "Done.", "More." },
    thoughts.step_texts({
      { step = 1, thought = "Plan it.", text = "Done." },
      { step = 2, thought = vim.NIL, text = "" },
      { step = 3, text = "More." },
    })
  )
end)

test("reasoning tokens are told with the output they are part of", function()
  eq(
    "52 tokens (in 40, out 12, reasoning 7)",
    format.tokens({ input = 40, output = 12, total = 52, cached = 0, reasoning = 7 })
  )
  eq(
    "52 tokens (in 40, out 12)",
    format.tokens({ input = 40, output = 12, total = 52, cached = 0 })
  )
end)

test("a process's line says whether it runs, how it ended and its turn", function()
  local p = { processId = "p1", argv = { "npm", "run", "dev" }, running = true, exitCode = vim.NIL }
  p.turnId = "t-0123456789"
  eq("● running · npm run dev · turn t-012345", processes.line(p))
  p.running, p.exitCode = false, 0
  eq("○ exit 0 · npm run dev · turn t-012345", processes.line(p))
  p.exitCode, p.turnId = -9, vim.NIL
  eq("○ killed by signal 9 · npm run dev", processes.line(p))
end)
