import assert from "node:assert/strict";
import { test } from "node:test";
import { initializationOptions, trustConfiguration, withTrust } from "../trust";

test("the dice section says what Workspace Trust says, whatever the settings files hold", () => {
  const fromSettingsFile = { steps: 8, trusted: true, defines: ["TILE=32"] };
  assert.deepEqual(withTrust([{ section: "dice" }], [fromSettingsFile], false),
    [{ steps: 8, trusted: false, defines: ["TILE=32"] }]);
  assert.deepEqual(withTrust([{ section: "dice" }], [{ steps: 8 }], true), [{ steps: 8, trusted: true }]);
  assert.equal(fromSettingsFile.trusted, true, "VS Code's own configuration object is not changed");
});

test("a section with no settings, dice.trusted itself and the whole configuration are answered too", () => {
  assert.deepEqual(withTrust([{ section: "dice" }], [null], false), [{ trusted: false }]);
  assert.deepEqual(withTrust([{ section: "dice.trusted" }], [true], false), [false]);
  assert.deepEqual(withTrust([{}], [{ editor: { tabSize: 4 }, dice: { trusted: true, steps: 2 } }], false),
    [{ editor: { tabSize: 4 }, dice: { trusted: false, steps: 2 } }]);
});

test("other sections are left as they are", () => {
  const items = [{ section: "editor" }, { section: "dice" }, { section: "diceExtra" }];
  assert.deepEqual(withTrust(items, [{ tabSize: 4 }, {}, { trusted: true }], false),
    [{ tabSize: 4 }, { trusted: false }, { trusted: true }]);
});

test("initializationOptions carry the trust the server starts with", () => {
  assert.deepEqual(initializationOptions(false), { dice: { trusted: false } });
  assert.deepEqual(initializationOptions(true), { dice: { trusted: true } });
});

test("the configuration middleware overrides trusted from Workspace Trust, read at each request", async () => {
  let isTrusted = false;
  const middleware = trustConfiguration(() => isTrusted);
  const params = { items: [{ section: "dice" }] };
  const next = () => [{ steps: 8, trusted: true }]; // a workspace's settings.json claims trust
  const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose: () => undefined }) };
  assert.deepEqual(await middleware(params, token, next), [{ steps: 8, trusted: false }]);
  isTrusted = true; // the user granted trust
  assert.deepEqual(await middleware(params, token, next), [{ steps: 8, trusted: true }]);
});
