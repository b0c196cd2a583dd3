// The optimize result as an edit the user previews (VS Code's refactor preview: a diff with Apply/Discard).

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
