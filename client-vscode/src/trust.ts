// Workspace Trust decides `dice.trusted`, never a settings file: a workspace's own .vscode/settings.json could
// otherwise say `"dice.trusted": true` and have the server use its compile_commands.json and run its kernels.
// The server learns the value from initializationOptions and from every answer to workspace/configuration,
// where the extension's value replaces whatever the merged settings hold.
import type { ConfigurationRequest } from "vscode-languageclient/node";

/** A `workspace/configuration` item: which section the server asks for. */
export interface ConfigurationItem {
  section?: string;
  scopeUri?: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What the server gets in initializationOptions. */
export function initializationOptions(trusted: boolean): { dice: { trusted: boolean } } {
  return { dice: { trusted } };
}

/** The answers to a `workspace/configuration` request with `trusted` set from Workspace Trust: in the `dice`
 * section, as `dice.trusted` itself, and inside the whole configuration (no section). Other answers unchanged. */
export function withTrust(items: ConfigurationItem[], values: unknown[], trusted: boolean): unknown[] {
  return values.map((value, index) => {
    const section = items[index]?.section;
    if (section === "dice") {
      return { ...(isObject(value) ? value : {}), trusted };
    }
    if (section === "dice.trusted") {
      return trusted;
    }
    if (section === undefined || section === "") {
      const whole = isObject(value) ? value : {};
      return { ...whole, dice: { ...(isObject(whole.dice) ? whole.dice : {}), trusted } };
    }
    return value;
  });
}

/** The `workspace.configuration` middleware: VS Code's answers, with `trusted` from `isTrusted()` at the time. */
export function trustConfiguration(isTrusted: () => boolean): ConfigurationRequest.MiddlewareSignature {
  return async (params, token, next) => {
    const values = await next(params, token);
    return Array.isArray(values) ? withTrust(params.items, values, isTrusted()) : values;
  };
}
