// How to reach the language server: start `dice-lsp` on stdio, or connect to one already listening.

export interface ClientSettings {
  serverCommand: string[];
  pythonPath: string | null;
  connect: string | null;
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
