"""Decisions: what a call is, whether it may run, and why (language.md §§4–6).

- normalize: a planner's call → a frozen PendingCall, or a structured Refusal
- conditions: paths and the reference interpreter over the IR's conditions
- provenance: the one normaliser and tokenizer, and a session's index of where values appeared
- history: a session's ledger (provenance index and history aggregates) and its facts
- availability: does a registered tool work for this user, now
- policy: a spec's policies compiled into deciders, and a naive reference
- evidence_terms: one sentence per session term a decision read

The compiler's analysis, `harnessc test` and the review commands decide with these same
functions, so a decision has one meaning wherever it is computed.
"""
