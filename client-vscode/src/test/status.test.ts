import assert from "node:assert/strict";
import { test } from "node:test";
import { statusView } from "../status";

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
  const down = statusView({ state: "error", model: "tcp://gpu-host:7077",
    message: "cannot reach the dice server at tcp://gpu-host:7077: Connection refused" }, null);
  assert.equal(down.text, "$(debug-disconnect) DICE");
  assert.match(down.tooltip, /cannot reach the dice server/);
  assert.equal(down.error, true);
});
