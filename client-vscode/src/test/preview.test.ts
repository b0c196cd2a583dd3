import assert from "node:assert/strict";
import { test } from "node:test";
import { proposal, proposedText, staleReason } from "../preview";

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
  assert.equal(staleReason(proposed, 3), null);
  assert.match(staleReason(proposed, 4) ?? "", /changed while the kernel was being optimized/);
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
