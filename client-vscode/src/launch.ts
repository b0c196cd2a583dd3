// How to reach the language server: start `dice-lsp` on stdio, or connect to one already listening.

export interface ClientSettings {
  serverCommand: string[];
  pythonPath: string | null;
  connect: string | null;
  tokenFile: string | null;
  debounceMs: number;
}

export type Launch =
  | { kind: "stdio"; command: string; args: string[] }
  | { kind: "tcp"; host: string; port: number };

/** The launch the settings ask for: `connect` wins, then the command, then the interpreter, then PATH. */
export function launchFrom(settings: ClientSettings): Launch {
  if (settings.connect) {
    const match = /^(.+):(\d{1,5})$/.exec(settings.connect.trim());
    const port = match ? Number(match[2]) : NaN;
    if (!match || port < 1 || port > 65535) {
      throw new Error(`dice.client.connect must be HOST:PORT, got "${settings.connect}"`);
    }
    return { kind: "tcp", host: match[1].replace(/^\[(.*)\]$/, "$1"), port };
  }
  if (settings.serverCommand.length > 0) {
    const [command, ...args] = settings.serverCommand;
    return { kind: "stdio", command, args };
  }
  if (settings.pythonPath) {
    return { kind: "stdio", command: settings.pythonPath, args: ["-m", "dice_lsp.cli"] };
  }
  return { kind: "stdio", command: "dice-lsp", args: [] };
}

/** What the user sees when the server cannot be started or reached. */
export function describe(launch: Launch): string {
  return launch.kind === "tcp" ? `${launch.host}:${launch.port}` : [launch.command, ...launch.args].join(" ");
}

/** An error the user fixes in one setting: the message says how, and `setting` is where (VS Code offers to open it). */
export class SettingError extends Error {
  constructor(message: string, readonly setting: string) {
    super(message);
    this.name = "SettingError";
  }
}

/** What `initialize` carries to be admitted by a `dice-lsp lsp --tcp` server, which always requires a token: the
 * token read from `dice.client.tokenFile` (first line, trimmed) when connecting over TCP; nothing for a server on
 * stdio. Without `dice.client.tokenFile` a TCP connection could only be refused, so it is an error before any
 * connection is attempted. */
export function socketAuth(launch: Launch, tokenFile: string | null, read: (path: string) => string):
    { authToken?: string } {
  if (launch.kind !== "tcp") {
    return {};
  }
  if (!tokenFile?.trim()) {
    throw new SettingError(
      `dice.client.connect is set (${describe(launch)}) but dice.client.tokenFile is not, and a dice-lsp lsp --tcp ` +
      "server always requires a token: set dice.client.tokenFile (User settings) to the file the server names on " +
      "stderr (\"token in …/token\"), or start the server with --token-file F and set dice.client.tokenFile to F.",
      "dice.client.tokenFile");
  }
  let text: string;
  try {
    text = read(tokenFile);
  } catch (error) {
    throw new SettingError(`cannot read dice.client.tokenFile ${tokenFile}: ${(error as Error).message}`,
      "dice.client.tokenFile");
  }
  const token = text.split(/\r?\n/)[0].trim();
  if (!token) {
    throw new SettingError(`dice.client.tokenFile ${tokenFile} is empty`, "dice.client.tokenFile");
  }
  return { authToken: token };
}

/** Why the server could not be started, for the user, with the one setting that fixes it where there is one: a
 * command that is not there (`spawn dice-lsp ENOENT`) is fixed by `dice.client.pythonPath` (a Python with dice-lsp
 * installed) or `dice.client.serverCommand`. `error` is whatever the language client threw (not always an Error). */
export function startFailure(launch: Launch, error: unknown): { message: string; setting: string | null } {
  const text = error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error);
  const code = (error as { code?: unknown } | null)?.code;
  const missing = launch.kind === "stdio" && (code === "ENOENT" || /\bENOENT\b/.test(text ?? ""));
  if (missing) {
    const which = launch.command === "dice-lsp"
      ? "dice-lsp is not on PATH: set dice.client.pythonPath to a Python that has dice-lsp installed " +
        "(pip install dice-lsp), or put dice-lsp on PATH"
      : `${launch.command} was not found: fix dice.client.pythonPath or dice.client.serverCommand`;
    return { message: `cannot start ${describe(launch)}: ${which}`,
             setting: launch.command === "dice-lsp" || launch.args[0] === "-m" ? "dice.client.pythonPath"
               : "dice.client.serverCommand" };
  }
  return { message: `cannot start ${describe(launch)}: ${text || "the language client gave no reason"}`, setting: null };
}
