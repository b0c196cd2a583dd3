-- Neovim's built-in LSP client asks dice-lsp for a completion and prints it (headless, Neovim >= 0.7).
-- Environment: DICE_LSP_CMD (JSON list: the server command), DICE_FILE, DICE_LINE, DICE_CHARACTER (0-based).
local cmd = vim.fn.json_decode(os.getenv("DICE_LSP_CMD"))
local file = os.getenv("DICE_FILE")
local line = tonumber(os.getenv("DICE_LINE"))
local character = tonumber(os.getenv("DICE_CHARACTER"))

local function finish(code, message)
  io.stdout:write(message .. "\n")
  io.stdout:flush()
  vim.cmd((code == 0) and "qall!" or "cquit! " .. code)
end

vim.cmd("edit " .. file)
local bufnr = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = "dice-lsp",
  cmd = cmd,
  root_dir = vim.fn.fnamemodify(file, ":h"),
  init_options = { dice = { device = "cpu", steps = 4, maxCanvas = 24 } },
})
if not client_id then
  finish(2, "ERROR could not start dice-lsp")
end
vim.lsp.buf_attach_client(bufnr, client_id)
local initialized = vim.wait(60000, function()
  local client = vim.lsp.get_client_by_id(client_id)
  return client ~= nil and client.server_capabilities ~= nil and client.server_capabilities.completionProvider ~= nil
end, 100)
if not initialized then
  finish(2, "ERROR dice-lsp did not finish initializing")
end

local params = {
  textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  position = { line = line, character = character },
}
-- The model loads in the background; the request waits for it on the server side.
local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/completion", params, 120000)
if not responses then
  finish(3, "ERROR no response")
end
for _, response in pairs(responses) do
  if response.err then
    finish(4, "ERROR " .. vim.inspect(response.err))
  end
  local items = response.result and (response.result.items or response.result) or {}
  if #items > 0 then
    local edit = items[1].textEdit
    finish(0, "COMPLETION " .. vim.fn.json_encode({ text = edit.newText, range = edit.range }))
  end
end
finish(5, "ERROR empty completion")
