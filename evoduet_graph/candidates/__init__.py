"""Candidates: what a model answer becomes before it is evaluated.

`diffs` parses a model answer into a child program (SEARCH/REPLACE diffs or a full rewrite,
OpenEvolve's two generation formats) and repairs or rejects malformed ones; `novelty` rejects a
child that is a near-copy of a program already in the population (embedding or edit-distance
similarity with an optional LLM judge, ShinkaEvolve's novelty rejection sampling). Neither
module touches the graph state: the ``generate`` node calls them.
"""
