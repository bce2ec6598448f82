"""Reports of a finished or running run, built from its run directory alone.

`summary` turns a run directory into the typed run summary (per-node figures, search,
predictions, failures, novelty, history); `series` the per-iteration series behind the plots;
`markdown` writes ``report/report.md`` and `html` renders it with a maintained Markdown
library; `plots` draws the figures; `compare` sets runs side by side; `live` is the live
progress line of a running run. Nothing here changes a run directory except the ``report/``
folder it writes.
"""
