"""Program languages of a task: file suffix, code-fence tag, toolchain (docs/design.md §5).

A task's evolved program may be in any language (OpenEvolve's ``language`` / ``file_suffix``
config keys, SkyDiscover's ``language``). This table says, per language, the suffixes that
name it, the tag that fences its code in prompts and answers (plus the tags models use for it),
whether it is Python (only then do the Python-only steps run: ``tokenize``-based novelty
normalisation, import hoisting of rewrites, the compile check of a cut-off code block), and
the programs its evaluators usually call (``Rscript``, ``cargo``, ``cc``), so that a missing
toolchain is one clear error instead of a score of zero.

An unknown language or suffix is not an error: it gets a generic entry (its own name as the
fence tag, no toolchain check, the language-neutral steps).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

from evoduet_graph.errors import UserError

__all__ = [
    "Language",
    "ToolchainError",
    "language_by_name",
    "language_for_suffix",
    "missing_toolchain",
]


class ToolchainError(UserError, RuntimeError):
    """A program the task's evaluator needs (compiler, interpreter) is not installed."""


@dataclass(frozen=True)
class Language:
    """One program language.

    Attributes:
        name: canonical name (``python``, ``r``, ``rust``, ``c``, ...).
        display: name shown to the model (``R``, ``Rust``, ``C``).
        suffix: file suffix of a candidate (``.py``, ``.r``); the evaluator compiles or runs
            the candidate under this name.
        fence: info string of a fenced code block of this language.
        aliases: other names and fence tags for it (``py``, ``cpp``/``c++``, ``rs``).
        tools: programs its evaluators call, with the OS package that installs each
            (``{"Rscript": "r-base-core"}``); checked only where the evaluator names them.
    """

    name: str
    display: str
    suffix: str
    fence: str
    aliases: frozenset[str] = frozenset()
    tools: dict[str, str] = field(default_factory=dict)

    @property
    def is_python(self) -> bool:
        """Whether the Python-only steps (tokenize, import hoisting, compile check) apply."""
        return self.name == "python"

    @property
    def fence_tags(self) -> frozenset[str]:
        """Every info string accepted for this language's code blocks (lower case)."""
        return frozenset({self.name, self.fence, *self.aliases})


_TABLE: tuple[Language, ...] = (
    Language("python", "Python", ".py", "python", frozenset({"py", "python3", "py3"})),
    Language("r", "R", ".r", "r", frozenset({"rscript"}), {"Rscript": "r-base-core"}),
    Language(
        "rust", "Rust", ".rs", "rust", frozenset({"rs"}), {"cargo": "cargo", "rustc": "rustc"}
    ),
    Language("c", "C", ".c", "c", frozenset(), {"cc": "gcc", "gcc": "gcc", "clang": "clang"}),
    Language(
        "cpp",
        "C++",
        ".cpp",
        "cpp",
        frozenset({"c++", "cxx", "cc", "hpp"}),
        {"g++": "g++", "c++": "g++", "clang++": "clang"},
    ),
    Language("go", "Go", ".go", "go", frozenset({"golang"}), {"go": "golang"}),
    Language("java", "Java", ".java", "java", frozenset(), {"javac": "default-jdk"}),
    Language(
        "javascript",
        "JavaScript",
        ".js",
        "javascript",
        frozenset({"js", "node"}),
        {"node": "nodejs"},
    ),
    Language("typescript", "TypeScript", ".ts", "typescript", frozenset({"ts"})),
    Language("julia", "Julia", ".jl", "julia", frozenset({"jl"}), {"julia": "julia"}),
    Language("bash", "shell (bash)", ".sh", "bash", frozenset({"sh", "shell"}), {"bash": "bash"}),
    Language("awk", "awk", ".awk", "awk", frozenset(), {"awk": "gawk"}),
    Language("lua", "Lua", ".lua", "lua", frozenset(), {"lua": "lua5.4"}),
    Language("verilog", "Verilog", ".v", "verilog", frozenset(), {"iverilog": "iverilog"}),
    Language("text", "plain text", ".txt", "text", frozenset({"txt", "prompt"})),
)
_BY_NAME = {lang.name: lang for lang in _TABLE}
_BY_ALIAS = {alias: lang for lang in _TABLE for alias in lang.aliases}
_BY_SUFFIX = {lang.suffix: lang for lang in _TABLE}
_BY_SUFFIX.update({".R": _BY_NAME["r"], ".cc": _BY_NAME["cpp"], ".cxx": _BY_NAME["cpp"]})


def language_by_name(name: str) -> Language:
    """The language a config's ``language:`` names (case-insensitive, aliases accepted).

    An unknown name gives a generic entry: suffix ``.<name>``, fence tag ``<name>``.
    """
    key = name.strip().lower()
    found = _BY_NAME.get(key) or _BY_ALIAS.get(key)
    if found is not None:
        return found
    tag = re.sub(r"[^a-z0-9+#_-]", "", key) or "text"
    return Language(key, name.strip(), f".{tag}", tag)


def language_for_suffix(suffix: str) -> Language:
    """The language of a file suffix (``.rs`` → Rust); unknown suffixes get a generic entry."""
    found = _BY_SUFFIX.get(suffix) or _BY_SUFFIX.get(suffix.lower())
    if found is not None:
        return found
    tag = suffix.lstrip(".").lower() or "text"
    return Language(tag, tag, suffix, tag)


def missing_toolchain(language: Language, evaluator_text: str) -> str | None:
    """The toolchain an evaluator needs and this machine lacks, as a one-line message.

    Only programs of ``language.tools`` that the evaluator's own text names (as a word, e.g.
    ``"Rscript"`` in a ``subprocess.run`` call) are checked, so an evaluator that runs its
    programs some other way (a container, a remote service) is not refused; one of them being
    installed is enough (an evaluator may fall back from ``cc`` to ``gcc``).

    Args:
        language: the task's language.
        evaluator_text: the evaluator's source (``evaluator.py``, ``evaluate.sh``).

    Returns:
        ``None`` when the evaluator names none of them or one of those it names is on
        ``PATH``, else e.g. ``"this R task's evaluator
        runs `Rscript`, which is not installed (not on PATH); install it, e.g. apt-get install
        r-base-core"``.
    """
    named = [
        (tool, package)
        for tool, package in language.tools.items()
        if re.search(rf"(?<![\w+-]){re.escape(tool)}(?![\w+-])", evaluator_text)
    ]
    if not named or any(shutil.which(tool) is not None for tool, _ in named):
        return None
    tools = " / ".join(f"`{tool}`" for tool, _ in named)
    packages = " ".join(dict.fromkeys(package for _, package in named))
    return (
        f"this {language.display} task's evaluator runs {tools}, which is not installed "
        f"(not on PATH); install it, e.g. apt-get install {packages}"
    )
