// The optimize result as an edit the user previews: a diff of the document and the proposed text, then Apply or
// Discard. (VS Code's refactor preview starts every change needing confirmation unchecked, so its Apply applied
// nothing unless the user first ticked each box.)

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspTextEdit {
  range: { start: LspPosition; end: LspPosition };
  newText: string;
}

export interface OptimizeResult {
  summary: string;
  edit: { documentChanges?: { textDocument: { uri: string; version: number | null }; edits: LspTextEdit[] }[] } | null;
  applied: boolean;
}

export interface Proposal {
  uri: string;
  version: number | null;
  edits: LspTextEdit[];
}

/** The single-document change an optimize result proposes, or null when it proposes none. */
export function proposal(result: OptimizeResult): Proposal | null {
  const change = result.edit?.documentChanges?.[0];
  if (!change || change.edits.length === 0) {
    return null;
  }
  return { uri: change.textDocument.uri, version: change.textDocument.version, edits: change.edits };
}

/** Why a proposal cannot be applied to the document as it is now, or null when it can. */
export function staleReason(proposed: Proposal, currentVersion: number): string | null {
  if (proposed.version !== null && proposed.version !== currentVersion) {
    return "the document changed while the kernel was being optimized; run Optimize again";
  }
  return null;
}

/** The text `edits` (LSP ranges of `text`, not overlapping) make of `text`: what the diff shows on its right. */
export function proposedText(text: string, edits: LspTextEdit[]): string {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "\n") {
      starts.push(i + 1);
    }
  }
  const offset = (p: LspPosition): number =>
    Math.min(text.length, (starts[Math.min(p.line, starts.length - 1)] ?? text.length) + p.character);
  const ordered = [...edits].sort((a, b) => offset(b.range.start) - offset(a.range.start));
  let out = text;
  for (const edit of ordered) {
    out = out.slice(0, offset(edit.range.start)) + edit.newText + out.slice(offset(edit.range.end));
  }
  return out;
}
