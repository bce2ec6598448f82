"""The embedded runtime's CPU-variant choice and its fallback when a variant crashes."""

from __future__ import annotations

import pytest

from evoduet_graph.llm import runtime
from evoduet_graph.llm.model_file import LocalModelError

ALL = ("zen4", "skylakex", "haswell", "x64")
AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"})
AVX512 = AVX2 | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
SAPPHIRE_RAPIDS = AVX512 | {"avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8"}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (SAPPHIRE_RAPIDS, "zen4"),  # AMX is never chosen: no variant of the build uses it
        (AVX512, "skylakex"),
        (AVX512 - {"avx512bw"}, "haswell"),  # the kernel did not enable all of AVX-512
        (AVX2, "haswell"),
        (frozenset({"sse4_2", "avx"}), "x64"),
        (frozenset(), "x64"),
    ],
)
def test_the_best_variant_whose_instructions_the_kernel_reports(flags, expected):
    assert runtime.choose_variant(flags, ALL) == expected


def test_a_forced_variant_must_exist_in_the_build():
    assert runtime.choose_variant(AVX2, ALL, forced="x64") == "x64"
    with pytest.raises(ValueError, match="EVODUET_LLAMA_CPU='avx9'"):
        runtime.choose_variant(AVX2, ALL, forced="avx9")


def test_exit_codes_are_described_by_their_signal():
    assert runtime.describe_exit(-11).startswith("killed by SIGSEGV")
    assert runtime.describe_exit(-9).startswith("killed by SIGKILL")
    assert runtime.describe_exit(3) == "exited with status 3"


@pytest.fixture
def portable_build(monkeypatch, tmp_path):
    monkeypatch.setenv("EVODUET_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(runtime.VARIANT_ENV, raising=False)
    info = runtime.RuntimeInfo("0.3.36", None, "portable", ALL, "zen4", "test CPU")
    monkeypatch.setattr(runtime, "runtime_info", lambda: info)
    return info


def test_a_crashing_variant_falls_back_to_the_next_and_the_choice_is_remembered(portable_build):
    tried: list[str | None] = []

    def attempt(variant: str | None) -> str:
        tried.append(variant)
        if variant in (None, "skylakex"):  # the default choice (zen4) and skylakex crash
            raise runtime.RuntimeCrash("killed by SIGILL (Illegal instruction)")
        return f"started {variant}"

    assert runtime.with_variant_fallback(attempt, what="x") == "started haswell"
    assert tried == [None, "skylakex", "haswell"]
    tried.clear()
    assert runtime.with_variant_fallback(attempt, what="x") == "started haswell"
    assert tried == ["haswell"]  # the next start goes straight to the variant that worked


def test_when_every_variant_crashes_the_error_names_each_failure_and_the_fix(portable_build):
    def attempt(variant: str | None) -> str:
        raise runtime.RuntimeCrash("killed by SIGSEGV (Segmentation fault)")

    with pytest.raises(LocalModelError) as caught:
        runtime.with_variant_fallback(attempt, what="the embedded model's worker")
    message = str(caught.value)
    assert "zen4: killed by SIGSEGV" in message and "x64: killed by SIGSEGV" in message
    assert runtime.REBUILD_HINT in message


def test_a_forced_variant_is_not_silently_replaced(portable_build, monkeypatch):
    monkeypatch.setenv(runtime.VARIANT_ENV, "skylakex")
    tried: list[str | None] = []

    def attempt(variant: str | None) -> str:
        tried.append(variant)
        raise runtime.RuntimeCrash("killed by SIGILL (Illegal instruction)")

    with pytest.raises(LocalModelError):
        runtime.with_variant_fallback(attempt, what="x")
    assert tried == ["skylakex"]


def test_the_installed_build_reports_its_variants():
    info = runtime.runtime_info()
    assert info.version is not None  # the test environment installs the embedded runtime
    assert info.flavour in ("portable", "native", "unknown")
    if info.flavour == "portable":
        assert info.variants and info.chosen in info.variants


def test_a_model_that_does_not_load_is_not_blamed_on_the_cpu_variant(portable_build, tmp_path):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(LocalModelError) as caught:
        runtime.ensure_runtime(bad)
    message = str(caught.value)
    # a Python error in the probe (exit status 1) stops at once: no lower variant is tried
    assert "did not load" in message and "exited with status 1" in message
    assert "crashed" not in message
    assert "ok" not in (runtime._read_cache().get(portable_build.fingerprint) or {})


def test_a_crash_report_keeps_the_fatal_error_and_the_crashing_frames():
    stderr = [
        "llama_model_loader: loaded meta data",
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x7f (most recent call first):",
        '  File "llama_cpp/_internals.py", line 321 in decode',
        '  File "llama_cpp/llama.py", line 650 in eval',
        '  File "evoduet_graph/llm/local.py", line 90 in complete',
        "Extension modules: numpy._core, yaml._yaml (total: 2)",
    ]
    tail = runtime.crash_tail(stderr, 2)
    assert tail == (
        'Fatal Python error: Segmentation fault | File "llama_cpp/_internals.py", line 321 in '
        'decode | File "llama_cpp/llama.py", line 650 in eval'
    )
    assert runtime.crash_tail(["a", "", "b", "c"], 2) == "b | c"  # no fatal error: last lines


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ('{"variant": "zen4"}\n', "zen4"),
        ("", "haswell"),
        ("garbage\n", "haswell"),
        ("[1]", "haswell"),
    ],
)
def test_the_probe_reply_is_read_defensively(stdout, expected):
    assert runtime._probed_variant(stdout, "haswell") == expected
