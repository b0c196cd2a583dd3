import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  configurationAnswers, Inspect, Inspected, initializationOptions, schemaOf, Sources, trustConfiguration, userValue,
} from "../trust";

// out/unit/test/trust.test.js → client-vscode/package.json
const packageJSON: unknown = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "..", "package.json"), "utf8"));
const schema = schemaOf(packageJSON);
const RESTRICTED = [
  "dice.trusted", "dice.trustRemoteCode", "dice.model", "dice.nvcc", "dice.clang", "dice.includeDirs",
  "dice.defines", "dice.server.url", "dice.server.token", "dice.server.tokenFile", "dice.client.serverCommand",
  "dice.client.pythonPath", "dice.client.connect", "dice.client.tokenFile",
];

/** `inspect` over three configurations: defaults (package.json's), the user's, and a workspace's. */
function inspector(user: Record<string, unknown>, workspace: Record<string, unknown> = {}): Inspect {
  return (key: string): Inspected | undefined => schema.defaults.has(key) ? {
    defaultValue: schema.defaults.get(key),
    globalValue: user[key],
    workspaceValue: workspace[key],
    workspaceFolderValue: workspace[key],
  } : undefined;
}

/** What VS Code's getConfiguration("dice") holds: the defaults with `settings` (dotted keys) merged over them. */
function merged(...settings: Record<string, unknown>[]): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const [key, value] of [...schema.defaults, ...settings.flatMap((s) => Object.entries(s))]) {
    const parts = key.split(".").slice(1);
    let into = result;
    for (const part of parts.slice(0, -1)) {
      into = (into[part] ??= {}) as Record<string, unknown>;
    }
    into[parts[parts.length - 1]] = value;
  }
  return result;
}

function sources(trusted: boolean, user: Record<string, unknown> = {}, workspace: Record<string, unknown> = {}):
    Sources {
  return { trusted, schema, inspect: inspector(user, workspace) };
}

function dice(answer: unknown): Record<string, unknown> {
  assert.ok(typeof answer === "object" && answer !== null);
  return answer as Record<string, unknown>;
}

test("the schema is package.json's: every declared key, the restricted ones user-only", () => {
  const declared = Object.keys((packageJSON as { contributes: { configuration: { properties: object } } })
    .contributes.configuration.properties);
  assert.deepEqual([...schema.keys], declared, "every declared key is dice.NAME, dice.server.NAME or dice.client.NAME");
  assert.deepEqual([...schema.userOnly].sort(), [...RESTRICTED].sort());
  assert.equal(schema.defaults.get("dice.steps"), 8);
  assert.equal(schema.defaults.get("dice.model"), "");
});

test("a nested dice object in a settings file is dropped: it cannot claim trust or name a model", () => {
  // .vscode/settings.json: "dice.dice": {"trusted": true, "trustRemoteCode": true, "model": "DIR"}
  const nested = { dice: { trusted: true, trustRemoteCode: true, model: "/tmp/evil-model" } };
  const vscode = { ...merged({ "dice.steps": 4 }), ...nested };
  const [answer] = configurationAnswers([{ section: "dice" }], [vscode], sources(true));
  const got = dice(answer);
  assert.equal(got.dice, undefined);
  assert.equal(got.trusted, true);
  assert.equal(got.trustRemoteCode, false);
  assert.equal(got.model, "");
  assert.equal(got.steps, 4, "the workspace's other settings still apply");
  assert.deepEqual(vscode.dice, nested.dice, "VS Code's own configuration object is not changed");
  // and so in the whole configuration, and when the server asks for dice.dice itself
  const [whole] = configurationAnswers([{}], [{ editor: { tabSize: 4 }, dice: vscode }], sources(false));
  assert.deepEqual(dice(whole).editor, { tabSize: 4 });
  assert.equal(dice(dice(whole).dice).dice, undefined);
  assert.deepEqual(configurationAnswers([{ section: "dice.dice" }], [nested.dice], sources(true)), [null]);
});

test("a workspace's dice.model and dice.nvcc give way to the user's, in a trusted workspace too", () => {
  const workspace = { "dice.model": "/ws/model", "dice.nvcc": "/ws/bin/nvcc", "dice.defines": ["X=1"] };
  const user = { "dice.model": "/home/me/models/dice-8b" };
  const vscode = merged(user, workspace); // as VS Code would merge them if the scopes did not stop it
  for (const trusted of [false, true]) {
    const got = dice(configurationAnswers([{ section: "dice" }], [vscode], sources(trusted, user, workspace))[0]);
    assert.equal(got.model, "/home/me/models/dice-8b", "the user's value");
    assert.equal(got.nvcc, "", "no user value: the default, never the workspace's");
    assert.deepEqual(got.defines, []);
    assert.equal(got.trusted, trusted);
  }
  assert.deepEqual(configurationAnswers([{ section: "dice.model" }, { section: "dice.nvcc" }],
    ["/ws/model", "/ws/bin/nvcc"], sources(true, user, workspace)), ["/home/me/models/dice-8b", ""]);
});

test("the server and client groups: user-only keys from the user, the others as VS Code gives them", () => {
  const workspace = { "dice.server.url": "tcp://attacker:7077", "dice.client.connect": "attacker:1" };
  const user = { "dice.server.url": "tcp://gpu-host:7077", "dice.server.tokenFile": "/home/me/.dice-token" };
  const vscode = merged(user, workspace, { "dice.client.debounceMs": 80 });
  const got = dice(configurationAnswers([{ section: "dice" }], [vscode], sources(true, user, workspace))[0]);
  assert.deepEqual(got.server, { url: "tcp://gpu-host:7077", token: "", tokenFile: "/home/me/.dice-token" });
  assert.deepEqual(got.client, { serverCommand: [], pythonPath: "", connect: "", tokenFile: "", debounceMs: 80 });
  assert.deepEqual(configurationAnswers([{ section: "dice.server" }], [vscode.server], sources(true, user, workspace)),
    [{ url: "tcp://gpu-host:7077", token: "", tokenFile: "/home/me/.dice-token" }]);
  assert.equal(userValue(schema, inspector(user, workspace), "dice.client.connect"), "");
  assert.equal(userValue(schema, () => undefined, "dice.steps"), 8, "no inspect answer: the declared default");
});

test("keys the extension does not declare are dropped, and so are other nested objects", () => {
  const vscode = { ...merged(), stepz: 3, modelPath: "/ws/m", server: { url: "", token: "", tokenFile: "", extra: 1 },
    remote: { url: "tcp://x:1" }, trustedWorkspace: true };
  const got = dice(configurationAnswers([{ section: "dice" }], [vscode], sources(false))[0]);
  assert.deepEqual(Object.keys(got).sort(), [...new Set(schema.keys.map((key) => key.split(".")[1]))].sort());
  assert.deepEqual(got.server, { url: "", token: "", tokenFile: "" });
  assert.equal(configurationAnswers([{ section: "dice.stepz" }], [3], sources(false))[0], null);
});

test("trusted is what Workspace Trust says, whatever the settings files hold", () => {
  const vscode = merged({ "dice.trusted": true, "dice.steps": 2 });
  for (const trusted of [false, true]) {
    const user = { "dice.trusted": !trusted }; // not even the user's own settings decide it
    assert.equal(dice(configurationAnswers([{ section: "dice" }], [vscode], sources(trusted, user))[0]).trusted, trusted);
    assert.deepEqual(configurationAnswers([{ section: "dice.trusted" }], [true], sources(trusted, user)), [trusted]);
    const [whole] = configurationAnswers([{}], [{ dice: vscode }], sources(trusted, user));
    assert.equal(dice(dice(whole).dice).trusted, trusted);
  }
  // a section with no settings at all still says it, with the user-only keys
  const empty = dice(configurationAnswers([{ section: "dice" }], [null], sources(false))[0]);
  assert.equal(empty.trusted, false);
  assert.equal(empty.model, "");
  assert.equal(empty.steps, undefined, "no invented values for the others");
});

test("other sections are left as they are", () => {
  const items = [{ section: "editor" }, { section: "diceExtra" }];
  assert.deepEqual(configurationAnswers(items, [{ tabSize: 4 }, { trusted: true }], sources(false)),
    [{ tabSize: 4 }, { trusted: true }]);
});

test("initializationOptions carry the trust the server starts with", () => {
  assert.deepEqual(initializationOptions(false), { dice: { trusted: false } });
  assert.deepEqual(initializationOptions(true), { dice: { trusted: true } });
});

test("the configuration middleware: trusted read at each request, user-only keys from the user", async () => {
  let isTrusted = false;
  const user = { "dice.model": "/home/me/model" };
  const middleware = trustConfiguration(() => isTrusted, schema, inspector(user, { "dice.model": "/ws/model" }));
  const params = { items: [{ section: "dice" }] };
  const next = () => [{ ...merged({ "dice.trusted": true, "dice.model": "/ws/model" }), dice: { trusted: true } }];
  const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose: () => undefined }) };
  const first = dice((await middleware(params, token, next) as unknown[])[0]);
  assert.deepEqual([first.trusted, first.model, first.dice], [false, "/home/me/model", undefined]);
  isTrusted = true; // the user granted trust
  const second = dice((await middleware(params, token, next) as unknown[])[0]);
  assert.deepEqual([second.trusted, second.model, second.dice], [true, "/home/me/model", undefined]);
});
