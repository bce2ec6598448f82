"""``python -m evoduet_graph.cli``: the ``evoduet`` command."""

from evoduet_graph.cli import main

if __name__ == "__main__":
    main()
