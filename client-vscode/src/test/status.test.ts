import assert from "node:assert/strict";
import { test } from "node:test";
import { completionLine, statusView } from "../status";

test("ready shows the model, its device, and the file's nvcc errors", () => {
  const view = statusView({ state: "ready", model: "dice-tiny", device: "cuda:0", dtype: "torch.bfloat16" }, 2);
  assert.equal(view.text, "$(sparkle) DICE dice-tiny $(error) 2");
  assert.match(view.tooltip, /ready on cuda:0 \(torch.bfloat16\); nvcc: 2 errors/);
  assert.equal(view.error, false);
  assert.equal(statusView({ state: "ready", model: "m" }, 0).text, "$(sparkle) DICE m $(check)");
  assert.equal(statusView({ state: "ready", model: "m" }, null).text, "$(sparkle) DICE m");
});

test("loading, a failed load and no server are told apart", () => {
  assert.match(statusView({ state: "loading", model: "/models/dice-8b" }, null).text, /sync~spin.*dice-8b/);
  const failed = statusView({ state: "error", message: "no tokenizer.json" }, null);
  assert.equal(failed.error, true);
  assert.match(failed.tooltip, /no tokenizer.json/);
  assert.equal(statusView(null, 3).tooltip, "dice-lsp: not connected");
});

test("a team server says where it is, and an unreachable one says so", () => {
  const remote = statusView({ state: "ready", model: "dice-8b", device: "cuda:0", dtype: "torch.bfloat16",
    server: "tcp://gpu-host:7077" }, null);
  assert.match(remote.tooltip, /dice-8b ready on cuda:0 .* at tcp:\/\/gpu-host:7077/);
  const down = statusView({ state: "error", model: "tcp://gpu-host:7077", code: "unreachable",
    message: "cannot reach the dice server at tcp://gpu-host:7077: Connection refused" }, null);
  assert.equal(down.text, "$(debug-disconnect) DICE");
  const refused = statusView({ state: "error", model: "tcp://gpu-host:7077", code: "unauthorized",
    message: "the dice server at tcp://gpu-host:7077 cannot reach a verdict: wrong token" }, null);
  assert.equal(refused.text, "$(error) DICE"); // the code decides, not the message's words
  assert.match(down.tooltip, /cannot reach the dice server/);
  assert.equal(down.error, true);
});

test("the tooltip says what became of the last completion in this file, and why nothing was shown", () => {
  const uri = "file:///work/k.cu";
  const withheld = { uri, line: 8, shown: false, confidence: null,
    reason: "the best candidate is likely not what you would write (P(right) 0.14 < 0.28, dice.minConfidence)" };
  const line = completionLine(withheld, uri);
  assert.equal(line, "\nline 9: nothing shown: the best candidate is likely not what you would write " +
    "(P(right) 0.14 < 0.28, dice.minConfidence)");
  assert.equal(completionLine(withheld, "file:///work/other.cu"), "");
  assert.equal(completionLine({ uri, line: 3, shown: true, confidence: 0.734, reason: null }, uri),
    "\nline 4: completion shown (P(right) 0.73)");
  const view = statusView({ state: "ready", model: "dice-tiny", device: "cpu", dtype: "torch.float32" }, 0, line);
  assert.equal(view.tooltip, "dice-lsp: dice-tiny ready on cpu (torch.float32)" + line);
});
