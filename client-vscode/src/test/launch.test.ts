import assert from "node:assert/strict";
import { test } from "node:test";
import { describe, launchFrom, SettingError, socketAuth, startFailure } from "../launch";

const none = { serverCommand: [], pythonPath: null, connect: null, tokenFile: null, debounceMs: 150 };

test("a running server is connected to over TCP, IPv6 brackets dropped", () => {
  assert.deepEqual(launchFrom({ ...none, connect: "gpu-host:7070", serverCommand: ["x"] }),
    { kind: "tcp", host: "gpu-host", port: 7070 });
  assert.deepEqual(launchFrom({ ...none, connect: "[::1]:9000" }), { kind: "tcp", host: "::1", port: 9000 });
});

test("a bad address is a clear error, not a hang", () => {
  for (const bad of ["gpu-host", "host:0", "host:70000", ":7070"]) {
    assert.throws(() => launchFrom({ ...none, connect: bad }), /dice.client.connect must be HOST:PORT/);
  }
});

test("the command wins over the interpreter, which wins over dice-lsp on PATH", () => {
  assert.deepEqual(launchFrom({ ...none, serverCommand: ["/opt/dice/bin/dice-lsp", "lsp"], pythonPath: "/usr/bin/python3" }),
    { kind: "stdio", command: "/opt/dice/bin/dice-lsp", args: ["lsp"] });
  const python = launchFrom({ ...none, pythonPath: "/venv/bin/python" });
  assert.deepEqual(python, { kind: "stdio", command: "/venv/bin/python", args: ["-m", "dice_lsp.cli"] });
  assert.equal(describe(python), "/venv/bin/python -m dice_lsp.cli");
  assert.deepEqual(launchFrom(none), { kind: "stdio", command: "dice-lsp", args: [] });
});

test("a socket server's token goes in initialize, read from dice.client.tokenFile; never to a stdio server", () => {
  const tcp = launchFrom({ ...none, connect: "127.0.0.1:7070" });
  const files: Record<string, string> = { "/run/dice/lsp-token": "s3cret-token-1234\nignored\n", "/empty": "\n" };
  const read = (path: string): string => files[path];
  assert.deepEqual(socketAuth(tcp, "/run/dice/lsp-token", read), { authToken: "s3cret-token-1234" });
  assert.deepEqual(socketAuth(launchFrom(none), "/run/dice/lsp-token", read), {});
  assert.deepEqual(socketAuth(launchFrom(none), null, read), {});
  assert.throws(() => socketAuth(tcp, "/empty", read), /dice.client.tokenFile \/empty is empty/);
  assert.throws(() => socketAuth(tcp, "/gone", () => { throw new Error("ENOENT: no such file or directory"); }),
    (error: unknown) => error instanceof SettingError && error.setting === "dice.client.tokenFile" &&
      /cannot read dice.client.tokenFile \/gone: ENOENT/.test(error.message));
});

test("connecting without dice.client.tokenFile is one clear error naming the setting, before any read or connection", () => {
  const tcp = launchFrom({ ...none, connect: "127.0.0.1:7070" });
  const read = (): string => assert.fail("no token file to read");
  for (const tokenFile of [null, "", "  "]) {
    assert.throws(() => socketAuth(tcp, tokenFile, read), (error: unknown) => {
      assert.ok(error instanceof SettingError);
      assert.equal(error.setting, "dice.client.tokenFile");
      assert.match(error.message, /dice.client.connect is set \(127.0.0.1:7070\) but dice.client.tokenFile is not/);
      assert.match(error.message, /always requires a token/);
      assert.match(error.message, /names on stderr/);
      assert.match(error.message, /--token-file F/);
      return true;
    });
  }
});

test("a server that cannot start names the setting that fixes it, whatever the client threw", () => {
  const onPath = launchFrom(none);
  const spawn = Object.assign(new Error("spawn dice-lsp ENOENT"), { code: "ENOENT" });
  assert.deepEqual(startFailure(onPath, spawn), {
    message: "cannot start dice-lsp: dice-lsp is not on PATH: set dice.client.pythonPath to a Python that has " +
      "dice-lsp installed (pip install dice-lsp), or put dice-lsp on PATH",
    setting: "dice.client.pythonPath" });
  const python = launchFrom({ ...none, pythonPath: "/no/python" });
  assert.equal(startFailure(python, { code: "ENOENT" }).setting, "dice.client.pythonPath");
  const command = launchFrom({ ...none, serverCommand: ["/opt/dice-lsp"] });
  assert.equal(startFailure(command, spawn).setting, "dice.client.serverCommand");
  // not an Error (the client threw undefined, a string): never "undefined"
  assert.deepEqual(startFailure(onPath, undefined), {
    message: "cannot start dice-lsp: the language client gave no reason", setting: null });
  assert.deepEqual(startFailure(onPath, "Connection to server got closed."), {
    message: "cannot start dice-lsp: Connection to server got closed.", setting: null });
});
