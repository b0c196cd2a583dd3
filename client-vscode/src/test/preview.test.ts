import assert from "node:assert/strict";
import { test } from "node:test";
import { isStale, previewed, proposal, proposedText } from "../preview";

const edit = { range: { start: { line: 15, character: 66 }, end: { line: 18, character: 0 } }, newText: "\n  x;\n" };
const result = {
  summary: "saxpy: 1.30× faster",
  edit: { documentChanges: [{ textDocument: { uri: "file:///w/saxpy.cu", version: 3 }, edits: [edit] }] },
  applied: false,
};

test("an optimize result proposes its edit for the version it was made from", () => {
  assert.deepEqual(proposal(result), { uri: "file:///w/saxpy.cu", version: 3, edits: [edit] });
  assert.equal(proposal({ ...result, edit: null }), null);
  assert.equal(proposal({ ...result, edit: { documentChanges: [] } }), null);
});

test("a document that changed since is refused", () => {
  const proposed = proposal(result);
  if (proposed === null) {
    throw new Error("no proposal");
  }
  assert.equal(isStale(proposed, 3), false);
  assert.equal(isStale(proposed, 4), true);
  assert.equal(isStale({ ...proposed, version: null }, 4), false);
});

test("optimize and repair are asked for unapplied (ask false) and previewed; other commands are not", () => {
  assert.deepEqual(previewed("dice.optimizeKernel", ["file:///w/saxpy.cu", "saxpy", 3]), {
    arguments: ["file:///w/saxpy.cu", "saxpy", 3, false],
    title: "DICE: optimize saxpy (proposed)",
    stale: "the document changed while the kernel was being optimized; run Optimize again",
  });
  assert.deepEqual(previewed("dice.repair", ["file:///w/my%20kernels/broken%20one.cu", 7]), {
    arguments: ["file:///w/my%20kernels/broken%20one.cu", 7, false],
    title: "DICE: repair broken one.cu (proposed)",
    stale: "the document changed while it was being repaired; run Repair again",
  });
  assert.equal(previewed("dice.fillHole", ["file:///w/saxpy.cu", { line: 1, character: 2 }]), null);
});

test("the diff's right side is the document with the edits made, last first", () => {
  const text = "a\nbb\nccc\n";
  assert.equal(proposedText(text, []), text);
  assert.equal(proposedText(text, [
    { range: { start: { line: 0, character: 0 }, end: { line: 0, character: 1 } }, newText: "A" },
    { range: { start: { line: 2, character: 1 }, end: { line: 3, character: 0 } }, newText: "C\n" },
  ]), "A\nbb\ncC\n");
  // the whole document replaced, as optimize's edit does
  assert.equal(proposedText(text, [
    { range: { start: { line: 0, character: 0 }, end: { line: 3, character: 0 } }, newText: "x\n" }]), "x\n");
});
