"""The shared JSON reader (:func:`pytest_tooleffect.util.jsonl.loads`: refuses ``NaN`` and a key given
twice) against ``json.loads``, the peer it replaces, measured in the same run.

1. A record log of ``--lines`` records (a real record of the shipped ``tau-airline`` family,
   its id varied): each line parsed by ``json.loads``, by ``loads``, and the whole file read by
   :func:`~pytest_tooleffect.util.jsonl.json_lines` against a plain loop of ``json.loads`` over its lines.
2. The shipped ``tau-airline`` case lines: ``Case.model_validate_json`` (pydantic's own JSON
   parser, which keeps the last of a repeated key) against ``Case.model_validate(loads(line))``,
   what collection does now.

Prints seconds and the ratio (ours ÷ the peer; 1.0 is the same speed), best of ``--repeat``.

    python bench/json_reader.py [--lines 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_tooleffect.formats import Case  # noqa: E402
from pytest_tooleffect.util.jsonl import json_lines, loads  # noqa: E402

RECORD = {"agent": None, "bucket": "first", "case_id": "c", "class": "single", "cost": {
    "cost_usd": 0.0012, "input_tokens": 812, "latency_ms": 431.2, "output_tokens": 31}, "error": None,
    "family": "tau-airline", "fingerprints": {"labels": "a1ff9b7a2533749c", "rules": "c9d3087bb6148d1d"},
    "id": "tau-airline/c[p]", "label_hash": "7a0785a7d9a58d22", "model": "openai/x", "no_tool_failure": None,
    "outcome": "scored", "policy": "p", "policy_identity": {"spec": "model openai/x", "digest": "0fc871bdfbe67bf9"},
    "run_length": 9, "selection": {"collected": 50000, "count": 50000, "digest": "985966c936f937f4",
                                   "run_count": 50000, "run_digest": "985966c936f937f4"},
    "source": {"kind": "tau-bench"}, "step": 0, "trial": 1, "verdict": {
        "approximate": False, "emitted": [{"args": {"reservation_id": "ABC123"}, "tool": "get_reservation_details"}],
        "fields": [{"expected": "ABC123", "got": "ABC123", "ok": True, "path": "get_reservation_details.reservation_id",
                    "rule": "raw"}], "forbidden": None, "hallucinated": [], "kind": "ok", "malformed": [],
        "malformed_raw": [], "matched": {"args": {"reservation_id": "ABC123"}, "tool": "get_reservation_details"},
        "name_args_ok": True, "name_ok": True, "phantom": None, "reply": None, "reply_text": None, "unruled": []},
    "version": 1, "xfail": False}


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    lines = [json.dumps({**RECORD, "id": f"tau-airline/c{i}[p]", "case_id": f"c{i}"}, sort_keys=True)
             for i in range(args.lines)]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "records.jsonl"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        def each(parse: Callable[[str], object]) -> Callable[[], None]:
            def run() -> None:
                for x in lines:
                    parse(x)
            return run

        peer = best(each(json.loads), args.repeat)
        ours = best(each(loads), args.repeat)
        print(f"{args.lines:,} record lines parsed: json.loads {peer:.3f} s, loads {ours:.3f} s, "
              f"ratio {ours / peer:.2f}")

        def plain() -> None:
            with log.open("rb") as fh:
                for raw in fh:
                    if raw.strip():
                        json.loads(raw)

        peer = best(plain, args.repeat)
        def ours_read() -> None:
            for _ in json_lines(log):
                pass

        ours = best(ours_read, args.repeat)
        print(f"the {args.lines:,}-line log read: a json.loads loop {peer:.3f} s, json_lines {ours:.3f} s, "
              f"ratio {ours / peer:.2f}")
    cases = [x for x in (REPO / "cases" / "tau-airline" / "cases.jsonl").read_text().splitlines() if x.strip()]
    reps = max(1, 10_000 // len(cases))
    many = cases * reps
    def validate_json() -> None:
        for x in many:
            Case.model_validate_json(x)

    def validate_loaded() -> None:
        for x in many:
            Case.model_validate(loads(x))

    peer = best(validate_json, args.repeat)
    ours = best(validate_loaded, args.repeat)
    print(f"{len(many):,} case lines validated: model_validate_json {peer:.3f} s "
          f"({peer / len(many) * 1e6:.0f} us each), model_validate(loads) {ours:.3f} s "
          f"({ours / len(many) * 1e6:.0f} us each), ratio {ours / peer:.2f}")


if __name__ == "__main__":
    main()
