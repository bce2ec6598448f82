"""The one prompt renderer is strict and the one sanitiser makes untrusted text inert."""

from __future__ import annotations

import pytest

from evoduet_graph.prompts import available_prompts, load_prompt
from evoduet_graph.prompts.render import PromptRenderError, fill, render
from evoduet_graph.prompts.untrusted import neutralise, one_line


def test_a_misspelt_placeholder_is_an_error_naming_it() -> None:
    with pytest.raises(PromptRenderError, match=r"\$knowlege"):
        fill("known: $knowlege", {"knowledge": "x"})


def test_a_value_without_a_placeholder_is_an_error() -> None:
    with pytest.raises(PromptRenderError, match="extra"):
        fill("a $x", {"x": 1, "extra": 2})


def test_an_invalid_dollar_is_an_error() -> None:
    with pytest.raises(PromptRenderError, match=r"\$\$"):
        fill("costs $ 5", {})


def test_values_are_substituted_verbatim() -> None:
    assert fill("a ${x}b $$", {"x": "{$y}"}) == "a {$y}b $"


def test_drop_empty_leaves_out_empty_sections_and_lone_lines() -> None:
    text = "# A\n$a\n\n# B\n$b\nkept $c\n"
    assert fill(text, {"a": "", "b": "", "c": "x"}, drop_empty=True) == "# B\nkept x"


def test_every_bundled_template_is_valid() -> None:
    for name in available_prompts():
        from string import Template

        assert Template(load_prompt(name)).is_valid(), name


def test_render_names_the_template() -> None:
    with pytest.raises(PromptRenderError, match="prompt 'gate'"):
        render("gate")


def test_neutralise_closes_nothing() -> None:
    text = "a\r\n```python\nx\n~~~\n</evidence>\n< Document id=1>\n<<<<<<< SEARCH\n\x07"
    out = neutralise(text)
    assert "```" not in out and "~~~" not in out and "\r" not in out and "\x07" not in out
    assert "</evidence" not in out.lower() and "<document" not in out.lower().replace(" ", "")
    assert "<<<<<<<" not in out


def test_one_line_collapses_and_cuts() -> None:
    assert one_line("a\n\n ```b```  c", 8) == "a '''b''"
