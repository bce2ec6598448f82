"""Search backends built on LangChain retrievers and tools (docs/design.md §4).

`langchain` adapts any ``BaseRetriever`` or search tool to the `Searcher` protocol; the other
modules build one public source each (arXiv, Wikipedia, DuckDuckGo, SearXNG, Exa, Brave) from
its langchain-community or partner-package class. `evoduet_graph.search.registry` names them.
"""
