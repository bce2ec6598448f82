"""`evoduet run` and `evoduet bench` sample the embedded model with the same repeat penalty.

The bench serves the model with llama-cpp-python's server (`evoduet_graph.bench.llama_server`),
`evoduet run` loads it in process (`LocalChatModel`); an OpenAI client sends no
``repeat_penalty``, so the server's request default is what a bench samples with.
"""

from __future__ import annotations

import pytest

from evoduet_graph.bench.llama_server import serve_with_embedded_repeat_penalty
from evoduet_graph.llm.local import LocalChatModel
from evoduet_graph.llm.model_file import REPEAT_PENALTY

types = pytest.importorskip("llama_cpp.server.types")
REQUESTS = (types.CreateChatCompletionRequest, types.CreateCompletionRequest)


@pytest.fixture
def server_defaults():
    """Restore the request models' defaults after a test that changes them."""
    saved = [m.model_fields["repeat_penalty"].default for m in REQUESTS]
    yield
    for model, default in zip(REQUESTS, saved, strict=True):
        model.model_fields["repeat_penalty"].default = default
        model.model_rebuild(force=True)


def test_the_in_process_model_uses_the_servers_repeat_penalty():
    assert LocalChatModel.model_fields["repeat_penalty"].default == REPEAT_PENALTY
    chat = types.CreateChatCompletionRequest.model_validate({"messages": []})
    assert chat.repeat_penalty == REPEAT_PENALTY


def test_the_server_default_is_pinned_and_an_explicit_value_kept(server_defaults):
    for model in REQUESTS:
        model.model_fields["repeat_penalty"].default = 1.3  # a release with another default
        model.model_rebuild(force=True)
    serve_with_embedded_repeat_penalty()
    chat = types.CreateChatCompletionRequest.model_validate({"messages": []})
    completion = types.CreateCompletionRequest.model_validate({"prompt": "x"})
    assert chat.repeat_penalty == completion.repeat_penalty == REPEAT_PENALTY
    sent = types.CreateChatCompletionRequest.model_validate({"messages": [], "repeat_penalty": 1.0})
    assert sent.repeat_penalty == 1.0
