"""The run's seed seeds the embedded model's sampling (config ``seed``: selection and sampling)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from evoduet_graph.config import LLMConfig, WeightedModelConfig
from evoduet_graph.llm import factory, local


class _Recorder(FakeListChatModel):
    """Stands in for the embedded model: records the seeds its sampling stream got."""

    responses: list[str] = ["ok"]
    seeds: list[int] = []

    def seed_sampling(self, seed: int) -> None:
        self.seeds.append(seed)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[_Recorder]:
    out: list[_Recorder] = []

    def fake(cfg: LLMConfig, **_: Any) -> _Recorder:
        out.append(_Recorder(seeds=[]))
        return out[-1]

    monkeypatch.setattr(local, "make_local_chat_model", fake)
    return out


def test_the_embedded_model_starts_its_sampling_stream_at_the_run_seed(made) -> None:
    factory.make_chat_model(LLMConfig(model="local"), seed=1234)
    assert [m.seeds for m in made] == [[1234]]


def test_each_embedded_member_of_an_ensemble_gets_the_run_seed(made) -> None:
    cfg = LLMConfig(
        model="local",
        models=[WeightedModelConfig(model="local"), WeightedModelConfig(model="local", weight=2)],
    )
    factory.make_chat_model(cfg, seed=7)
    assert [m.seeds for m in made] == [[7], [7]]


class _Llama:
    def __init__(self) -> None:
        self.seed: int | None = None

    def set_seed(self, seed: int) -> None:
        self.seed = seed


def test_seed_sampling_sets_the_llama_seed_under_the_model_lock() -> None:
    import threading

    model = local.LocalChatModel.model_construct()
    llama = _Llama()
    model._loaded = local._Loaded(llama=llama, lock=threading.Lock(), parallel=1)
    model.seed_sampling(2**40 + 5)  # llama.cpp seeds are 32-bit
    assert llama.seed == 5
