// End to end against a running `harnessc serve` of tests/test_serve.py's payments spec, with
// tokens: HARNESSC_URL, CLERK_TOKEN, FINANCE_TOKEN. Run by tests/test_serve.py after `npm run
// build`; prints what it saw as JSON on its last line, and fails on the first broken check.
import assert from "node:assert/strict";
import { HarnessClient, HarnessError, OPERATIONS } from "../dist/index.js";

const url = process.env.HARNESSC_URL;
const clerk = new HarnessClient(url, { token: process.env.CLERK_TOKEN });
const finance = new HarnessClient(url, { token: process.env.FINANCE_TOKEN });
const seen = {};

// the client's operations are the document's, method and path
const doc = await (await fetch(url + "/openapi.json")).json();
const documented = {};
for (const [path, methods] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(methods)) documented[op.operationId] = [method.toUpperCase(), path];
}
assert.deepEqual(Object.fromEntries(Object.entries(OPERATIONS).map(([k, v]) => [k, [...v]])), documented);
seen.operations = Object.keys(documented).length;

const session = await clerk.openSession({ agent: "clerk", task: "t-ts", facts: { values: {} } });
assert.deepEqual(session.actor, { user: "u-1", role: "clerk" });
const sid = session.session_id;

// a DENY from the rule over the arguments
const denied = await clerk.decide(sid, { tool: "payments_send", tool_call_id: "ts-1", args: { iban: "DE1", amount: 20000 } });
assert.equal(denied.outcome, "deny");
assert.equal(denied.decision.rule, "p.big");
seen.deny = { rule: denied.decision.rule, decision_id: denied.decision_id, policy_version: denied.policy_version };

// a refusal is an answer, not an error
const refused = await clerk.decide(sid, { tool: "payments.send", tool_call_id: "ts-2", args: { iban: "DE1" } });
assert.equal(refused.outcome, "refused");
assert.equal(refused.refusal.code, "invalid-args");

// an ASK: asked at once, waited on while finance approves, then run by this client
const asked = await clerk.decide(sid, { tool: "payments.send", tool_call_id: "ts-3", args: { iban: "DE1", amount: 50 }, request_approval: true });
assert.equal(asked.outcome, "ask");
assert.equal(asked.authorized, false);
const requestId = asked.approval.request_id;
const waiting = clerk.approval(requestId, 10);
await assert.rejects(clerk.approve(requestId), (e) => e instanceof HarnessError && e.status === 403 && e.code === "not-an-approver");
const answer = await finance.approve(requestId);
assert.equal(answer.status, "approved");
assert.equal((await waiting).status, "approved");
const accepted = await clerk.invoke(sid, "ts-3");
assert.equal(accepted.status, "accepted");
const done = await clerk.recordResult(sid, "ts-3", { data: { id: "pay-ts" } });
assert.equal(done.status, "success");
assert.deepEqual(done.data, { id: "pay-ts" });
seen.ask = { request_id: requestId, grant_id: answer.grant_id, result: done.status };

// the token's actor cannot be overridden, and a bad token is refused
await assert.rejects(
  clerk.openSession({ agent: "clerk", actor: { user: "f-1", role: "finance" } }),
  (e) => e instanceof HarnessError && e.status === 403 && e.code === "actor-override",
);
await assert.rejects(new HarnessClient(url, { token: "hct_nope" }).openSession({ agent: "clerk" }), (e) => e.status === 401);

const evidence = await clerk.evidence(sid);
const paid = evidence.items.find((i) => i.tool_call_id === "ts-3");
assert.equal(paid.approved_by, "f-1");
const log = await finance.decisionLog();
assert.ok(log.decisions.some((d) => d.decision_id === denied.decision_id && d.result.effect === "deny"));

const z = await clerk.authzenEvaluation({ subject: { type: "user", id: "u-1" }, action: { name: "ledger.read", properties: { account: "a" } } });
assert.equal(z.decision, true);
seen.authzen = z.context.outcome;
console.log(JSON.stringify(seen));
