"""The run directory: every file a run writes, and the one place that reads them back.

`layout` names every file of a run directory; `store` is the program store
(``programs.jsonl``), `events` the event catalogue and the append-only event log, `lock` the
single-writer lock, `best` the best-program files, `budget` the run's spending limits and
`pricing` what model and search calls cost. `read` is the one JSONL/JSON reader and `usage`
the one computation of LLM usage, sessions (wall time) and completed iterations, which the
budget, the report, the live progress, the bench and the API all use; `rundir.RunDir.open`
validates a run directory once for both the CLI and the API.
"""
