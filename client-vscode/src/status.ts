// The status-bar item: what `dice/status` says about the model, and the compile state of the file.

export interface DiceStatus {
  state: "idle" | "loading" | "ready" | "error";
  model?: string;
  device?: string;
  dtype?: string;
  message?: string;
  server?: string; // the team server serving the model, when dice.server.url is set
  code?: string; // on error: "load_failed" (the model here), or the team server's error code ("unreachable", ...)
}

/** `dice/completion`: what became of the last completion at a hole (the editor shows nothing when nothing is shown). */
export interface LastCompletion {
  uri: string;
  line: number; // 0-based
  shown: boolean;
  confidence: number | null; // the show filter's P(right) of what was shown
  reason: string | null; // why nothing was shown
}

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

/** The tooltip's line about the last completion in the active file (none for another file's). */
export function completionLine(last: LastCompletion | null, activeUri: string | null): string {
  if (!last || last.uri !== activeUri) {
    return "";
  }
  if (last.shown) {
    const chance = last.confidence === null ? "" : ` (P(right) ${last.confidence.toFixed(2)})`;
    return `\nline ${last.line + 1}: completion shown${chance}`;
  }
  return `\nline ${last.line + 1}: nothing shown: ${last.reason ?? "no reason given"}`;
}

/** Text and tooltip for a `dice/status` notification and the number of nvcc errors in the active file; `last`:
 * the last completion in that file (`completionLine`). */
export function statusView(status: DiceStatus | null, compileErrors: number | null, last = ""): StatusView {
  const compile = compileErrors === null ? "" : compileErrors === 0 ? " $(check)" : ` $(error) ${compileErrors}`;
  if (status === null) {
    return { text: "$(circle-slash) DICE", tooltip: "dice-lsp: not connected", error: true };
  }
  const model = status.model ?? "dice-tiny";
  switch (status.state) {
    case "loading":
      return { text: `$(sync~spin) DICE ${model}`, tooltip: `dice-lsp: loading ${model}`, error: false };
    case "ready":
      return {
        text: `$(sparkle) DICE ${model}${compile}`,
        tooltip: `dice-lsp: ${model} ready on ${status.device ?? "?"} (${status.dtype ?? "?"})` +
          (status.server ? ` at ${status.server}` : "") +
          (compileErrors ? `; nvcc: ${compileErrors} errors in this file` : "") + last,
        error: false,
      };
    case "error":
      return { text: status.code === "unreachable" ? "$(debug-disconnect) DICE" : "$(error) DICE",
        tooltip: `dice-lsp: ${status.message ?? "the model failed to load"}`, error: true };
    default:
      return { text: "$(circle-outline) DICE", tooltip: "dice-lsp: starting", error: false };
  }
}
