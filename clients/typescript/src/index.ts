/**
 * A minimal client of `harnessc serve` (docs/serve.md), written against its OpenAPI document
 * (`/openapi.json`): one method per operation, the types of the answers an agent reads.
 * No dependency: Node 18+ (and browsers) have `fetch`.
 */

export type Json = { [key: string]: unknown };

/** The operations of the OpenAPI document this client calls: operationId → method and path. */
export const OPERATIONS = {
  openSession: ["POST", "/v1/sessions"],
  resumeSession: ["POST", "/v1/sessions/{session_id}/resume"],
  expose: ["POST", "/v1/sessions/{session_id}/expose"],
  decide: ["POST", "/v1/sessions/{session_id}/calls"],
  requestApproval: ["POST", "/v1/sessions/{session_id}/calls/{tool_call_id}/approval"],
  invoke: ["POST", "/v1/sessions/{session_id}/calls/{tool_call_id}/invoke"],
  recordResult: ["POST", "/v1/sessions/{session_id}/calls/{tool_call_id}/result"],
  evidence: ["GET", "/v1/sessions/{session_id}/evidence"],
  endSession: ["POST", "/v1/sessions/{session_id}/end"],
  getApproval: ["GET", "/v1/approvals/{request_id}"],
  approve: ["POST", "/v1/approvals/{request_id}/approve"],
  deny: ["POST", "/v1/approvals/{request_id}/deny"],
  decisionLog: ["GET", "/v1/decisions"],
  authzenEvaluation: ["POST", "/access/v1/evaluation"],
  authzenEvaluations: ["POST", "/access/v1/evaluations"],
} as const;

export type OperationId = keyof typeof OPERATIONS;

/** `SessionOut` */
export interface Session {
  session_id: string;
  agent: string;
  actor: Json;
  task_id: string | null;
  surface: string[];
  policy_version: string;
}

/** `Decision` (the runtime's dataclass), the fields an agent reads */
export interface Decision {
  effect: "allow" | "ask" | "deny";
  rule: string | null;
  matched: string[];
  reason: string | null;
  instead: string | null;
  policy: string;
  tool_id: string;
  evidence: string[];
  [more: string]: unknown;
}

/** `Refusal` */
export interface Refusal {
  code: string;
  message: string;
  replacement: string | null;
  tool: string | null;
  tool_call_id: string | null;
  path: string | null;
  errors: [string, string][];
}

/** `ApprovalOut` */
export interface Approval {
  request_id: string;
  session_id: string;
  decision_id: string | null;
  tool_id: string;
  tool_call_id: string;
  status: string;
  rule: string | null;
  why: string;
  expires_at: string | null;
  [more: string]: unknown;
}

/** `DecideOut` */
export interface Decided {
  outcome: "refused" | "allow" | "ask" | "deny";
  refusal: Refusal | null;
  call: { tool_id: string; tool_call_id: string; input_hash: string; args: Json; action_id: string | null } | null;
  decision: Decision | null;
  decision_id: string | null;
  policy_version: string | null;
  authorized: boolean;
  approval: Approval | null;
}

/** `ResultOut` */
export interface Result {
  tool_id: string;
  tool_call_id: string;
  status: string;
  data: unknown;
  error: string | null;
  ran: boolean;
  action_id: string | null;
  decision_id: string | null;
  [more: string]: unknown;
}

/** `AnswerOut` */
export interface Answer {
  status: string;
  request: Approval;
  grant_id: string | null;
  reason: string | null;
}

/** `FactsIn`: a facts snapshot as the log records one. */
export interface Facts {
  values?: Json;
  connected?: string[];
  running?: string[];
  mcp?: { [server: string]: Json };
}

export interface OpenSession {
  agent: string;
  actor?: Json;
  task?: string | Json;
  facts?: Facts;
  resource?: Json;
  env?: Json;
  session_id?: string;
  said?: string[];
}

export interface Call {
  tool: string;
  tool_call_id: string;
  args?: Json;
  execution?: { command?: string | string[]; cwd?: string; env?: Record<string, string>; timeout_ms?: number; target?: string };
  request_approval?: boolean;
}

/** An answer with an error status: `ErrorOut`'s stable `code`, its sentence and problems. */
export class HarnessError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors: Json[] = [],
  ) {
    super(`${code}: ${message}`);
    this.name = "HarnessError";
  }
}

export interface ClientOptions {
  /** A bearer token (`harnessc serve token issue`). */
  token?: string;
  /** `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

export class HarnessClient {
  private readonly base: string;
  private readonly token?: string;
  private readonly fetcher: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetcher = options.fetch ?? fetch;
  }

  /** One operation of the OpenAPI document, by its id. */
  async call<T>(op: OperationId, params: Record<string, string> = {}, body?: unknown, query?: Record<string, string | number>): Promise<T> {
    const [method, template] = OPERATIONS[op];
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = params[name];
      if (value === undefined) throw new TypeError(`${op} needs ${name}`);
      return encodeURIComponent(value);
    });
    const search = query ? "?" + new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)])).toString() : "";
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await this.fetcher(this.base + path + search, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    if (!response.ok) {
      throw new HarnessError(response.status, data?.error ?? "http-error", data?.message ?? response.statusText, data?.errors ?? []);
    }
    return data as T;
  }

  openSession(body: OpenSession): Promise<Session> {
    return this.call("openSession", {}, body);
  }

  resumeSession(sessionId: string, facts?: Facts): Promise<Session> {
    return this.call("resumeSession", { session_id: sessionId }, facts === undefined ? {} : { facts });
  }

  expose(sessionId: string, query: string, packs: string[] = []): Promise<{ tools: string[]; rule: string; trace: Json }> {
    return this.call("expose", { session_id: sessionId }, { query, packs });
  }

  /** Normalize + decide: `outcome` is `refused` or the decision's effect. */
  decide(sessionId: string, call: Call): Promise<Decided> {
    return this.call("decide", { session_id: sessionId }, call);
  }

  requestApproval(sessionId: string, toolCallId: string): Promise<Approval> {
    return this.call("requestApproval", { session_id: sessionId, tool_call_id: toolCallId });
  }

  /** The request, once answered or after `waitSeconds` (at most 30). */
  approval(requestId: string, waitSeconds = 0): Promise<Approval> {
    return this.call("getApproval", { request_id: requestId }, undefined, { wait: waitSeconds });
  }

  approve(requestId: string, by?: Json): Promise<Answer> {
    return this.call("approve", { request_id: requestId }, by === undefined ? {} : { by });
  }

  deny(requestId: string, reason: string, by?: Json): Promise<Answer> {
    return this.call("deny", { request_id: requestId }, by === undefined ? { reason } : { by, reason });
  }

  /** Run an authorised call: a bound executor's result, or `accepted` for the client to run. */
  invoke(sessionId: string, toolCallId: string): Promise<Result> {
    return this.call("invoke", { session_id: sessionId, tool_call_id: toolCallId });
  }

  /** The outcome of a call the client ran (its invoke answered `accepted`). */
  recordResult(sessionId: string, toolCallId: string, outcome: { data?: unknown; error?: string }): Promise<Result> {
    return this.call("recordResult", { session_id: sessionId, tool_call_id: toolCallId }, outcome);
  }

  evidence(sessionId: string): Promise<{ session_id: string; sessions: string[]; items: Json[] }> {
    return this.call("evidence", { session_id: sessionId });
  }

  endSession(sessionId: string, outcome = "completed"): Promise<Session> {
    return this.call("endSession", { session_id: sessionId }, undefined, { outcome });
  }

  decisionLog(after = 0, limit = 100): Promise<{ decisions: Json[]; next_after: number }> {
    return this.call("decisionLog", {}, undefined, { after, limit });
  }

  authzenEvaluation(request: Json): Promise<{ decision: boolean; context: Json }> {
    return this.call("authzenEvaluation", {}, request);
  }
}
