// The Harness extension: highlighting (the TextMate grammar, declared in package.json) and,
// when the installed harnessc has a language server (`harnessc lsp`), diagnostics and the
// rest over it. Without one the extension highlights only, and says so once in its output.
"use strict";

const { spawnSync } = require("child_process");
const vscode = require("vscode");

let client;

function harnesscCommand() {
  return vscode.workspace.getConfiguration("harness").get("path") || "harnessc";
}

// `harnessc lsp --help` exits 0 only where the command exists.
function hasLanguageServer(command) {
  const probe = spawnSync(command, ["lsp", "--help"], { encoding: "utf8", timeout: 10000 });
  return probe.status === 0;
}

async function activate(context) {
  const output = vscode.window.createOutputChannel("Harness");
  context.subscriptions.push(output);
  const command = harnesscCommand();
  if (!hasLanguageServer(command)) {
    output.appendLine(
      `\`${command} lsp\` is not available: highlighting only. ` +
        "Install a harnessc with the language server, or set `harness.path`.",
    );
    return;
  }
  const { LanguageClient, TransportKind } = require("vscode-languageclient/node");
  const server = { command, args: ["lsp"], transport: TransportKind.stdio };
  client = new LanguageClient(
    "harness",
    "Harness language server",
    { run: server, debug: server },
    { documentSelector: [{ language: "harness" }], outputChannel: output },
  );
  await client.start();
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
