"""The OCR reward's formula and its refusals (scorers/ocr.py's pure parts) against miles' rule restated here, with
its own Levenshtein distance (a plain dynamic programme), on recognised texts given directly: the target's
substring rule, the cap at the target's length, an OCR failure, spaces and case, and the prompts miles crashes
on (no double quote, an empty target), which are refused for that sample instead."""
from __future__ import annotations

import pytest

from rewardpool_worker.scorers.ocr import OcrRefused, ocr_reward, ocr_target, recognised_text


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def miles_reward(lines, prompt: str, raises: bool = False) -> float:
    """miles' OCR reward given PaddleOCR's lines for the image (or an OCR that raised)."""
    target = prompt.split('"')[1].replace(" ", "").lower()
    try:
        if raises:
            raise RuntimeError("ocr failed")
        text = "".join(t if c > 0 else "" for _, (t, c) in lines) if lines else ""
        text = text.replace(" ", "").lower()
        dist = 0 if target in text else levenshtein(text, target)
        dist = min(dist, len(target))
    except RuntimeError:
        dist = len(target)
    return 1 - dist / len(target)


BOX = [[0, 0], [1, 0], [1, 1], [0, 1]]
CASES = [
    ("exact", [(BOX, ("Hello World", 0.9))], 'a sign that says "Hello World"'),
    ("inside more text", [(BOX, ("big HELLOWORLD sale", 0.7))], 'a poster: "hello world"'),
    ("one edit", [(BOX, ("Hallo World", 0.9))], 'a sign "Hello World"'),
    ("joined lines", [(BOX, ("Hello", 0.8)), (BOX, ("World", 0.6))], 'text "hello world"'),
    ("a zero-confidence line dropped", [(BOX, ("Hello", 0.8)), (BOX, ("xyz", 0.0)), (BOX, ("World", 0.6))],
     'text "hello world"'),
    ("a low-confidence line kept", [(BOX, ("Hel", 0.3)), (BOX, ("lo", 0.9))], 'say "hello"'),
    ("nothing recognised", None, 'a sign "OPEN"'),
    ("far off: capped", [(BOX, ("completely different and long", 0.9))], 'a sign "OPEN"'),
    ("one quote only: the rest", [(BOX, ("cafe", 0.9))], 'a shop sign "Cafe du Monde'),
    ("the first pair of quotes", [(BOX, ("abc", 0.9))], 'write "ABC" and then "XYZ"'),
]


@pytest.mark.parametrize("what, lines, prompt", CASES, ids=[c[0] for c in CASES])
def test_the_reward_is_miles_formula(what, lines, prompt):
    got = ocr_reward(recognised_text([lines]), ocr_target(prompt))
    assert got == miles_reward(lines, prompt) and 0.0 <= got <= 1.0


def test_an_ocr_failure_counts_the_full_length():
    assert ocr_reward(None, ocr_target('a sign "OPEN"')) == miles_reward(None, 'a sign "OPEN"', raises=True) == 0.0


@pytest.mark.parametrize("prompt, match", [("a sign without any quotes", "in double quotes"),
                                           ('an empty target ""', "quoted text of the prompt is empty"),
                                           ('only spaces "   " here', "quoted text of the prompt is empty")])
def test_prompts_miles_crashes_on_are_refused_with_a_message(prompt, match):
    with pytest.raises(OcrRefused, match=match):
        ocr_target(prompt)
    with pytest.raises((IndexError, ZeroDivisionError)):  # what miles does with them
        miles_reward([], prompt)
