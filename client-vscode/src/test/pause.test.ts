import assert from "node:assert/strict";
import { test } from "node:test";
import { Pause } from "../pause";

test("the switch turns completions off and on, and a snooze ends by itself", () => {
  let now = 1_000_000;
  const pause = new Pause(() => now);
  assert.equal(pause.active(), true);
  assert.equal(pause.describe(), "");
  assert.equal(pause.toggle(), false);
  assert.equal(pause.describe(), "inline completions off");
  now += 3_600_000;
  assert.equal(pause.active(), false, "off stays off");
  assert.equal(pause.toggle(), true);
  pause.snooze(15);
  assert.equal(pause.active(), false);
  now += 6 * 60_000;
  assert.equal(pause.describe(), "inline completions snoozed (9 min left)");
  now += 9 * 60_000;
  assert.equal(pause.active(), true, "the snooze ran out");
  pause.snooze(15);
  assert.equal(pause.toggle(), true, "toggling a snooze turns completions back on");
});
