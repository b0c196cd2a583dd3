// What the server is told its settings are. Two rules, whatever the settings files hold:
// - Workspace Trust decides `dice.trusted`, never a settings file: a workspace's own .vscode/settings.json could
//   otherwise say `"dice.trusted": true` and have the server use its compile_commands.json and run its kernels.
// - The user-only settings (those that name a program, a model folder, compiler flags, a server or a token file,
//   and `dice.trustRemoteCode`: package.json's restrictedConfigurations, all scoped `machine` or `application`)
//   come from the user's own configuration (User / Remote settings), never from a workspace's or folder's
//   settings file, in trusted workspaces too.
// And only the settings the extension declares are passed on: `"dice.dice": {"trusted": true, ...}` in a
// settings file reaches VS Code's `dice` section as a nested `dice` object, which is dropped here.
// The server learns `trusted` from initializationOptions and everything from its workspace/configuration
// requests, whose answers are rebuilt here from package.json's schema.
import type { ConfigurationRequest } from "vscode-languageclient/node";

/** A `workspace/configuration` item: which section the server asks for. */
export interface ConfigurationItem {
  section?: string;
  scopeUri?: string;
}

/** What `WorkspaceConfiguration.inspect(key)` says of a setting (the fields read here). */
export interface Inspected {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** `(key) => vscode.workspace.getConfiguration().inspect(key)`, with `key` fully qualified (`dice.server.url`). */
export type Inspect = (key: string) => Inspected | undefined;

/** The extension's settings as package.json declares them. */
export interface Schema {
  /** Every declared setting, fully qualified: `dice.steps`, `dice.server.url`, `dice.client.connect`. */
  keys: readonly string[];
  /** Those read only from the user's own configuration. */
  userOnly: ReadonlySet<string>;
  /** The declared defaults. */
  defaults: ReadonlyMap<string, unknown>;
}

/** Where the answers come from: Workspace Trust, the schema, and the user's own configuration. */
export interface Sources {
  trusted: boolean;
  schema: Schema;
  inspect: Inspect;
}

const SECTION = "dice";
const TRUSTED = "dice.trusted";
/** The only groups of settings below `dice` (`dice.server.url`, `dice.client.connect`). */
const GROUPS = new Set(["server", "client"]);
/** Scopes whose values VS Code never takes from a workspace's or folder's settings. */
const USER_SCOPES = new Set(["application", "machine"]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A declared key the server may be told: `dice.NAME` or `dice.server.NAME` / `dice.client.NAME`. */
function wellFormed(key: string): boolean {
  const [section, ...path] = key.split(".");
  const name = /^[A-Za-z][A-Za-z0-9]*$/;
  return section === SECTION && path.every((part) => name.test(part)) &&
    (path.length === 1 || (path.length === 2 && GROUPS.has(path[0])));
}

/** The schema in package.json (`context.extension.packageJSON`): contributes.configuration's properties; user-only
 * are the untrustedWorkspaces.restrictedConfigurations and any key scoped `machine` or `application`. */
export function schemaOf(packageJSON: unknown): Schema {
  const manifest = isObject(packageJSON) ? packageJSON : {};
  const contributes = isObject(manifest.contributes) ? manifest.contributes : {};
  const configurations = Array.isArray(contributes.configuration)
    ? contributes.configuration : [contributes.configuration];
  const properties: [string, unknown][] = configurations.flatMap(
    (configuration: unknown) => isObject(configuration) && isObject(configuration.properties)
      ? Object.entries(configuration.properties) : []);
  const keys = properties.map(([key]) => key).filter(wellFormed);
  const defaults = new Map(properties.filter(([key]) => wellFormed(key))
    .map(([key, property]) => [key, isObject(property) ? property.default : undefined]));
  const capabilities = isObject(manifest.capabilities) ? manifest.capabilities : {};
  const untrusted = isObject(capabilities.untrustedWorkspaces) ? capabilities.untrustedWorkspaces : {};
  const restricted = Array.isArray(untrusted.restrictedConfigurations) ? untrusted.restrictedConfigurations : [];
  const userOnly = new Set<string>(restricted.filter((key): key is string => typeof key === "string"));
  for (const [key, property] of properties) {
    if (isObject(property) && typeof property.scope === "string" && USER_SCOPES.has(property.scope)) {
      userOnly.add(key);
    }
  }
  return { keys, userOnly, defaults };
}

/** A user-only setting's value: the user's (User / Remote settings), else the default; never a workspace's or a
 * folder's value, whatever `inspect` says they are. */
export function userValue(schema: Schema, inspect: Inspect, key: string): unknown {
  const inspected = inspect(key);
  return inspected?.globalValue ?? inspected?.defaultValue ?? schema.defaults.get(key);
}

/** One declared setting as the server is told it: `trusted` from Workspace Trust, a user-only one from the user's
 * configuration, any other as VS Code merged it (`merged`). */
function resolve(key: string, merged: unknown, sources: Sources): unknown {
  if (key === TRUSTED) {
    return sources.trusted;
  }
  return sources.schema.userOnly.has(key) ? userValue(sources.schema, sources.inspect, key) : merged;
}

/** The answer for `section` (`dice` or below it), built from the declared keys only: nested objects other than the
 * declared groups (`server`, `client`) and undeclared keys are dropped; a section that declares nothing is null. */
function diceAnswer(section: string, merged: unknown, sources: Sources): unknown {
  const { keys } = sources.schema;
  if (keys.includes(section)) {
    return resolve(section, merged, sources);
  }
  const prefix = `${section}.`;
  const below = keys.filter((key) => key.startsWith(prefix));
  if (below.length === 0) {
    return null;
  }
  const answer: Record<string, unknown> = {};
  for (const key of below) {
    const path = key.slice(prefix.length).split(".");
    let from: unknown = merged;
    for (const part of path) {
      from = isObject(from) && Object.prototype.hasOwnProperty.call(from, part) ? from[part] : undefined;
    }
    const value = resolve(key, from, sources);
    if (value === undefined) {
      continue;
    }
    let into = answer;
    for (const part of path.slice(0, -1)) {
      into = (isObject(into[part]) ? into[part] : (into[part] = {})) as Record<string, unknown>;
    }
    into[path[path.length - 1]] = value;
  }
  return answer;
}

/** The answers to a `workspace/configuration` request as the server gets them: the `dice` section (or one below
 * it, or `dice` inside the whole configuration when no section is named) rebuilt from the declared keys, with
 * `trusted` from Workspace Trust and the user-only keys from the user's configuration. Other answers unchanged;
 * VS Code's own objects are not changed. */
export function configurationAnswers(items: ConfigurationItem[], values: unknown[], sources: Sources): unknown[] {
  return values.map((value, index) => {
    const section = items[index]?.section;
    if (section === SECTION || section?.startsWith(`${SECTION}.`)) {
      return diceAnswer(section, value, sources);
    }
    if (section === undefined || section === "") {
      const whole = isObject(value) ? value : {};
      return { ...whole, [SECTION]: diceAnswer(SECTION, whole[SECTION], sources) };
    }
    return value;
  });
}

/** What the server gets in initializationOptions (no settings: it asks for them). */
export function initializationOptions(trusted: boolean): { dice: { trusted: boolean } } {
  return { dice: { trusted } };
}

/** The `workspace.configuration` middleware: VS Code's answers rebuilt by `configurationAnswers`, with `trusted`
 * from `isTrusted()` at the time of each request. */
export function trustConfiguration(isTrusted: () => boolean, schema: Schema, inspect: Inspect):
    ConfigurationRequest.MiddlewareSignature {
  return async (params, token, next) => {
    const values = await next(params, token);
    return Array.isArray(values)
      ? configurationAnswers(params.items, values, { trusted: isTrusted(), schema, inspect }) : values;
  };
}
