"""Perturbed-catalog variants as items: each case × perturbation is its own item beside the original
(``docs/robustness.md``).

A case file's items are collected as usual (:mod:`.items`); then, for every labelled case with no
sandbox world, each variant of the family's ``perturbations:`` and of ``--tooleffect-perturb``
adds a :class:`PerturbedItem` right after the original's.  Its policy is the original's under the
name ``POLICY+VARIANT`` (``replay+shuffle``, ``gpt-4o+scale-32``): node ids, record ids, report
blocks, baselines, gates and shards treat it as any other item.  Its record carries a
``perturbation`` section naming the original, which the report's robustness section pairs it with.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_tooleffect.collect.cases import label_hash
from pytest_tooleffect.collect.family import FAMILY_FILE, LoadedFamily, error_location, family_dirs
from pytest_tooleffect.collect.ids import VARIANT_SEPARATOR, item_name, variant_policy
from pytest_tooleffect.collect.items import CaseFile, CaseItem, InvalidCaseItem, families_key
from pytest_tooleffect.collect.perturb import Perturbed, PerturbError, perturb
from pytest_tooleffect.formats import Case, ToolSpec
from pytest_tooleffect.formats.perturb import PerturbationSpec
from pytest_tooleffect.options import OPT_PERTURB
from pytest_tooleffect.oracle.emission import Call, Emission
from pytest_tooleffect.settings import settings_key
from pytest_tooleffect.util.input_files import read_input_text
from pytest_tooleffect.util.jsonl import RepeatedKey, loads

__all__ = ["HIDDEN_NAME", "NO_VARIANTS_IN_A_WORLD", "PerturbedItem", "Perturber", "PoolFileError", "cost_line",
           "load_pool", "no_variants_key", "scored_emission", "scored_tools", "unknown_names"]


#: why a family whose labelled cases all run in a sandbox world got no variant
NO_VARIANTS_IN_A_WORLD = ("its {n} labelled case{s} run in a sandbox world, which runs calls by the tools' names: "
                          "a perturbed catalog is not offered there, so no variant of it was made")
#: the families of this run that asked for perturbations and got no variant, each with why
no_variants_key = pytest.StashKey[dict[str, str]]()


class PerturbedItem(CaseItem):
    """One case × policy × trial under one perturbed catalog.

    The agent is offered :attr:`perturbed`'s tools (renamed ones under their new names); its calls
    are mapped back to the original names and scored against the perturbed label with the
    catalog under its original names (:func:`scored_tools`, :func:`scored_emission`).

    Attributes:
        spec: the perturbation.
        variant: the variant's name (``shuffle``, ``scale-32``).
        size: a ``scale`` variant's nominal catalog size.
        perturbed: the catalog and label of this case under the variant.
        base_policy: the original policy's name.
        base_class: the original label's class.
        original_size: the tools the original catalog offers at the state.
    """

    def __init__(self, *, spec: PerturbationSpec, variant: str, size: int | None, perturbed: Perturbed,
                 base_policy: str, base_class: str, original_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.original_size = original_size
        self.spec, self.variant, self.size, self.perturbed = spec, variant, size, perturbed
        self.base_policy, self.base_class = base_policy, base_class
        self._scored_case: Case | None = None

    @property
    def tools(self) -> list[ToolSpec]:
        """The catalog offered to the agent (under the names offered)."""
        return list(self.perturbed.tools)

    @property
    def original_named_tools(self) -> list[ToolSpec]:
        """The catalog offered, each tool under its original name (what calls are scored against)."""
        back = self.perturbed.back
        return [t.model_copy(update={"name": back[t.name]}) if t.name in back else t for t in self.perturbed.tools]

    @property
    def case(self) -> Case:
        """The case with the perturbed label and the offered catalog under its original names."""
        if self._scored_case is None:
            base = super().case
            self._scored_case = base.model_copy(update={"label": self.perturbed.label,
                                                        "tools": self.original_named_tools})
        return self._scored_case

    def release(self) -> None:
        super().release()
        self._scored_case = None


def scored_tools(item: CaseItem) -> list[ToolSpec]:
    """The tools an item's decision is scored against: the offered ones, under their original names."""
    return item.original_named_tools if isinstance(item, PerturbedItem) else item.tools


#: what a call by a renamed tool's original name is scored as: a name the variant did not offer
HIDDEN_NAME = "{name} (its original name: not offered under rename)"


def scored_emission(item: CaseItem, emission: Emission) -> Emission:
    """The decision's calls under the original tool names (a renamed catalog's calls mapped back).

    Only a name the variant offered is mapped back: a call by a renamed tool's original name (which
    the agent was not offered) is scored as a call to a tool not offered, under :data:`HIDDEN_NAME`.
    """
    if not isinstance(item, PerturbedItem) or not item.perturbed.back:
        return emission
    back = item.perturbed.back
    hidden = set(back.values())

    def mapped(name: str) -> str:
        if name in back:
            return back[name]
        return HIDDEN_NAME.format(name=name) if name in hidden else name

    return Emission(calls=tuple(Call(mapped(c.name), c.args) for c in emission.calls),
                    malformed=emission.malformed,
                    malformed_names=tuple(mapped(n) for n in emission.malformed_names),
                    text=emission.text, invented_results=emission.invented_results,
                    malformed_raw=emission.malformed_raw)


class PoolFileError(PerturbError):
    """A perturbation's pool file cannot be read: the family's error, not one case's."""


def load_pool(directory: Path, files: Iterable[str]) -> list[ToolSpec]:
    """Tools from ``files`` (relative to the family folder): a JSON list of tool specs, or BFCL's
    JSON Lines (each line's ``function`` list; BFCL's ``dict``, ``float`` and ``tuple``
    types read as JSON Schema's ``object``, ``number`` and ``array``).

    Each file is read as a case file is (:func:`~pytest_tooleffect.util.input_files.read_input_text`
    with ``pipes=False``): a folder, a device (``/dev/zero``), a socket or a named pipe is refused
    unread, and a file larger than the input limit (1 GiB, ``TOOLEFFECT_MAX_INPUT_BYTES``) too.

    Raises:
        PerturbError: a file cannot be read or holds no tool specs (the message names it).
    """
    out: list[ToolSpec] = []
    for name in files:
        path = directory / name
        try:
            text = read_input_text(path, pipes=False)
            try:
                specs: list[Any] = loads(text)
            except RepeatedKey:
                raise
            except ValueError:
                specs = [f for line in text.splitlines() if line.strip() for f in loads(line).get("function", [])]
            out.extend(ToolSpec.model_validate(_object_types(s)) for s in specs)
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            raise PerturbError(f"pool file {path}: {type(exc).__name__}: {exc}") from exc
    return out


#: BFCL's Python type names as JSON Schema's (as ``tooleffect import bfcl`` reads them): a provider refuses the rest
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def _object_types(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (_BFCL_TYPES.get(v, v) if k == "type" and isinstance(v, str) else _object_types(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_object_types(v) for v in value]
    return value


class Perturber:
    """The plugin object that adds the variants of each case file's items.

    Args:
        config: pytest's config (``--tooleffect-perturb``).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.cli: list[PerturbationSpec] = list(config.getoption(OPT_PERTURB, None) or [])
        self._pools: dict[tuple[str, tuple[str, ...]], list[ToolSpec] | PerturbError] = {}
        self._said = False
        self._specs: dict[str, list[PerturbationSpec] | str] = {}
        #: per family: the tools its labelled cases offer, its case ids, and its last case file
        self._seen: dict[str, tuple[LoadedFamily, set[str], set[str], list[CaseFile]]] = {}
        self._in_world: dict[str, int] = {}  # per family: the labelled cases skipped for their sandbox world
        self._made: set[str] = set()  # the families some variant was made of
        self.no_variants: dict[str, str] = config.stash.setdefault(no_variants_key, {})

    def specs(self, fam: LoadedFamily) -> list[PerturbationSpec] | str:
        """The family's perturbations then the command line's, or why two of them share a variant name
        (worked out once per family).
        """
        if fam.name not in self._specs:
            self._specs[fam.name] = self._specs_of(fam)
        return self._specs[fam.name]

    def _specs_of(self, fam: LoadedFamily) -> list[PerturbationSpec] | str:
        out: list[PerturbationSpec] = []
        for spec in [*fam.family.perturbations, *self.cli]:
            if spec not in out:
                out.append(spec)
        names = [v for s in out for v, _ in s.variants()]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            return (f"{fam.directory / FAMILY_FILE}: perturbations: variant names given twice ({', '.join(twice)}): "
                    "give one of them a name")
        return out

    def pool(self, fam: LoadedFamily) -> list[ToolSpec] | PerturbError:
        """The unrelated pool: the tools of the other families in the folders beside the family's
        (``cases/*``: the other shipped families, whether this run collects them or not), in folder
        order, then the tools of the family's ``pool_files``.
        """
        files = tuple(f for s in fam.family.perturbations for f in s.pool_files)
        key = (fam.name, files)
        if key not in self._pools:
            families = self.config.stash[families_key]
            others: list[ToolSpec] = []
            for directory in family_dirs([fam.directory.parent]):
                other = families.load(directory)
                if isinstance(other, LoadedFamily) and other.name != fam.name:
                    others.extend(other.tools)
            found: list[ToolSpec] | PerturbError = others
            for k, spec in enumerate(fam.family.perturbations):
                try:
                    others.extend(load_pool(fam.directory, spec.pool_files))
                except PerturbError as exc:
                    found = PoolFileError(f"{fam.directory / FAMILY_FILE}: perturbations[{k}] "
                                          f"({spec.name or spec.kind}): {exc}")
                    break
            self._pools[key] = found
        return self._pools[key]

    def _pools_of(self, spec: PerturbationSpec, fam: LoadedFamily) -> tuple[list[ToolSpec], list[ToolSpec]]:
        """The unrelated and the same-domain pool a perturbation draws from (empty when it draws from none).

        Raises:
            PerturbError: a pool file cannot be read.
            ValueError: a near-miss tool of ``tools:`` is not a tool spec.
        """
        if spec.kind not in ("distractors", "scale"):
            return [], []
        if spec.pool == "same-domain":
            return [], [ToolSpec.model_validate(t) for t in spec.tools] or list(fam.tools)
        found = self.pool(fam)
        if isinstance(found, PerturbError):
            raise found
        return found, []

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        """After a case file is collected, its variants follow each original item."""
        report = yield
        if isinstance(collector, CaseFile) and report.passed and report.result:
            report.result = list(self._expand(collector, report.result))
        return report

    def _expand(self, collector: CaseFile, items: Sequence[Any]) -> Iterable[Any]:
        problems: list[str] = []
        for item in items:
            yield item
            if not isinstance(item, CaseItem) or isinstance(item, PerturbedItem):
                continue
            specs = self.specs(item.family)
            if isinstance(specs, str):
                if specs not in problems:
                    problems.append(specs)
                continue
            if any(s.rewrites or s.labels for s in specs):  # what names a tool or a case is checked at the end
                fam = item.family
                _, _, ids, files = self._seen.setdefault(fam.name, (fam, set(), set(), []))
                ids.add(item.ref.id)
                if collector not in files:
                    files.append(collector)
            yield from self._variants(collector, item, specs, problems)
        if problems:  # the run goes on: one entry names every case and variant that could not be made
            family = next((i.family.name for i in items if isinstance(i, CaseItem)), "")
            yield InvalidCaseItem.from_parent(collector, name="<perturbation>", problems=problems,
                                              heading="perturbation not applied", family=family)

    def _variants(self, collector: CaseFile, item: CaseItem, specs: list[PerturbationSpec],
                  problems: list[str]) -> Iterable[PerturbedItem]:
        if not specs or item.ref.label_class is None:
            return
        case = item.case
        if item.family.name in self._seen:
            self._seen[item.family.name][1].update(t.name for t in item.tools)
        if case.label is None or case.world is not None:  # a sandbox runs calls by name: no variant
            if case.world is not None and case.label is not None:
                self._in_world[item.family.name] = self._in_world.get(item.family.name, 0) + 1
            item.release()
            return
        fam = item.family
        settings = self.config.stash[settings_key]
        for spec in specs:
            for variant, size in spec.variants():
                try:
                    pool, same = self._pools_of(spec, fam)
                    perturbed = perturb(spec, variant, size, case.id, item.tools, case.label, pool, same)
                except PoolFileError as exc:  # the family's error: said once, not per case
                    if str(exc) not in problems:
                        problems.append(str(exc))
                    continue
                except (PerturbError, ValueError) as exc:
                    why = ("; ".join(f"{error_location(e['loc'])}: {e['msg']}" for e in exc.errors())
                           if isinstance(exc, ValidationError) else str(exc))
                    problem = f"{item.path}: case {case.id}: perturbation {variant}: {why}"
                    if problem not in problems:  # once, whatever the policies and trials
                        problems.append(problem)
                    continue
                if perturbed is None:
                    continue
                policy = item.policy.model_copy(update={"name": variant_policy(item.policy.name, variant)})
                digest = hashlib.sha256(json.dumps([label_hash(perturbed.label), [t.name for t in perturbed.tools]]
                                                   ).encode()).hexdigest()[:16]
                ref = replace(item.ref, label_class=perturbed.label.label_class, label_hash=digest)
                new = PerturbedItem.from_parent(
                    collector, name=item_name(case.id, policy.name, item.trial, settings.repeats), callobj=item.obj,
                    case=ref, family=fam, policy=policy, trial=item.trial, decisions=item.decisions, agent=item.agent,
                    agent_source=item.agent_source, spec=spec, variant=variant, size=size, perturbed=perturbed,
                    base_policy=item.policy.name, base_class=item.ref.label_class,
                    original_size=len(item.tools))
                self._made.add(fam.name)
                for mark in item.own_markers:  # class, family, bucket, xfail: as the original's
                    new.own_markers.append(mark)
                    new.keywords[mark.name] = mark
                yield new
        item.release()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """After collection: a ``describe`` rewrite for a tool no case offers, or a ``remove-valid`` label
        for a case the family does not hold, is an error entry naming the family file, the
        perturbation and the name (else the rewrite or the label would be ignored without a word).
        """
        for name, n in self._in_world.items():
            if name not in self._made:
                self.no_variants[name] = NO_VARIANTS_IN_A_WORLD.format(n=n, s="s" if n != 1 else "")
        for name, (fam, offered, ids, files) in self._seen.items():
            problems = unknown_names(fam, offered, ids)
            if problems:
                items.append(InvalidCaseItem.from_parent(files[-1], name="<perturbation names>", problems=problems,
                                                         heading="perturbation names what the family lacks",
                                                         family=name))

    def pytest_report_collectionfinish(self, config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
        """Before a live run starts: the model turns the variants add, and what they do to prefix caching."""
        variants = sorted({i.variant for i in items if isinstance(i, PerturbedItem) and not i.replay})
        added = sum(1 for i in items if isinstance(i, PerturbedItem) and not i.replay)
        originals = sum(1 for i in items if isinstance(i, CaseItem) and not isinstance(i, PerturbedItem)
                        and not i.replay)
        lines = [cost_line(added, originals, variants)] if added else []
        return lines + [f"tooleffect: perturbations: no variant of family {name}: {why}"
                        for name, why in sorted(self.no_variants.items())]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        """Under ``-n``, the controller collects nothing: the line is said from the first worker's node ids."""
        if self._said or not self.config.stash[settings_key].live:
            return
        self._said = True
        found = [m for m in map(_VARIANT_ID.search, ids) if m is not None]
        if not found:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(cost_line(len(found), len(ids) - len(found), sorted({m[1] for m in found})))


def unknown_names(fam: LoadedFamily, offered: set[str], ids: set[str]) -> list[str]:
    """The family's perturbations' ``rewrites`` for tools none of its labelled cases offers and
    ``labels`` for case ids it does not hold, one line each naming ``family.yaml``, the perturbation
    and the name.
    """
    out: list[str] = []
    where = fam.directory / FAMILY_FILE
    for k, spec in enumerate(fam.family.perturbations):
        what = f"{where}: perturbations[{k}] ({spec.name or spec.kind})"
        for tool in sorted(set(spec.rewrites) - offered if spec.kind == "describe" and spec.rule == "family"
                           else ()):
            out.append(f"{what}: rewrites.{tool}: no case of the family offers a tool {tool!r} "
                       f"(offered: {', '.join(sorted(offered)) or 'none'})")
        for case_id in sorted(set(spec.labels) - ids):
            out.append(f"{what}: labels.{case_id}: the family has no case {case_id!r}")
    return out


#: a variant's node id ends ``[policy+VARIANT]`` (or ``[policy+VARIANT:trial]``)
_VARIANT_ID = re.compile(rf"\[[^\]]*{re.escape(VARIANT_SEPARATOR)}([^\]:]+)(?::\d+)?\]$")


def cost_line(added: int, originals: int, variants: Sequence[str]) -> str:
    """The line a live run prints before it starts: the model turns the variants add and what they do to a
    provider's prefix cache (a catalog at the head of the prompt that changes, or is reordered, misses it).
    """
    return (f"tooleffect: perturbations add {added} model turns to {originals} ({len(variants)} variants: "
            f"{', '.join(variants)}); each variant changes the tool catalog at the head of the prompt (a shuffled "
            "one reorders it), so a provider's prefix cache serves none of its turns")
