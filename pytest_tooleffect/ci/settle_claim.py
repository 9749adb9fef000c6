"""Which run a shared sequential tally belongs to: a settle key reused by another run is refused.

A sequential gate shared through Redis keeps its tally under ``--tooleffect-settle-key``
(:class:`~pytest_tooleffect.ci.sequential_state.RedisSettleStore`); every shard of one run gives
the same key.  A key that an earlier run used holds that run's tally: a later run reading it
would skip every item as that run's verdict says (``sequential budget spent, not settled``)
without having decided anything.  So the tally says which run started it, in a claim written
beside the counts (the hash field :data:`CLAIM_FIELD`):

- ``run``: what every shard of one run shares, known at configure time: the shard count, the
  baseline's digest, the policies' identities
  (:func:`~pytest_tooleffect.formats.policy_identity`), the case paths and ``-k``/``-m``
  expressions, as one digest (``run_digest``) and in words;
- ``shards``: the shards (``0`` for an unsharded run) that joined it, with the run id of the first;
- ``started``: when the first joined (UTC).

A process that configures a run (the xdist controller, or the only process; workers share their
controller's claim) joins the tally when it holds no claim and no count, or a claim of the same
``run`` that its shard has not joined yet; it is refused, before any item, when the claim is of
another run, its shard joined already (the same command run again under the key: another run),
or the key holds counts with no claim (a tally of an earlier tooleffect).  With
``--tooleffect-settle-reset`` a shard that would be refused deletes what the key held and claims it
anew (a shard that would join does join, so every shard of the new run may be given it).  One Lua
script does the check and the claim in one atomic step.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from pytest_tooleffect.formats import Policy, policy_identity
from pytest_tooleffect.settings import settings_key

if TYPE_CHECKING:
    from pytest_tooleffect.ci.baseline import Baseline
    from pytest_tooleffect.ci.sequential_state import RedisSettleStore

__all__ = ["CLAIM_FIELD", "SettleKeyTaken", "claim", "claim_for_run", "run_identity"]

#: the hash field of the tally's claim (no block is named so: a block is ``family/policy``)
CLAIM_FIELD = "run|claim"

_CLAIM = """
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local shard = tonumber(ARGV[3])
local taken = false
if not cur then
  if redis.call('HLEN', KEYS[1]) > 0 then
    taken = 'unclaimed'
  end
else
  local c = cjson.decode(cur)
  if c['run_digest'] ~= ARGV[2] then
    taken = cur
  else
    for _, s in ipairs(c['shards']) do
      if s == shard then
        taken = cur
      end
    end
  end
end
if taken then
  if ARGV[5] ~= '1' then
    return taken
  end
  redis.call('DEL', KEYS[1])
  cur = false
end
if not cur then
  local c = cjson.decode(ARGV[4])
  c['shards'] = {shard}
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
  redis.call('EXPIRE', KEYS[1], ARGV[6])
  return 'ok'
end
local c = cjson.decode(cur)
table.insert(c['shards'], shard)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
return 'ok'
"""


class SettleKeyTaken(Exception):
    """The settle key holds another run's tally (the message is the one line to show)."""


def run_identity(*, shard_count: int, baseline_digest: str | None, policies: list[Policy], agent_hook: bool,
                 selection: list[str]) -> dict[str, Any]:
    """What every shard of one run shares, known at configure time.

    Args:
        shard_count: ``N`` of ``--tooleffect-shard I/N``, ``0`` unsharded.
        baseline_digest: the baseline's digest (16 hex digits), or ``None`` without one.
        policies: the run's policies (agents, named policies, the model).
        agent_hook: a ``pytest_tooleffect_agent`` hook gives agents.
        selection: the case paths and selection expressions (``-k``, ``-m``) as given.

    Returns:
        ``{"run_digest": 16 hex digits, "run": words}``.
    """
    specs = sorted(f"{p.name}={policy_identity(p, 'pytest_tooleffect_agent' if agent_hook else None)[1]}"
                   for p in policies)
    what = {"shards": shard_count, "baseline": baseline_digest, "policies": specs, "selection": selection}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]
    words = (f"{shard_count or 'no'} shards, baseline {baseline_digest or 'none'}, policies "
             f"{', '.join(p.name for p in policies) or 'replay'}, selection {' '.join(selection) or '(all)'}")
    return {"run_digest": digest, "run": words}


def claim(client: Any, key: str, shown: str, settle_key: str, *, identity: dict[str, Any], shard: int,
          run_id: str, reset: bool, ttl_s: int) -> None:
    """Join the tally under ``key`` as ``shard`` of the run ``identity`` names, or refuse.

    Args:
        client: a ``redis.Redis`` client.
        key: the tally's Redis key (``tooleffect:settle:NAME:KEY``).
        shown: the Redis URL without its password (for the message).
        settle_key: ``--tooleffect-settle-key`` as given (for the message).
        identity: :func:`run_identity`'s.
        shard: this shard's index, ``0`` unsharded.
        run_id: this run's id (kept as the first claimant's).
        reset: ``--tooleffect-settle-reset``: delete what the key held first.
        ttl_s: the tally's expiry, seconds.

    Raises:
        SettleKeyTaken: the key holds an earlier run's tally (one line naming the key and that run).
    """
    new = {**identity, "run_id": run_id, "started": datetime.now(UTC).isoformat(timespec="seconds")}
    answer = client.eval(_CLAIM, 1, key, CLAIM_FIELD, identity["run_digest"], shard, json.dumps(new),
                         "1" if reset else "0", ttl_s)
    text = answer.decode() if isinstance(answer, bytes) else str(answer)
    if text == "ok":
        return
    fix = ("give this run a new key (the CI's run id and attempt), or --tooleffect-settle-reset to drop the earlier "
           "tally and start again")
    if text == "unclaimed":
        raise SettleKeyTaken(f"--tooleffect-settle-key {settle_key}: {shown} already holds a sequential tally under "
                             f"it, of an earlier run that did not say which it was; {fix}")
    earlier = json.loads(text)
    again = (" (its shard " + (f"{shard}" if shard else "of an unsharded run") + " ran under this key already)"
             if earlier.get("run_digest") == identity["run_digest"] else "")
    raise SettleKeyTaken(f"--tooleffect-settle-key {settle_key}: {shown} already holds the tally of an earlier run "
                         f"{earlier.get('run_id')} started {earlier.get('started')} ({earlier.get('run')}; shards "
                         f"{', '.join(map(str, earlier.get('shards', []))) or '-'}){again}; {fix}")


def claim_for_run(config: pytest.Config, store: RedisSettleStore, baseline: Baseline | None) -> None:
    """Claim the run's settle key in ``store`` (:func:`claim`) for the run ``config`` starts.

    A Redis that cannot be reached is not refused here: every decision's count fails as well, and
    the gate is then NOT SETTLED (never a pass).

    Raises:
        pytest.UsageError: the key holds an earlier run's tally (:class:`SettleKeyTaken`'s line).
    """
    from pytest_tooleffect.ci.sequential_state import REDIS_TTL_S

    settings = config.stash[settings_key]
    named = [settings.pyproject_policies[n] for n in settings.policies if n in settings.pyproject_policies]
    model = [Policy(name=settings.model, model=settings.model, api_base=settings.api_base)] if settings.model else []
    option = config.option
    selection = [str(a) for a in config.args] + [f"{flag} {value}" for flag, value in (
        ("-k", getattr(option, "keyword", "")), ("-m", getattr(option, "markexpr", ""))) if value]
    if getattr(option, "lf", False):
        selection.append("--lf")
    digest = baseline.digest if baseline is not None else None
    run_id = settings.sandbox.run_id if settings.sandbox else uuid.uuid4().hex
    identity = run_identity(shard_count=settings.shard[1] if settings.shard else 0, baseline_digest=digest,
                            policies=[*settings.agents, *named, *model], agent_hook=False, selection=selection)
    try:
        claim(store.client, store.key, store.shown, settings.settle_key or "", identity=identity,
              shard=settings.shard[0] if settings.shard else 0, run_id=run_id,
              reset=settings.settle_reset, ttl_s=REDIS_TTL_S)
    except SettleKeyTaken as exc:
        raise pytest.UsageError(str(exc)) from None
    except store.errors:  # Redis unreachable: each decision's count fails too, and the gate is NOT SETTLED
        return
