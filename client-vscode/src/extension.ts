// The VS Code side of dice-lsp: starts (or connects to) the language server and adds what VS Code needs
// around it: debounced inline completions, a status-bar item, commands, and previewed optimize and repair edits.
// Workspace Trust is the server's `dice.trusted` (./trust.ts); settings reach the server only by its
// workspace/configuration requests (a change is announced with empty settings), whose answers ./trust.ts
// rebuilds: the declared keys only, `trusted` from Workspace Trust, the user-only keys (a program, a model
// folder, compiler flags, a server) from the user's own configuration. The extension reads its own user-only
// `dice.client.*` keys the same way.
import * as fs from "fs";
import * as net from "net";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  StreamInfo,
} from "vscode-languageclient/node";
import { Debouncer } from "./debounce";
import { ClientSettings, describe, Launch, launchFrom, SettingError, socketAuth, startFailure } from "./launch";
import { isStale, previewed, proposal, proposedText, RewriteResult } from "./preview";
import { Pause, SNOOZE_MINUTES as pauseMinutes } from "./pause";
import { completionLine, DiceStatus, LastCompletion, statusView } from "./status";
import { Inspect, initializationOptions, Schema, schemaOf, trustConfiguration, userValue } from "./trust";

let client: LanguageClient | undefined;
const PROPOSAL_SCHEME = "dice-proposal"; // read-only documents holding a proposed rewrite, for the diff
const proposals = new Map<string, string>();
let proposalCounter = 0;

/** What VS Code says of a setting in each configuration (only its user and default values are used). */
const inspectSetting: Inspect = (key) => vscode.workspace.getConfiguration().inspect(key);

/** A text setting's value; "" (the Settings UI's unset) and anything but a string are null. */
function text(value: unknown): string | null {
  return typeof value === "string" && value.trim() !== "" ? value : null;
}

/** How to reach the server: what starts it and which server it talks to are user-only (`scope: machine`), read
 * from the user's configuration even where VS Code would take a workspace's value. */
function clientSettings(schema: Schema): ClientSettings {
  const user = (key: string): unknown => userValue(schema, inspectSetting, `dice.client.${key}`);
  const command = user("serverCommand");
  return {
    serverCommand: Array.isArray(command) && command.every((part) => typeof part === "string") ? command : [],
    pythonPath: text(user("pythonPath")),
    connect: text(user("connect")),
    tokenFile: text(user("tokenFile")),
    debounceMs: vscode.workspace.getConfiguration("dice.client").get<number>("debounceMs", 150),
  };
}

function serverOptions(launch: Launch): ServerOptions {
  if (launch.kind === "stdio") {
    return { command: launch.command, args: launch.args, options: { env: { ...process.env } } };
  }
  return () =>
    new Promise<StreamInfo>((resolve, reject) => {
      const socket = net.connect(launch.port, launch.host, () => resolve({ reader: socket, writer: socket }));
      socket.once("error", reject);
    });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("DICE", { log: true });
  const item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  item.command = "dice.client.showOutput";
  context.subscriptions.push(output, item, vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, {
    provideTextDocumentContent: (uri) => proposals.get(uri.toString()) ?? "",
  }));
  let status: DiceStatus | null = null;
  let lastCompletion: LastCompletion | null = null; // `dice/completion`: the tooltip says why nothing was shown
  const pause = new Pause(); // DICE: Toggle / Snooze inline completions
  let launched: string | undefined; // how the running server was started or reached
  const schema = schemaOf(context.extension.packageJSON);
  const debouncer = new Debouncer(() => clientSettings(schema).debounceMs);

  const refreshStatus = (): void => {
    const editor = vscode.window.activeTextEditor;
    const errors = editor
      ? vscode.languages
          .getDiagnostics(editor.document.uri)
          .filter((d) => d.source === "nvcc" && d.severity === vscode.DiagnosticSeverity.Error).length
      : null;
    const view = statusView(status, errors, completionLine(lastCompletion, editor?.document.uri.toString() ?? null));
    const paused = pause.describe();
    item.text = paused ? `$(circle-slash) ${view.text}` : view.text;
    item.tooltip = paused ? `${view.tooltip}\n${paused} (DICE: Toggle inline completions)` : view.tooltip;
    item.backgroundColor = view.error ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    item.show();
  };

  // Optimize and Repair: the server computes the edit and returns it unapplied; the diff is shown, then one modal
  // question; the edit is applied as is, only on Apply, and never to a document that changed since
  const withPreview = async (command: string, args: unknown[]): Promise<RewriteResult | undefined> => {
    const asked = previewed(command, args);
    if (!client || !asked) {
      return undefined;
    }
    const result: RewriteResult = await client.sendRequest(ExecuteCommandRequest.type, {
      command,
      arguments: asked.arguments,
    });
    const proposed = proposal(result);
    if (!proposed) {
      void vscode.window.showInformationMessage(`DICE: ${result.summary}`);
      return result;
    }
    const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(proposed.uri));
    if (isStale(proposed, document.version)) {
      void vscode.window.showWarningMessage(`DICE: ${asked.stale}`);
      return result;
    }
    const right = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: document.uri.path,
      query: `${proposalCounter++}` });
    proposals.set(right.toString(), proposedText(document.getText(), proposed.edits));
    await vscode.commands.executeCommand("vscode.diff", document.uri, right, asked.title);
    const choice = await vscode.window.showInformationMessage(`DICE: ${result.summary}`, { modal: true },
      "Apply");
    proposals.delete(right.toString());
    if (choice !== "Apply") {
      return result;
    }
    if (isStale(proposed, document.version)) {
      void vscode.window.showWarningMessage(`DICE: ${asked.stale}`);
      return result;
    }
    const edit = new vscode.WorkspaceEdit();
    for (const change of proposed.edits) {
      const range = new vscode.Range(
        change.range.start.line, change.range.start.character, change.range.end.line, change.range.end.character);
      edit.replace(document.uri, range, change.newText);
    }
    result.applied = await vscode.workspace.applyEdit(edit, { isRefactoring: true });
    return result;
  };

  const start = async (): Promise<void> => {
    let launch: Launch;
    let auth: { authToken?: string };
    launched = undefined;
    try {
      const settings = clientSettings(schema);
      launch = launchFrom(settings);
      auth = socketAuth(launch, settings.tokenFile, (path) => fs.readFileSync(path, "utf8"));
      launched = describe(launch);
    } catch (error) {
      status = { state: "error", message: String((error as Error).message) };
      refreshStatus();
      if (error instanceof SettingError) {
        // one setting to fix: offer to open the settings UI at it
        const setting = error.setting;
        void vscode.window.showErrorMessage(`DICE: ${error.message}`, "Open Settings").then((choice) => {
          if (choice) {
            void vscode.commands.executeCommand("workbench.action.openSettings", `@id:${setting}`);
          }
        });
      } else {
        void vscode.window.showErrorMessage(`DICE: ${(error as Error).message}`);
      }
      return;
    }
    const options: LanguageClientOptions = {
      documentSelector: [{ language: "cuda-cpp" }, { scheme: "file", pattern: "**/*.{cu,cuh}" }],
      synchronize: { configurationSection: "dice" },
      initializationOptions: () => ({ ...initializationOptions(vscode.workspace.isTrusted), ...auth }),
      outputChannel: output,
      middleware: {
        workspace: {
          configuration: trustConfiguration(() => vscode.workspace.isTrusted, schema, inspectSetting),
          // never push settings (they would be VS Code's merged ones): the server asks for them instead
          didChangeConfiguration: (_sections, next) => next(undefined),
        },
        provideInlineCompletionItems: async (document, position, context, token, next) =>
          pause.active() && (await debouncer.wait(token)) ? next(document, position, context, token) : null,
        executeCommand: async (command, args, next) =>
          previewed(command, args) ? withPreview(command, args) : next(command, args),
      },
    };
    client = new LanguageClient("dice", "DICE", serverOptions(launch), options);
    client.onNotification("dice/status", (params: DiceStatus) => {
      status = params;
      refreshStatus();
    });
    client.onNotification("dice/completion", (params: LastCompletion) => {
      lastCompletion = params;
      refreshStatus();
    });
    try {
      await client.start();
    } catch (error) {
      const failure = startFailure(launch, error);
      status = { state: "error", message: failure.message };
      refreshStatus();
      const fix = failure.setting ? "Open Settings" : "Show output";
      void vscode.window.showErrorMessage(`DICE: ${failure.message}`, fix).then((choice) => {
        if (choice === "Open Settings" && failure.setting) {
          void vscode.commands.executeCommand("workbench.action.openSettings", `@id:${failure.setting}`);
        } else if (choice) {
          output.show();
        }
      });
    }
  };

  const actionsAtCursor = async (kind: vscode.CodeActionKind, title: RegExp): Promise<vscode.CodeAction[]> => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return [];
    }
    // none resolved: Optimize and Repair carry their command (resolving a "Fill hole" would run the model)
    const found = await vscode.commands.executeCommand<vscode.CodeAction[]>(
      "vscode.executeCodeActionProvider", editor.document.uri, editor.selection, kind.value);
    return (found ?? []).filter((action) => title.test(action.title));
  };

  const restart = async (): Promise<void> => {
    // a client whose start failed is not running and cannot be stopped ("Client is not running and can't be
    // stopped"): it is only let go, so that Restart works after a failed start without reloading the window
    const previous = client;
    client = undefined;
    if (previous?.isRunning()) {
      await previous.stop();
    } else if (previous) {
      await previous.dispose().catch(() => undefined);
    }
    status = null;
    await start();
  };

  // Trusted now: the server reads its settings again (trusted; the user-only ones stay the user's). The
  // dice.client.* settings are the user's too, so the server is started again only if it is not running.
  const trustGranted = async (): Promise<void> => {
    let wanted: string | undefined;
    try {
      wanted = describe(launchFrom(clientSettings(schema)));
    } catch {
      wanted = undefined;
    }
    if (wanted !== launched || !client?.isRunning()) {
      await restart();
      return;
    }
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
  };

  context.subscriptions.push(
    vscode.commands.registerCommand("dice.client.showOutput", () => output.show()),
    vscode.commands.registerCommand("dice.client.toggleCompletions", () => {
      const on = pause.toggle();
      refreshStatus();
      void vscode.window.setStatusBarMessage(`DICE: inline completions ${on ? "on" : "off"}`, 3000);
    }),
    vscode.commands.registerCommand("dice.client.snoozeCompletions", () => {
      pause.snooze();
      refreshStatus();
      setTimeout(refreshStatus, pauseMinutes * 60_000 + 1000);
      void vscode.window.setStatusBarMessage(`DICE: ${pause.describe()}`, 3000);
    }),
    vscode.commands.registerCommand("dice.client.restartServer", restart),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void trustGranted()),
    vscode.commands.registerCommand("dice.client.fillHole", async () => {
      const editor = vscode.window.activeTextEditor;
      if (editor && client) {
        const position = editor.selection.active;
        await client.sendRequest(ExecuteCommandRequest.type, {
          command: "dice.fillHole",
          arguments: [editor.document.uri.toString(), { line: position.line, character: position.character }],
        });
      }
    }),
    vscode.commands.registerCommand("dice.client.optimizeKernel", async () => {
      const actions = await actionsAtCursor(vscode.CodeActionKind.RefactorRewrite, /^Optimize kernel/);
      const picked = actions.length > 1
        ? await vscode.window.showQuickPick(actions.map((a) => ({ label: a.title, action: a })))
        : actions[0] ? { action: actions[0] } : undefined;
      if (!picked) {
        void vscode.window.showInformationMessage("DICE: no complete kernel at the cursor");
        return;
      }
      const command = picked.action.command;
      if (command) {
        await vscode.commands.executeCommand(command.command, ...(command.arguments ?? []));
      }
    }),
    vscode.commands.registerCommand("dice.client.repair", async () => {
      const [fix] = await actionsAtCursor(vscode.CodeActionKind.QuickFix, /^Repair with DICE/);
      const command = fix?.command;
      if (!command) {
        void vscode.window.showInformationMessage("DICE: nothing to repair here (no nvcc error at the cursor)");
        return;
      }
      await vscode.commands.executeCommand(command.command, ...(command.arguments ?? []));
    }),
    vscode.languages.onDidChangeDiagnostics(refreshStatus),
    vscode.window.onDidChangeActiveTextEditor(refreshStatus),
  );
  refreshStatus();
  await start();
}

export async function deactivate(): Promise<void> {
  if (client) {
    await client.stop();
  }
}
