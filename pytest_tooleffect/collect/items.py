"""Collection: case files become test items, one per case × policy × trial.

The second stage of the path of one case (``docs/design.md``, "Architecture").  A family is read
once per process (:class:`Families`); a case file yields its cases sorted by id, an
:class:`InvalidCaseItem` per case that failed validation (an error outcome naming the file, the
case id and the field), and markers for the class, the family and the position bucket.  The
item's setup obtains its decision from the decider built at configure time (``decider_key``) and
its call phase hands it to the scorer (``scorer_key``), so this module imports no later stage.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.collect.agents import Agent, AgentError, load_agent
from pytest_tooleffect.collect.cases import CaseProblem, CaseRef, case_refs
from pytest_tooleffect.collect.census import census_problems
from pytest_tooleffect.collect.family import (
    CASE_SUFFIXES,
    FAMILY_FILE,
    FamilyError,
    LoadedFamily,
    is_case_file,
    is_family_dir,
    load_family,
)
from pytest_tooleffect.collect.ids import item_name, node_names, record_id
from pytest_tooleffect.collect.nodes import file_node, location_path
from pytest_tooleffect.compat import OneLineFailure, fixture_info, fixture_request, read_back_node_id
from pytest_tooleffect.formats import Case, Policy, ToolSpec
from pytest_tooleffect.options import REPLAY
from pytest_tooleffect.outcomes import DecisionFailed
from pytest_tooleffect.settings import Settings, settings_key
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.input_files import special_kind

__all__ = ["CLASS_MARKERS", "Agents", "CaseCollector", "CaseFile", "CaseItem", "Families", "InvalidCaseItem",
           "FamilyFolderProblems", "folder_problems",
           "agents_key", "decider_key", "families_key", "invalid_entry", "scorer_key",
           "select_policies"]

CLASS_MARKERS = {
    "single": "the label has exactly one valid action, a tool call",
    "several": "the label has two or more valid alternatives, none of them no-tool",
    "no_tool": "calling no tool is among the valid actions",
}


@dataclass
class Families:
    """Every family this process reads, each read once.

    Attributes:
        loaded: by directory, the family as :func:`~pytest_tooleffect.collect.cases.load_family` reads it,
            or its error.
        names: by family name, the directory collected first with that name.
        seen_ids: by directory, the case ids collected so far (duplicates across files are refused).
        census: by directory, why the family's ``quota`` or ``population`` disagree with its case
            files (``None``: they agree, or the family gives neither).
        pending: by case file, what reading it found when its family's cases were counted, kept
            until the file is collected (each file is read once).
    """

    loaded: dict[Path, LoadedFamily | FamilyError] = field(default_factory=dict)
    names: dict[str, Path] = field(default_factory=dict)
    seen_ids: dict[Path, set[str]] = field(default_factory=dict)
    census: dict[Path, FamilyError | None] = field(default_factory=dict)
    pending: dict[Path, tuple[list[CaseRef], list[CaseProblem]]] = field(default_factory=dict)

    def load(self, directory: Path) -> LoadedFamily | FamilyError:
        """The family in ``directory`` as its files say (or why it cannot be read), read once."""
        if directory not in self.loaded:
            try:
                self.loaded[directory] = load_family(directory)
            except FamilyError as exc:
                self.loaded[directory] = exc
        return self.loaded[directory]

    def for_cases(self, directory: Path) -> LoadedFamily | FamilyError:
        """The family whose cases are collected from ``directory``, or why it cannot run: refused
        when a family collected before it has its name (families are separate populations).
        """
        fam = self.load(directory)
        if isinstance(fam, LoadedFamily):
            other = self.names.setdefault(fam.name, directory)
            if other != directory:
                return FamilyError(f"{directory / FAMILY_FILE}: name: family {fam.name!r} is also defined in "
                                   f"{other}; families are separate populations and need distinct names")
        return fam

    def counted(self, fam: LoadedFamily) -> LoadedFamily | FamilyError:
        """The family, or why its ``quota`` or ``population`` disagree with the cases of all its case
        files (:mod:`.census`), counted once: each case file of a family that gives either is read
        here, in collection order, and what it holds is kept for :meth:`case_refs`.
        """
        directory = fam.directory
        if directory in self.census:
            return self.census[directory] or fam
        self.census[directory] = None
        if fam.family.quota is None and fam.family.population is None:
            return fam
        counts: Counter[str] = Counter()
        unreadable = 0

        def count(bucket: str | None) -> None:
            nonlocal unreadable
            if bucket is None:
                unreadable += 1
            else:
                counts[bucket] += 1

        seen = self.seen_ids.setdefault(directory, set())
        try:
            files = sorted(p for p in directory.iterdir() if p.is_file() and is_case_file(p, fam.referenced_files))
        except OSError:  # unreadable: collection says so
            return fam
        for path in files:
            self.pending[path] = case_refs(path, fam, seen, count)
        problems = census_problems(directory / FAMILY_FILE, fam.family.quota, fam.family.population, counts,
                                   unreadable)
        self.census[directory] = FamilyError("; ".join(problems)) if problems else None
        return self.census[directory] or fam

    def case_refs(self, path: Path, fam: LoadedFamily) -> tuple[list[CaseRef], list[CaseProblem]]:
        """The refs of the usable cases of one case file and its problems (:func:`.cases.case_refs`),
        read when the family's cases were counted or now.
        """
        if path in self.pending:
            return self.pending.pop(path)
        return case_refs(path, fam, self.seen_ids.setdefault(path.parent, set()))

    def by_name(self) -> dict[str, LoadedFamily]:
        """The families loaded without error, by name."""
        return {f.name: f for f in self.loaded.values() if isinstance(f, LoadedFamily)}


families_key = pytest.StashKey[Families]()
#: The scorer the plugin builds at configure time: ``scorer(item, decision)`` scores the item's
#: decision, attaches its record and raises :class:`~pytest_tooleffect.outcomes.DecisionFailed`.
scorer_key = pytest.StashKey[Callable[["CaseItem", Any], None]]()
#: the decider built at configure time: ``decide(item)`` is the item's decision (setup phase)
decider_key = pytest.StashKey[Callable[["CaseItem"], Any]]()


class CaseCollector:
    """The plugin object that collects case files (registered at configure time)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.families = config.stash[families_key] = Families()
        config.stash[agents_key] = Agents(config)
        self.escaped: set[str] = set()  # node ids given to files named with control characters (file_node)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        """After an item's teardown, let its case go (:meth:`CaseItem.release`)."""
        try:
            return (yield)
        finally:
            if isinstance(item, CaseItem):
                item.release()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """What was read of case files the run did not collect is let go."""
        self.families.pending.clear()

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
        directory = file_path.parent
        if file_path.suffix not in CASE_SUFFIXES or not is_family_dir(directory):
            return None
        fam = self.families.load(directory)
        if is_case_file(file_path, fam.referenced_files):
            return file_node(CaseFile, parent, file_path, self.escaped)
        if file_path.name == FAMILY_FILE and isinstance(fam, FamilyError) and (
                parent.session.isinitpath(file_path) or not _collects_a_case_file(parent, directory, fam)):
            return file_node(CaseFile, parent, file_path, self.escaped)  # the family's error, no case file carrying it
        if file_path.name == FAMILY_FILE and isinstance(fam, LoadedFamily) and folder_problems(parent, fam):
            return file_node(FamilyFolderProblems, parent, file_path, self.escaped)
        return None  # the family file, or its own rules, tools or prompt file: not a case file


def _collects_a_case_file(parent: pytest.Collector, directory: Path, fam: LoadedFamily | FamilyError) -> bool:
    """Some case file of the family in ``directory`` is collected (not ``--ignore``d)."""
    return any(p.is_file() and is_case_file(p, fam.referenced_files)
               and not parent.ihook.pytest_ignore_collect(collection_path=p, config=parent.config)
               for p in directory.iterdir())


def folder_problems(parent: pytest.Collector, fam: LoadedFamily) -> list[tuple[Path, str, str]]:
    """Why cases of a family's folder would be left out of the run in silence, as ``(path, item name,
    problem line)``: no case file at all (``family has no case file``), or each entry named as a case
    file that is not a regular file (a named pipe, a device or a link to one, a link to nothing; pytest
    collects regular files only), unless ``--ignore``d; never opened, so a pipe never blocks collection.
    """
    try:
        entries = [p for p in sorted(fam.directory.iterdir()) if is_case_file(p, fam.referenced_files)]
    except OSError:  # unreadable: collection of the folder says so
        return []
    if not any(p.is_symlink() or not p.is_dir() for p in entries):
        return [(fam.directory / FAMILY_FILE, "[no case file]",
                 f"{fam.directory}: family {fam.name!r} has no case file (a {', '.join(CASE_SUFFIXES)} file beside "
                 f"{FAMILY_FILE}): none of its cases is collected")]
    out = []
    for p in entries:
        kind = special_kind(p) or ("a symbolic link to nothing" if p.is_symlink() and not p.exists() else None)
        if kind is not None and kind != "a directory" and not parent.ihook.pytest_ignore_collect(
                collection_path=p, config=parent.config):
            out.append((p, "[not a file]", f"{p}: is {kind}, not a case file: a case file is a regular file (its "
                                           "cases are not collected)"))
    return out


class FamilyFolderProblems(pytest.File):
    """A family file whose folder's cases would be left out in silence (:func:`folder_problems`): one
    invalid entry each, naming the file or the folder.
    """

    def collect(self) -> Iterator[pytest.Item]:
        fam = self.config.stash[families_key].load(self.path.parent)
        if not isinstance(fam, LoadedFamily):
            return
        entries = folder_problems(self, fam)
        names = node_names(p.name for p, _, _ in entries)
        for path, what, problem in entries:
            heading = "family has no case file" if what == "[no case file]" else "case file not read"
            yield InvalidCaseItem.from_parent(self, name=f"{names[path.name]}{what}", family=fam.name,
                                              heading=heading, file=path, problems=[problem])


def select_policies(settings: Settings, family: LoadedFamily) -> list[Policy] | str:
    """The policies a family runs under, in the order asked.

    Args:
        settings: the run's settings (``--tooleffect-model``, ``--tooleffect-policy``, pyproject policies).
        family: the family (its own ``policies:``).

    Returns:
        The policies (``[REPLAY]`` when none is asked for), or the reason one cannot be found.
    """
    chosen: list[Policy] = []
    if settings.model == REPLAY.name:
        return "--tooleffect-model replay: 'replay' is the built-in offline policy, not a model"
    if settings.model:
        chosen.append(Policy(name=settings.model, model=settings.model, api_base=settings.api_base))
    chosen += settings.agents
    own = {p.name: p for p in family.family.policies}
    for p in family.family.policies:
        if p.name == REPLAY.name or not p.name:
            return f"policies: {p.name!r}: a named policy needs a name other than 'replay'"
    if len(own) != len(family.family.policies):
        return "policies: two policies share a name"
    for name in settings.policies:
        if name == REPLAY.name:
            chosen.append(REPLAY)
        elif name in own:
            other = settings.pyproject_policies.get(name)
            if other is not None and other != own[name]:  # neither may silently win over the other
                return (f"policy {shown(repr(name))} is defined both in {family.directory / FAMILY_FILE} (policies:) "
                        f"and in [tool.tooleffect.policies.{shown(name)}], differently: give one of them another name")
            chosen.append(own[name])
        elif name in settings.pyproject_policies:
            chosen.append(settings.pyproject_policies[name])
        else:
            known = sorted({REPLAY.name, *own, *settings.pyproject_policies})
            return f"policy {name!r} is not defined for family {family.name} (known: {', '.join(known)})"
    names = [p.name for p in chosen]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:  # one name, two policies: their records would share ids and pool in one block
        return f"policy names given twice ({', '.join(twice)}): every policy of a run needs its own name"
    return chosen or [REPLAY]


class Agents:
    """The agent callable of each agent policy, resolved once per process.

    Args:
        config: pytest's config (its ``pytest_tooleffect_agent`` hook is asked first).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.found: dict[str, Agent | str] = {}
        self.sources: dict[str, str] = {}

    def resolve(self, policy: Policy) -> Agent | str | None:
        """The policy's agent, ``None`` for a model or replay policy, or why it cannot be had."""
        if policy.model or policy is REPLAY or policy.name == REPLAY.name:
            return None
        key = policy.model_dump_json()
        if key not in self.found:
            agent = self.config.hook.pytest_tooleffect_agent(policy=policy, config=self.config)
            self.sources[key] = "pytest_tooleffect_agent" if agent is not None else str(policy.agent)
            if agent is None and policy.agent:
                try:
                    agent = load_agent(policy.agent)
                except AgentError as exc:
                    agent = f"policy {policy.name!r}: agent {exc.message}"
            if agent is None:
                agent = (f"policy {policy.name!r} has no model and no agent, and no pytest_tooleffect_agent hook "
                         "returned one")
            elif not isinstance(agent, str) and not callable(agent):
                agent = (f"policy {policy.name!r}: pytest_tooleffect_agent returned {type(agent).__name__}, "
                         "not a callable")
            self.found[key] = agent
        return self.found[key]

    def source(self, policy: Policy) -> str | None:
        """Where the policy's agent came from: its ``agent`` import path, or ``pytest_tooleffect_agent``."""
        return self.sources.get(policy.model_dump_json())


agents_key = pytest.StashKey[Agents]()


def _unregistered_callables(config: pytest.Config, fam: LoadedFamily) -> FamilyError | None:
    """A family whose rules call a user predicate no ``pytest_tooleffect_predicates`` hook registers
    is refused at collection (not only once some emitted value reaches the predicate).
    """
    wanted = fam.rules.callables()
    if not wanted:
        return None
    registered: set[str] = set()
    for contributed in config.hook.pytest_tooleffect_predicates():
        registered.update(contributed or {})
    missing = [(key, name) for key, name in wanted if name not in registered]
    if not missing:
        return None
    rules = fam.directory / str(fam.family.oracle)
    known = ", ".join(sorted(registered)) or "none"
    return FamilyError("; ".join(
        f"{fam.directory / FAMILY_FILE}: oracle {rules}: {key}: callable predicate {name!r} is not registered by "
        f"any pytest_tooleffect_predicates hook (registered: {known})" for key, name in missing))


class CaseFile(pytest.File):
    """A case file: one item per case × policy × trial, sorted by case id."""

    def collect(self) -> Iterator[pytest.Item]:
        config = self.config
        families = config.stash[families_key]
        fam = families.for_cases(self.path.parent)
        if isinstance(fam, LoadedFamily):
            fam = _unregistered_callables(config, fam) or fam
        if isinstance(fam, LoadedFamily):
            fam = families.counted(fam)
        if isinstance(fam, FamilyError):
            yield InvalidCaseItem.from_parent(self, name="<family>", problems=[str(fam)],
                                              family=self.path.parent.name)
            return
        cases, problems = families.case_refs(self.path, fam)
        by_case: dict[str, list[str]] = {}
        lines: dict[str, int] = {}
        for p in problems:
            key = p.case_id or "<file>"
            by_case.setdefault(key, []).append(str(p))
            if p.line is not None and key != "<file>":
                lines.setdefault(key, p.line)
        names = node_names(sorted(by_case))  # an invalid id may hold anything: pytest prints the name raw
        for cid in sorted(by_case):
            yield InvalidCaseItem.from_parent(self, name=f"{names[cid]}[invalid]", problems=by_case[cid],
                                              family=fam.name, case_id=None if cid == "<file>" else cid,
                                              line=lines.get(cid))
        settings = config.stash[settings_key]
        policies = select_policies(settings, fam)
        if isinstance(policies, str):
            yield InvalidCaseItem.from_parent(self, name="<policy>", problems=[f"{self.path}: {policies}"],
                                              heading="cannot run this family", family=fam.name)
            return
        agents: list[Agent | None] = []
        for policy in policies:
            agent = config.stash[agents_key].resolve(policy)
            if isinstance(agent, str):
                yield InvalidCaseItem.from_parent(self, name="<policy>", problems=[f"{self.path}: {agent}"],
                                                  heading="cannot run this family", family=fam.name)
                return
            agents.append(agent)
        repeats = settings.repeats
        fixtureinfo = None  # the closure of the file's first item, the same for every item of the file
        for case in sorted(cases, key=lambda c: c.id):
            for policy, agent in zip(policies, agents):
                for trial in range(1, repeats + 1):
                    name = item_name(case.id, policy.name, trial, repeats)
                    item = CaseItem.from_parent(self, name=name, callobj=_tooleffect_case, fixtureinfo=fixtureinfo,
                                                case=case, family=fam, policy=policy, trial=trial,
                                                decisions=len(policies) * repeats, agent=agent,
                                                agent_source=config.stash[agents_key].source(policy))
                    fixtureinfo = fixtureinfo or fixture_info(item)
                    self._mark(item, fam, case)
                    yield item

    def _mark(self, item: pytest.Item, fam: LoadedFamily, case: CaseRef) -> None:
        names = [_marker_name("family_", fam.name), _marker_name("bucket_", case.bucket)]
        if case.label_class is not None:
            names.append(case.label_class)
        for name in names:
            item.add_marker(_marker(self.config, name))
        if case.xfail:
            reason = case.xfail if isinstance(case.xfail, str) else "case marked xfail"
            # only the agent's failing decision is the expected failure: a provider error stays an error
            item.add_marker(pytest.mark.xfail(reason=reason, strict=False, raises=DecisionFailed))


def _marker_name(prefix: str, value: str) -> str:
    return prefix + re.sub(r"\W", "_", value)


_markers_key = pytest.StashKey[dict[str, pytest.MarkDecorator]]()


def _marker(config: pytest.Config, name: str) -> pytest.MarkDecorator:
    """One registered marker per name, built once (classes, ``family_*``, ``bucket_*``)."""
    cache = config.stash.setdefault(_markers_key, {})
    if name not in cache:
        if name not in CLASS_MARKERS:
            config.addinivalue_line("markers", f"{name}: tooleffect family or position bucket")
        cache[name] = getattr(pytest.mark, name)
    return cache[name]


def _tooleffect_case() -> None:
    """A case item's test function: its call phase is :meth:`CaseItem.runtest` (it scores the decision)."""


class CaseItem(OneLineFailure, pytest.Function):
    """One case × policy × trial.  Its setup obtains the decision; its call scores it.

    The setup runs the item's fixtures (autouse ones: the function takes none) and then asks the
    decider for the decision; the call hands it to the scorer.  Neither goes through a fixture
    or ``pytest_pyfunc_call``: for a replayed decision pytest's fixture machinery would cost a
    tenth of the item's time.

    The item keeps a :class:`~pytest_tooleffect.collect.cases.CaseRef` from collection on; the case
    itself is read again from its line when the item first needs it (in setup) and let go after
    its teardown (:meth:`release`), so a run holds the cases of the items running, not all of them.

    Attributes:
        ref: what the run keeps of the case (id, class, bucket, label hash, where its line is).
        case: the labelled state (read on first use, see above).
        family: its family (tools, system prompt, rules, sandbox).
        policy: the policy under test.
        trial: 1…K under ``--tooleffect-repeats K``.
        decisions: how many decisions on this case the run scores (policies × repeats).
        agent: the agent callable of an agent policy, else ``None``.
        agent_source: where the agent came from (its import path, or ``pytest_tooleffect_agent``).
    """

    def __init__(self, *, case: CaseRef | Case, family: LoadedFamily, policy: Policy, trial: int = 1,
                 decisions: int = 1, agent: Agent | None = None, agent_source: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        read_back_node_id(self)
        self.ref = case if isinstance(case, CaseRef) else CaseRef.of(case, family=family)
        self._case: Case | None = self.ref.case
        self.family = family
        self.policy = policy
        self.trial = trial
        self.decisions = decisions
        self.agent = agent
        self.agent_source = agent_source if agent is not None else None
        self._decision: Any = None
        self._record_id: str | None = None

    def setup(self) -> None:
        """The item's fixtures, then its decision (a provider, agent or sandbox failure is a setup
        error); under ``--setup-only`` and ``--setup-plan`` (no call phase) the fixtures only.
        """
        super().setup()
        if not self.config.option.setuponly:
            self.decide()

    def decide(self) -> Any:
        """The item's decision (a :class:`~pytest_tooleffect.decide.decision.Decision`), obtained once per setup."""
        if self._decision is None:
            self._decision = self.config.stash[decider_key](self)
        return self._decision

    def runtest(self) -> None:
        """Score the decision made in setup against the case's label (the scorer built at configure)."""
        self.config.stash[scorer_key](self, self.decide())

    @property
    def fixture_request(self) -> pytest.FixtureRequest:
        """The item's fixture request (the sandbox fixture is requested through it in setup)."""
        return fixture_request(self)

    @property
    def case(self) -> Case:
        """The case, read again from its line on first use until :meth:`release`.

        Raises:
            ValueError: its line no longer holds it (the file changed during the run).
        """
        if self._case is None:
            self._case = self.ref.load()
        return self._case

    def release(self) -> None:
        """Let the case and its decision go (after teardown): the case is read again if asked for,
        and a case kept whole stays.
        """
        self._case = self.ref.case
        self._decision = None

    @property
    def record_id(self) -> str:
        """``family/case-id[policy]`` (``[policy:trial]`` with repeats), by :func:`.records.record_id`
        (made on first use: the sharding, the report line and the record each ask for it).
        """
        if self._record_id is None:
            repeats = self.config.stash[settings_key].repeats
            self._record_id = record_id(self.family.name, self.ref.id, self.policy.name, self.trial, repeats)
        return self._record_id

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools offered at this state: the case's own, else the family's."""
        return list(self.case.tools) if self.case.tools is not None else list(self.family.tools)

    @property
    def replay(self) -> bool:
        """The decision is the case's recorded action (no model, no agent)."""
        return self.policy.model is None and self.agent is None

    @property
    def live(self) -> bool:
        """The decision is asked of a model or an agent (a labelled case, not a replay)."""
        return not self.replay and self.ref.label_class is not None

    def reportinfo(self) -> tuple[Path | str, int, str]:
        """The case file (:func:`.nodes.location_path`), the case's line (0-based; 0: not known), the record id."""
        line = self.ref.line
        return location_path(self.path), line - 1 if line else 0, self.record_id

    def failure_line(self, message: str) -> str:
        """A failure raised without a traceback (``pytrace=False``: a failing decision, an error
        outcome) is its one-line reason, the record id (the failure's headline) left out.

        pytest would walk and filter the whole traceback (path lookups per frame) only to print the
        message: thousands of failing decisions made that most of a run's time
        (:class:`~pytest_tooleffect.compat.OneLineFailure`).
        """
        return message.removeprefix(f"{self.record_id}: ")


def invalid_entry(family: str, path: Path, case_id: str | None, problems: Sequence[str]) -> dict[str, Any]:
    """An invalid case as the report lists it: ``{family, file, case_id, problems}`` (JSON values;
    ``case_id`` ``None`` for a problem of the file, the family or its policies).
    """
    return {"family": family, "file": str(path), "case_id": case_id, "problems": list(problems)}


class InvalidCaseItem(pytest.Item):
    """Stands for a case (or file) that failed validation: an error outcome naming the problems.

    Its test report carries :meth:`entry` to the controller, so the report lists it (scoring rule 7:
    nothing collected disappears from the report).

    Attributes:
        problems: one line per problem, each naming the file, the case id and the field.
        heading: the error's first line.
        family: the family's name (its folder's name when the family file itself is invalid).
        case_id: the invalid case's id; ``None`` for a problem of the file, the family or its policies.
        line: the case's line in its file (1-based), when known.
        file: the file the entry is about (default: the item's own file).
    """

    def __init__(self, *, problems: list[str], heading: str = "invalid case", family: str = "",
                 case_id: str | None = None, line: int | None = None, file: Path | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        read_back_node_id(self)
        self.problems = problems
        self.heading = heading
        self.family = family or self.path.parent.name
        self.case_id = case_id
        self.line = line
        self.file = file or self.path

    def entry(self) -> dict[str, Any]:
        """What the report lists: :func:`invalid_entry` of this item."""
        return invalid_entry(self.family, self.file, self.case_id, self.problems)

    def setup(self) -> None:
        pytest.fail(f"{self.heading}:\n" + "\n".join(self.problems), pytrace=False)

    def runtest(self) -> None:  # pragma: no cover - setup always fails
        pytest.fail("invalid case", pytrace=False)

    def reportinfo(self) -> tuple[Path | str, int, str]:
        """The case file (:func:`.nodes.location_path`), the invalid case's line (0-based; 0 for the
        file's or the family's own problem) and the item's name.
        """
        return location_path(self.path), self.line - 1 if self.line else 0, f"{self.name} (invalid)"
