import assert from "node:assert/strict";
import { test } from "node:test";
import { Cancellable, Debouncer } from "../debounce";

class Token implements Cancellable {
  isCancellationRequested = false;
  private listeners: (() => void)[] = [];
  onCancellationRequested(listener: () => void) {
    this.listeners.push(listener);
    return { dispose: () => { this.listeners = this.listeners.filter((l) => l !== listener); } };
  }
  cancel(): void {
    this.isCancellationRequested = true;
    this.listeners.forEach((l) => l());
  }
}

test("a request goes ahead after the pause", async () => {
  assert.equal(await new Debouncer(() => 5).wait(new Token()), true);
});

test("typing again supersedes the request that was waiting", async () => {
  const debouncer = new Debouncer(() => 20);
  const first = debouncer.wait(new Token());
  const second = debouncer.wait(new Token());
  assert.deepEqual(await Promise.all([first, second]), [false, true]);
});

test("a cancelled request never goes ahead", async () => {
  const debouncer = new Debouncer(() => 50);
  const token = new Token();
  const waiting = debouncer.wait(token);
  token.cancel();
  assert.equal(await waiting, false);
  assert.equal(await debouncer.wait(token), false, "already cancelled");
});
