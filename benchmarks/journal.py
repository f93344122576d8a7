"""The resumable journal of the Monte-Carlo studies (robustness_study, dimension_study).

A study is a list of tasks (JSON-able dicts). Each finished task appends one line
``{"task": ..., "result": ...}`` to the journal, flushed at once, so an interrupted study
loses at most the tasks in flight and a rerun skips every task already journalled.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

Task = dict[str, Any]


def key(task: Task) -> str:
    """A task's identity in the journal."""
    return json.dumps(task, sort_keys=True)


def done_keys(journal: Path) -> set[str]:
    """The keys of the tasks already in the journal (a torn last line is skipped)."""
    done: set[str] = set()
    if journal.exists():
        for line in journal.read_text().splitlines():
            try:
                done.add(key(json.loads(line)["task"]))
            except (json.JSONDecodeError, KeyError):
                continue
    return done


def run_journal(
    tasks: list[Task],
    execute: Callable[[Task], tuple[Task, Any]],
    journal: Path,
    workers: int,
    report_every: int,
) -> None:
    """Run ``execute`` on every task over ``workers`` processes (one BLAS thread each),
    appending each result to ``journal`` as it finishes."""
    from threadpoolctl import threadpool_limits

    start, finished = time.perf_counter(), 0
    journal.parent.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(1), ProcessPoolExecutor(workers) as pool, journal.open("a") as out:
        futures = [pool.submit(execute, t) for t in tasks]
        for future in as_completed(futures):
            try:
                task, result = future.result()
            except BaseException:
                # fail now, not after every queued task has run (and failed) too
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            out.write(json.dumps({"task": task, "result": result}) + "\n")
            out.flush()
            finished += 1
            if finished % report_every == 0 or finished == len(tasks):
                rate = finished / (time.perf_counter() - start)
                left = (len(tasks) - finished) / rate / 60
                print(f"{finished}/{len(tasks)} done, {rate:.2f}/s, about {left:.0f} min left", flush=True)
