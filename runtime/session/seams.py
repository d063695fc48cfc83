"""The two seams inside the runtime's session package, typed: what a session, its call path and
the log's readers read of their harness (`HarnessSeam`), and what the call path and the log's
readers read of a session (`SessionSeam`).

A harness makes sessions and a session calls back into its harness: an association both ways.
The modules below `harness` and `sessions` (the call path in `calls`, `_completion`,
`_delegation`, `_restore`, `spans`, and `approval_view`, `shadow`), and the workflows above,
whose manager a harness makes on first use (`Harness.workflows`), name the two
through these Protocols instead of importing the modules that import them, so the package has
no import cycle, type-only imports included (the `acyclic` contract). `Harness` and `Session`
are the only implementations: mypy checks each against its Protocol wherever one is passed as
the other, so a member used below and missing above is a type error, not a runtime one.

Members are read-only properties unless the code below writes them; a method's parameters
name the Protocols, never the classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from ..exposure.ranker import ExposureIndex
from ..judge.availability import (
    Availability,
    AvailabilityChecker,
    Facts,
    ToolAvailability,
    Who,
)
from ..judge.context import CallContext
from ..judge.history import Ledger
from ..judge.normalize import PendingCall, ToolNames, Validator
from ..judge.policy import Decision, PolicyEngine
from ..log.events import Clock, NewEvent
from ..log.projections import Projections
from ..log.store import EventStore
from ..model.ir import Agent, Skill, Spec
from .approvals import ApprovalOutcome, ApprovalRequest, Approvals
from .executors import Executors, Result
from .lifecycle import Action
from .state import Judged, SessionState

__all__ = ["HarnessSeam", "SessionSeam", "ShadowSeam"]


class ShadowSeam(Protocol):
    """What the call path asks of a candidate spec judging in shadow (`shadow.Shadow`)."""

    def judge(
        self,
        session: SessionSeam,
        context: CallContext,
        decision: Decision,
        *,
        decision_id: str,
        policy_version: str,
        input_hash: str,
    ) -> NewEvent | None:
        """The candidate's judgement of a decided call: a `decision.diverged` event when it
        decides otherwise, else None."""
        ...


class HarnessSeam(Protocol):
    """What the modules below `harness` read of the `Harness` their sessions belong to."""

    @property
    def spec(self) -> Spec: ...
    @property
    def policy_version(self) -> str: ...
    @property
    def engine(self) -> PolicyEngine: ...
    @property
    def names(self) -> ToolNames: ...
    @property
    def validators(self) -> Mapping[str, Validator]: ...
    @property
    def outputs(self) -> Mapping[str, Validator]: ...
    @property
    def checker(self) -> AvailabilityChecker: ...
    @property
    def store(self) -> EventStore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def approvals(self) -> Approvals: ...
    @property
    def executors(self) -> Executors: ...
    @property
    def projections(self) -> Projections: ...
    @property
    def shadowing(self) -> ShadowSeam | None: ...
    @property
    def lease_grace_ms(self) -> int: ...
    @property
    def release_after_s(self) -> float | None: ...

    def catch_up(self) -> int: ...
    def expire_approvals(
        self, request_ids: Iterable[str] | None = None
    ) -> list[ApprovalRequest]: ...
    def availability(
        self, facts: Facts | Mapping[str, Any] | None = None, who: Who | None = None
    ) -> Availability: ...
    def exposure_index(self) -> ExposureIndex: ...
    def surface_tools(self, surface: str) -> tuple[str, ...]: ...
    def release(self, session_id: str) -> bool: ...
    def _open_child(
        self,
        parent: SessionSeam,
        *,
        agent: Agent,
        skill: Skill | None = None,
        goal: str | None = None,
        session_id: str | None = None,
    ) -> SessionSeam:
        """A child session of `parent` (a delegated agent's, or a skill's), with the parent's
        actor, task, facts, resource and env."""
        ...

    def _open(
        self,
        *,
        agent: Agent,
        actor: Mapping[str, Any],
        task: Mapping[str, Any],
        facts: Facts,
        resource: Mapping[str, Any],
        env: Mapping[str, Any],
        session_id: str | None = None,
        tools: tuple[str, ...] | None = None,
    ) -> SessionSeam:
        """A root session of `agent` (a workflow step's, on the run's stream)."""
        ...

    def _agent(self, name: str) -> Agent:
        """The declared agent `name` (`HarnessError` `unknown-agent` otherwise)."""
        ...

    def _declared(self, facts: Facts) -> None:
        """Refuse facts the spec does not declare."""
        ...

    def _step_view(self, store: EventStore) -> HarnessSeam:
        """The harness one workflow step sees: the same compiled spec, executors and engine,
        with `store` (the step's buffer) and approvals and sessions of its own."""
        ...

    def approve(self, request_id: str, *, by: Mapping[str, Any]) -> ApprovalOutcome: ...

    def _held_by(self, action_id: str, session: SessionSeam) -> None:
        """Remember which open session holds an action (`complete` and `cancel` find it)."""
        ...

    def _record_preview(self, session_id: str, pending: PendingCall) -> None:
        """Run the previewer of the call's tool, if it has one, and record its answer."""
        ...


class SessionSeam(Protocol):
    """What the call path and the log's readers read of a `Session`."""

    @property
    def harness(self) -> HarnessSeam: ...
    @property
    def id(self) -> str: ...
    @property
    def state(self) -> SessionState: ...
    @property
    def agent(self) -> Agent: ...
    @property
    def actor(self) -> Mapping[str, Any]: ...
    @property
    def task(self) -> dict[str, Any]: ...
    @property
    def facts(self) -> Facts: ...
    @property
    def resource(self) -> Mapping[str, Any]: ...
    @property
    def env(self) -> Mapping[str, Any]: ...
    @property
    def ledger(self) -> Ledger: ...
    @property
    def policies(self) -> tuple[str, ...]: ...
    @property
    def parent(self) -> SessionSeam | None: ...
    @property
    def children(self) -> Sequence[SessionSeam]: ...
    @property
    def skill_def(self) -> Skill | None: ...
    @property
    def skill_name(self) -> str | None: ...
    @property
    def task_id(self) -> str | None: ...

    def on_surface(self, tool_id: str) -> bool: ...
    def tool_availability(self, tool_id: str) -> ToolAvailability: ...
    def update_facts(self, values: Mapping[str, Any]) -> None: ...
    def change_facts(self, changes: list[dict[str, Any]]) -> None: ...
    def refresh_facts(self) -> None: ...
    def held_action(self, key: str) -> Action | None: ...
    def recorded_result(self, key: str) -> Result | None: ...
    def judgement_of(self, key: str) -> Judged | None: ...
    def ran(self, key: str) -> bool: ...
    def runs_here(self, key: str) -> bool: ...
    def take_up(self, key: str, action: Action, result: Result | None = None) -> None: ...
    def take_result(self, key: str, result: Result) -> None: ...
    def cancel_expired(self, request: ApprovalRequest) -> None: ...
