"""Harness and Session: one loaded spec, one run of an agent, and the path of every call.

- harness: the loaded spec, routing each call through the five layers
- sessions, calls: a session and its call path (normalize → judge → decide → approve → invoke)
- approvals, approval_view: what a person is asked, what their answer authorises, what they see
- lifecycle, executors: an action's states, the code bound to tools
- _completion, _delegation, _restore (the session's own): accepted work, child sessions, and a
  session taken up from the log
- evidence: per session, what was called and what came back
- spans: the OpenTelemetry spans of the path, off until integrations.telemetry enables them
- recorded, replay, shadow, operations: the recorded decisions, decided again or beside a
  candidate spec, and the operator's commands on a log
"""
