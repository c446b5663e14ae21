"""The progress a run prints: a plain line per finished cell in CI and logs, a live line on a
terminal."""

from __future__ import annotations

import io

from harness.model.cell import Cell, Provenance
from harness.model.outcome import CellKind, Outcome
from harness.pipeline.console import Progress

WHERE = Provenance(runner="test")


def _cell(case: str, outcome: Outcome) -> Cell:
    return Cell(CellKind.CASE, "ch", "kern", case, "sm_90a", WHERE, outcome, seconds=0.25)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _finish_three(out) -> str:
    progress = Progress(3, expected_s=9.0, out=out)
    for case, outcome in (("a", Outcome.PASSED), ("b", Outcome.FAILED), ("c", Outcome.PASSED)):
        progress.finished(_cell(case, outcome))
    progress.close()
    return out.getvalue()


def test_in_a_log_each_finished_cell_is_one_plain_line(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    lines = _finish_three(io.StringIO()).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("[1/3] PASSED  ch.kern::a[sm_90a] (0.2 s); 0 failed so far, ")
    assert lines[1].startswith("[2/3] FAILED  ch.kern::b[sm_90a]") and "1 failed so far" in lines[1]
    assert "s elapsed, ~" in lines[2] and lines[2].endswith("s left")


def test_ci_gets_plain_lines_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert len(_finish_three(Terminal()).splitlines()) == 3


def test_a_terminal_gets_one_live_line(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    shown = _finish_three(Terminal())
    assert "\x1b[" in shown  # drawn and redrawn in place, not appended as lines
    assert shown.count("\n") < 3


NASTY = "n1\x1b[31mred\x07\x00 [/bold] [red]x\nPASSED fake::line"


def test_a_name_s_control_characters_are_shown_not_sent_to_the_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    log = io.StringIO()
    progress = Progress(1, out=log)
    progress.finished(_cell(NASTY, Outcome.FAILED))
    (line,) = log.getvalue().splitlines()  # the newline in the name made no second line
    assert "n1\\x1b[31mred\\x07\\x00 [/bold] [red]x PASSED fake::line[sm_90a]" in line
    assert not any(ord(c) < 32 for c in line)
    live = Progress(1, out=Terminal())  # rich would read "[/bold]" as markup, and refuse it
    live.finished(_cell(NASTY, Outcome.FAILED))
    live.close()


def test_the_time_line_says_what_the_cases_cost_beyond_their_own_time():
    from harness.model.cell import Report, Stages
    from harness.pipeline.console import time_split

    where = Provenance("vm")

    def case(name, seconds, waited):
        cell = Cell(CellKind.CASE, "ch", "k", name, "sm_90a", where, Outcome.PASSED)
        cell.seconds = seconds
        cell.stages = Stages(
            setup_s=0.5, reference_s=0.25, verify_s=0.125, timing_s=1.0, waited_s=waited
        )
        return cell

    report = Report("s", "sm_90a", where, [case("n1", 1.5, 1.75), case("n2", 2.0, 2.5)])
    report.wall_s = 6.0
    assert time_split(report) == (
        "time: wall 6.0 s; compile 0.0 s; setup 1.0 s, reference 0.5 s, verify 0.2 s, "
        "timing 2.0 s; waited on workers 4.2 s (0.8 s beyond the cases' own)"
    )
    report.cells[1].worker_start_s = 0.375  # the first case of its worker waited for it to start
    assert time_split(report).endswith(
        "(0.8 s beyond the cases' own, 0.4 s of it for workers to start)"
    )
    report.cells = [case("n1", 1.5, 0.0)]  # a run that waited on no worker says nothing of it
    assert time_split(report).endswith("timing 1.0 s")


def test_the_time_line_says_what_the_cases_waited_for_within_their_workers():
    from harness.model.cell import Report, Stages
    from harness.pipeline.console import time_split

    where = Provenance("vm")
    cell = Cell(CellKind.CASE, "ch", "k", "n1", "sm_90a", where, Outcome.PASSED)
    cell.stages = Stages(timing_s=1.0, host_wait_s=0.75, gpu_wait_s=0.5)
    report = Report("s", "sm_90a", where, [cell])
    report.wall_s = 2.0
    assert time_split(report).endswith(
        "timing 1.0 s; cases waited 0.8 s for their host work, 0.5 s for the GPU's lock"
    )
