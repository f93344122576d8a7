"""The progress display of ``monkfw``: a rich bar on a terminal, plain lines in a log.

The library reports ``progress(done, total, what)``; :class:`ProgressBar` shows it on
stderr, a bar that moves on a terminal and a line every few seconds elsewhere (a log, a
batch job, CI), and nothing with ``--quiet``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from monk_framework.app.terminal import STATE, stderr

#: seconds between two plain progress lines (stderr not a terminal: a log file, a batch
#: job, CI): a line once this has passed at the next report, so that with reports a few
#: tenths of a second apart the lines are at most 5 s apart
PLAIN_PROGRESS_EVERY = 4.5


#: seconds before the first plain line: a job shorter than this prints none
PLAIN_PROGRESS_FIRST = 2.0


def counts(done: float, total: float) -> str:
    """ "done/total" for a bar, large counts shortened (the characters of a file read, the
    kernel values of a Gram matrix): 16.8M/70.7M rather than 16777279/70674009."""

    def short(value: float) -> str:
        for size, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
            if total >= size:
                return f"{value / size:.1f}{unit}"
        return f"{int(value):,}" if float(value).is_integer() else f"{value:.1f}"

    return f"{short(done)}/{short(total)}"


class ProgressBar:
    """Progress of long work on stderr (silent with --quiet): a rich bar with the time
    left on a terminal; elsewhere (a log file, a batch job) a plain line at most every
    :data:`PLAIN_PROGRESS_EVERY` seconds, with the same estimate.

    Called as ``bar(done, total)`` or ``bar(done, total, what)``: a new ``what`` starts a
    new stage. The display starts with the first report, so an error raised before any
    work (a bad option found once the data are read) stays a single line on stderr.
    """

    def __init__(self, label: str):
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.plain = not stderr.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}", style="progress.download"),
            TimeRemainingColumn(),
            console=stderr,
            transient=True,
            disable=STATE.quiet or self.plain,
        )
        self.label = label
        self.what: str | None = None
        self.task: Any = None
        self.started = time.monotonic()
        self.stage_started = self.started
        self.last_report = self.started  # a stage's work began when the previous one last reported
        #: the stage's first report (time, done): later rates are measured from it, past the
        #: warm-up its first step may carry (threads starting, a matrix's pages faulted in)
        self.first_report: tuple[float, float] | None = None
        self.last_line = self.started
        self.lines = 0  # plain lines printed
        self.lock = threading.Lock()  # the engine reports from its threads too

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.task is not None and not self.plain:
            self.progress.__exit__(*exc)

    def __call__(self, done: float, total: float, what: str | None = None) -> None:
        with self.lock:
            self._update(done, total, what)

    def _update(self, done: float, total: float, what: str | None) -> None:
        if what is not None and what != self.what:
            # its first report may come after much of its work (a stage of few steps), so
            # the stage is timed from the end of the one before, not from that report
            self.what, self.stage_started, self.first_report = what, self.last_report, None
            if self.task is not None and not self.plain:
                self.progress.reset(self.task, total=total, description=f"{self.label}: {what}", count=counts(0, total))
        self.last_report = time.monotonic()
        if self.first_report is None:
            self.first_report = (self.last_report, done)
        if self.plain:
            self._line(done, total)
            return
        if self.task is None:
            self.progress.__enter__()
            self.task = self.progress.add_task(self.label if what is None else f"{self.label}: {what}", total=total, count=counts(done, total))
        self.progress.update(self.task, completed=done, total=total, count=counts(done, total))

    @staticmethod
    def _duration(seconds: float) -> str:
        """A span read at a glance: "42 s", "12 min", "5.2 h", "3.1 days", and past ten
        years "more than ten years" (n_iter = 10**18 once read "about 4965338753307636888
        s left")."""
        for limit, unit, size, digits in ((90, "s", 1, 0), (90 * 60, "min", 60, 0), (48 * 3600, "h", 3600, 1), (3650 * 86400, "days", 86400, 1)):
            if seconds < limit:
                return f"{seconds / size:.{digits}f} {unit}"
        return "more than ten years"

    def _line(self, done: float, total: float) -> None:
        now = time.monotonic()
        wait = PLAIN_PROGRESS_EVERY if self.lines else PLAIN_PROGRESS_FIRST
        if STATE.quiet or now - self.last_line < wait:
            return
        self.last_line, self.lines = now, self.lines + 1
        share = done / total if total else 1.0
        left = ""
        first_at, first_done = self.first_report or (now, done)
        if 0 < share < 1 and done > first_done and now > first_at:
            left = f", about {self._duration((total - done) * (now - first_at) / (done - first_done))} left"
        elif 0.1 <= share < 1:
            # one report yet, but a coarse step (1 of 3 matrices): timed from the stage's start;
            # a fine first step (a band of 600) would carry the warm-up into the estimate
            left = f", about {self._duration((now - self.stage_started) * (1 - share) / share)} left"
        count = f"{int(done):,}/{int(total):,}" if float(done).is_integer() and float(total).is_integer() else ""
        stage = self.label if self.what is None else f"{self.label}: {self.what}"
        stderr.print(f"{stage}{' ' + count if count else ''} ({100 * share:.0f}%), {self._duration(now - self.started)} elapsed{left}", markup=False)
