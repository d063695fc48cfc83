"""Policy review: what a change to a spec will do before it ships.

`harnessc diff` (a semantic diff with witness calls), `harnessc replay` (the recorded decisions
of an event log re-decided under a new spec) and `harnessc why` (a counterfactual explanation of
one decision) are here, on top of the policy analysis (`compiler/analysis`). Shadow mode and the
streaming re-decision of recorded calls are the runtime's (`harnessc.runtime`): an application
runs them without the compiler.
"""
