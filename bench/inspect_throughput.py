"""inspect-ai's side of bench/throughput.py: the same decisions, one model call per sample.

Runs in its own environment (``.venv-inspect``, inspect-ai pinned in the Makefile), started by
bench/throughput.py with the requests it built from the BFCL cases (a JSON file of
``{"messages", "tools"}`` objects), the endpoint and the concurrency.  Each sample is one
``Model.generate`` call with the case's messages and tools (no tool execution, no loop), through
inspect-ai's OpenAI-compatible provider (``openai-api/bench/bench``, ``BENCH_BASE_URL``).

Prints one JSON line: ``samples``, ``errors``, ``eval_wall_s`` (the ``eval()`` call) and
``eval_cpu_s`` (this process's CPU time during it).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("requests", type=Path)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--max-tokens", type=int, default=None, help="the output cap each request carries")
    ap.add_argument("--model", default="bench", help="the model name sent to the endpoint")
    args = ap.parse_args()
    os.environ["BENCH_BASE_URL"] = args.base_url
    os.environ["BENCH_API_KEY"] = "unused-local-key"

    import asyncio

    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import get_model, messages_from_openai
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.tool import ToolInfo, ToolParams

    requests = json.loads(args.requests.read_text())
    samples = []
    for n, req in enumerate(requests):
        # the whole conversation as the agent saw it (assistant turns with tool calls, tool results):
        # inspect-ai's own reader of OpenAI chat messages
        messages = asyncio.run(messages_from_openai(req["messages"]))
        samples.append(Sample(input=messages, id=n, metadata={"tools": req["tools"]}))

    @solver
    def decide() -> object:
        """One model turn with the case's tools offered; the emitted call is kept, not executed."""

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            tools = [ToolInfo(name=t["function"]["name"], description=t["function"].get("description") or "",
                              parameters=ToolParams.model_validate(t["function"]["parameters"]))
                     for t in state.metadata["tools"]]
            state.output = await get_model().generate(state.messages, tools=tools)
            state.messages.append(state.output.message)
            return state

        return solve

    task = Task(dataset=MemoryDataset(samples), solver=decide())
    with tempfile.TemporaryDirectory() as logs:
        t0, c0 = time.perf_counter(), time.process_time()
        config = {"max_tokens": args.max_tokens, "temperature": 0.0} if args.max_tokens else {}
        (log,) = eval(task, model=f"openai-api/bench/{args.model}", log_dir=logs, display="none", **config,
                      max_connections=args.concurrency, max_samples=args.concurrency, max_retries=0,
                      timeout=int(args.timeout), fail_on_error=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = log.samples or []
        errors = sum(1 for s in done if s.error is not None)
        calls = sum(1 for s in done if s.output and s.output.message.tool_calls)
    print(json.dumps({"status": log.status, "samples": len(done), "errors": errors, "tool_calls": calls,
                      "eval_wall_s": wall, "eval_cpu_s": cpu}))


if __name__ == "__main__":
    main()
