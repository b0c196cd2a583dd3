import assert from "node:assert/strict";
import { test } from "node:test";
import { proposal, staleReason } from "../preview";

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
