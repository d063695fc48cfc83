"""Specs shaped like real policy sets, for `bench/check_scale.py --shape realistic`.

`realistic_spec(n)` is tests/fixtures/realistic_50_tools.harness grown to `n` tools and widened
to the other shapes real policy sets have. Tools `<group>.<action>[<round>]`, ten groups that
each grow by an action at a time: an environment enum on the deploying actions, a path, a
ticket, a dry-run flag; a URL on web tools, an amount on billing tools, an owner on identity
tools, recipients on mail tools. Rules over `*` and over groups first: tenant isolation, path
prefixes and suffixes (`/vault/ssh/`, `/etc/secrets/`, `.pem`), URL prefixes, a risk-based
ask, an amount bound, a field-to-field comparison (`args.owner != actor.user`), an admin allow;
then role allows per tool and asks in production. The standard library's guardrails and risk
table are imported (`import std.risk`). `session=True` adds rules over session terms on the
mail and billing tools: provenance (`args.to from untrusted only`), a count and a sum of
earlier calls.
"""

from __future__ import annotations

GROUPS = ("change", "production", "fs", "db", "k8s", "web", "mail", "billing", "iam", "ci")
ACTIONS = (
    ("apply", "high"),
    ("close", "medium"),
    ("create", "medium"),
    ("delete", "critical"),
    ("deploy", "high"),
    ("grant", "critical"),
    ("migrate", "critical"),
    ("query", "low"),
    ("read", "low"),
    ("rotate", "high"),
)
DEPLOYING = ("apply", "deploy", "migrate", "query")
ROLES = (
    '["engineer", "sre"]',
    '"sre"',
    '["contractor", "engineer", "sre"]',
    '"engineer"',
    '["sre", "viewer"]',
    '"contractor"',
)
EXTRA_FIELD = {
    "web": "url: url?",
    "billing": "amount: int?",
    "iam": "owner: string?",
    "mail": "to: string?",
}


def tool_id(i: int) -> str:
    round_ = i // (len(GROUPS) * len(ACTIONS))
    return f"{_group(i)}.{_action(i)[0]}{round_ or ''}"


def _group(i: int) -> str:
    return GROUPS[i % len(GROUPS)]


def _action(i: int) -> tuple[str, str]:
    return ACTIONS[(i // len(GROUPS)) % len(ACTIONS)]


def realistic_spec(n: int, session: bool = False) -> str:
    """The spec of `n` tools (module docstring)."""
    out = [
        'harness realistic {\n  version "0.1.0"\n'
        '  summary "A policy set shaped like real ones."\n}\n',
        "import std.risk\n",
    ]
    for i in range(n):
        action, risk = _action(i)
        group = _group(i)
        fields = []
        if action in DEPLOYING:
            fields.append('environment: enum("dev", "staging", "production")')
        fields.append("path: path" if action in ("read", "delete") else "path: path?")
        fields += ["ticket: string?", "dry_run: bool?"]
        if group in EXTRA_FIELD:
            fields.append(EXTRA_FIELD[group])
        effects = "read" if risk == "low" else "write"
        body = "\n".join(f"    {f}" for f in fields)
        out.append(
            f"tool {tool_id(i)} {{\n"
            f'  summary "Synthetic tool: {action} in {group}."\n'
            f"  effects {effects}\n  risk {risk}\n  input {{\n{body}\n  }}\n}}\n"
        )
    rules = [
        "include std.risk.guardrails",
        'tenant: deny * when resource.tenant != actor.tenant { reason "other tenant" }',
        'ssh: deny * when args.path startswith "/vault/ssh/" { reason "ssh keys" }',
        'secrets: deny fs.* when args.path startswith "/etc/secrets/" { reason "secrets" }',
        'keys: deny * when args.path endswith ".pem" or args.path endswith ".key" '
        '{ reason "key files" }',
        'plain_http: deny web.* when args.url startswith "http://" { reason "no plain http" }',
        'outside: ask web.* when not args.url startswith "https://internal.example.com/" '
        '{ approver role "owner" }',
        'critical: ask risk == critical when actor.role != "admin" { approver role "approver" }',
        'prod_db: ask db.* when args.environment == "production" { approver role "approver" }',
        'big: ask billing.* when args.amount > 10000 { approver role "finance" }',
        'owner: deny iam.* when args has owner and args.owner != actor.user { reason "owner" }',
        'admin: allow * when actor.role == "admin"',
    ]
    if session:
        rules += [
            'untrusted_to: deny mail.* when args.to from untrusted only { reason "injected" }',
            'bulk_mail: deny mail.* when count(mail.* within 10m) > 20 { reason "too many mails" }',
            "daily: deny billing.* when sum(args.amount of billing.* within 24h) >= 50000 "
            '{ reason "daily limit" }',
        ]
    for i in range(n):
        action = _action(i)[0]
        roles = ROLES[i % len(ROLES)]
        op = "in" if roles.startswith("[") else "=="
        rules.append(f"allow_{i}: allow {tool_id(i)} when actor.role {op} {roles}")
        if action in DEPLOYING and i % 2 == 0:
            rules.append(
                f'prod_{i}: ask {tool_id(i)} when args.environment == "production" '
                '{ approver role "approver" }'
            )
        if action in DEPLOYING and i % 3 == 0:
            rules.append(
                f'dev_{i}: allow {tool_id(i)} when actor.role == "engineer" '
                'and args.environment in ["dev", "staging"]'
            )
    out.append("policy realistic {\n  default std.risk.defaults\n")
    out.extend(f"  {rule}\n" for rule in rules)
    out.append("}\n")
    out.append("surface everything { expose * }\n")
    out.append("agent assistant { surface everything; policy realistic }\n")
    return "".join(out)
