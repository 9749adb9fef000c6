"""The names that cross between xdist's controller and its workers, each defined once.

Three channels carry the plugin's data between processes (``docs/design.md``, "xdist-safe by
construction"): the controller hands every worker a ``workerinput`` mapping before it starts
(:func:`pytest_configure_node` hooks write it, the worker reads ``config.workerinput``), a
worker's :class:`pytest.TestReport` is serialised back with its ``__dict__``, so an attribute set
on it on the worker is an attribute of the report the controller logs, and a worker's
``workeroutput`` mapping reaches the controller when the worker finishes (``node.workeroutput``
in ``pytest_testnodedown``).  Every key of the first and the third and every attribute of the
second is a constant here; the modules that write and read them import it.
The plugin puts nothing in ``TestReport.user_properties``.
"""

from __future__ import annotations

__all__ = [
    "REPORT_ATTRIBUTES", "REPORT_FAMILY", "REPORT_INVALID", "REPORT_KEPT", "REPORT_POLICY", "REPORT_RECORD",
    "REPORT_SKIPPED", "WORKER_CHUNKED", "WORKER_COUNT", "WORKER_ID", "WORKER_INPUT_KEYS", "WORKER_LEFT_THREADS",
    "WORKER_ORDER", "WORKER_OUTPUT_KEYS", "WORKER_OWNER_PID", "WORKER_RATE_STATE", "WORKER_RUN_ID", "WORKER_SCOPE",
    "WORKER_SETTLE_STATE",
]

# --------------------------------------------------------------- workerinput (controller → worker)

#: the run's id (a hex string), labelled on every sandbox container of the run
WORKER_RUN_ID = "tooleffect_run_id"
#: the pid of the process that owns the run (the controller), an int
WORKER_OWNER_PID = "tooleffect_owner_pid"
#: the path (a string) of the rate limiter's state file the controller created
WORKER_RATE_STATE = "tooleffect_rate_state"
#: whether the controller hands this worker whole chunks of items (a bool; :mod:`.collect.chunks`)
WORKER_CHUNKED = "tooleffect_chunked"
#: the path (a string) of the sequential gates' tally file the controller created (:mod:`.ci.sequential_state`)
WORKER_SETTLE_STATE = "tooleffect_settle_state"
#: pytest-xdist's own key: the worker's id (``gw0``, ``gw1``, …)
WORKER_ID = "workerid"
#: pytest-xdist's own key: how many workers the run has
WORKER_COUNT = "workercount"

#: the plugin's own ``workerinput`` keys
WORKER_INPUT_KEYS = (WORKER_RUN_ID, WORKER_OWNER_PID, WORKER_RATE_STATE, WORKER_CHUNKED, WORKER_SETTLE_STATE)

# ------------------------------------------------------------------ workeroutput (worker → controller)

#: the threads agents started that were still running when the worker finished: a list of strings
#: (``'name' (started during a turn of module.function)``), when there are any
WORKER_LEFT_THREADS = "tooleffect_left_threads"

#: what the worker's collection selected by family × policy and class (``RunScope.to_json()`` of
#: :mod:`pytest_tooleffect.collect.scope`), for the gates
WORKER_SCOPE = "tooleffect_scope"

#: the order the worker's collection took its case items in (``RunOrder`` of
#: :mod:`pytest_tooleffect.report.sequential_model`, as JSON), when a sequential gate is set
WORKER_ORDER = "tooleffect_order"

#: the plugin's own ``workeroutput`` keys
WORKER_OUTPUT_KEYS = (WORKER_LEFT_THREADS, WORKER_SCOPE, WORKER_ORDER)

# ------------------------------------------------------------ TestReport attributes (worker → controller)

#: the item's record as JSON text (one object: :meth:`~pytest_tooleffect.scoring.record.Record.to_json_text`),
#: on its setup or call report
REPORT_RECORD = "tooleffect_record"
#: ``{name, meta, directory}`` of the item's family, on the first report of that family from a process
REPORT_FAMILY = "tooleffect_family"
#: ``{name, params}`` of the item's policy, on the first report of that policy from a process
REPORT_POLICY = "tooleffect_policy"
#: an invalid case's entry ``{family, file, case_id, problems}``, on its setup report
REPORT_INVALID = "tooleffect_invalid"
#: a skipped item's ``{id, family, policy, reason}``, on its setup report
REPORT_SKIPPED = "tooleffect_skipped"
#: how to reach a sandbox kept for inspection (a string), on the item's teardown report
REPORT_KEPT = "tooleffect_kept"

#: every attribute the plugin sets on a test report
REPORT_ATTRIBUTES = (REPORT_RECORD, REPORT_FAMILY, REPORT_POLICY, REPORT_INVALID, REPORT_SKIPPED, REPORT_KEPT)
