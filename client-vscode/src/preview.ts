// A model rewrite (Optimize's verified kernel, Repair's fix of nvcc's errors) as an edit the user previews: a diff
// of the document and the proposed text, then Apply or Discard. The server is asked with `ask` false, so it asks
// nothing and applies nothing itself. (VS Code's refactor preview starts every change needing confirmation
// unchecked, so its Apply applied nothing unless the user first ticked each box; and a quick fix's edit is
// applied as soon as it is picked, which is why Repair is a command too.)

export const OPTIMIZE = "dice.optimizeKernel";
export const REPAIR = "dice.repair";

export interface LspPosition {
  line: number;
  character: number;
}

export interface LspTextEdit {
  range: { start: LspPosition; end: LspPosition };
  newText: string;
}

/** What `dice.optimizeKernel` and `dice.repair` answer (besides their report). */
export interface RewriteResult {
  summary: string;
  edit: { documentChanges?: { textDocument: { uri: string; version: number | null }; edits: LspTextEdit[] }[] } | null;
  applied: boolean;
}

export interface Proposal {
  uri: string;
  version: number | null;
  edits: LspTextEdit[];
}

/** How a previewed command is sent and shown. */
export interface Previewed {
  /** the command's arguments for the server: the code action's, then `false` (ask nothing, apply nothing) */
  arguments: unknown[];
  /** the diff editor's title */
  title: string;
  /** why the edit is refused when the document changed since the command started */
  stale: string;
}

/** How `command` (with the code action's `args`) is previewed, or null for a command applied as it is. */
export function previewed(command: string, args: unknown[]): Previewed | null {
  if (command === OPTIMIZE) {
    const [uri, kernel, version] = args;
    return {
      arguments: [uri, kernel, version, false],
      title: `DICE: optimize ${String(kernel)} (proposed)`,
      stale: "the document changed while the kernel was being optimized; run Optimize again",
    };
  }
  if (command === REPAIR) {
    const [uri, version] = args;
    const name = decodeURIComponent(String(uri).split("/").pop() ?? "");
    return {
      arguments: [uri, version, false],
      title: `DICE: repair ${name} (proposed)`,
      stale: "the document changed while it was being repaired; run Repair again",
    };
  }
  return null;
}

/** The single-document change a rewrite result proposes, or null when it proposes none. */
export function proposal(result: RewriteResult): Proposal | null {
  const change = result.edit?.documentChanges?.[0];
  if (!change || change.edits.length === 0) {
    return null;
  }
  return { uri: change.textDocument.uri, version: change.textDocument.version, edits: change.edits };
}

/** Whether a proposal was made for another version of the document than the one open now. */
export function isStale(proposed: Proposal, currentVersion: number): boolean {
  return proposed.version !== null && proposed.version !== currentVersion;
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
