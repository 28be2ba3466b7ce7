"""Several scorers on one read: every component scores the same outputs, and each sample's result carries
every component's score and their weighted sum, in the framework's `{component..., "weighted": sum}` shape
(as its weighted_mixture_rm logs them).

A sample a component refuses (an exception in its place) fails, its error naming the component, as the
framework's mixture fails when one of its rewards raises; unless that component is optional (`required: false`):
then its score there is NaN, the reason is under COMPONENT_ERRORS_KEY, and `weighted` is the other components'
sum with their weights rescaled to the same total. A sample every component with weight refused fails."""
from __future__ import annotations

import math

from ..contract import COMPONENT_ERRORS_KEY
from ..errors import ScorerError
from .base import option, refused, warm_up

WEIGHTED = "weighted"


class WeightedMixture:
    def __init__(self, components: list[tuple[str, float, object]], optional: set[str] | frozenset = frozenset()):
        names = [n for n, _, _ in components]
        if len(set(names)) != len(names) or WEIGHTED in names or COMPONENT_ERRORS_KEY in names:
            raise ValueError(f"mixture components need distinct names other than {WEIGHTED!r}: {names}")
        if set(optional) - set(names):
            raise ValueError(f"optional components {sorted(set(optional) - set(names))} are not components {names}")
        self.components = components
        self.optional = frozenset(optional)
        self.copy_outputs = any(option(s, "copy_outputs") for _, _, s in components)

    def score_batch(self, outputs, prompts) -> list:
        results: list = [{} for _ in outputs]
        reasons: list[dict[str, str]] = [{} for _ in outputs]
        for name, weight, scorer in self.components:
            scores = list(scorer.score_batch(outputs, prompts))
            if len(scores) != len(outputs):
                raise ValueError(f"scorer {name} returned {len(scores)} scores for {len(outputs)} outputs")
            for i, s in enumerate(scores):
                if refused(results[i]):
                    continue
                if not refused(s):
                    results[i][name] = float(s)
                elif name in self.optional:
                    results[i][name] = math.nan
                    reasons[i][name] = f"{type(s).__name__}: {s}"
                else:
                    results[i] = ScorerError(f"{name}: {s}", type(s).__name__)
        return [r if refused(r) else self._weighted(r, why) for r, why in zip(results, reasons)]

    def _weighted(self, r: dict, why: dict[str, str]):
        total = sum(w for _, w, _ in self.components)
        kept = [(n, w) for n, w, _ in self.components if n not in why]
        kept_weight = sum(w for _, w in kept)
        if why and (not kept or kept_weight == 0):
            return ScorerError(f"every weighted component refused this sample: {why}", "Refused")
        scale = total / kept_weight if why else 1.0
        out = {**r, WEIGHTED: sum(w * scale * r[n] for n, w in kept)}
        if why:
            out[COMPONENT_ERRORS_KEY] = why
        return out

    def warmup(self) -> None:
        for _, _, scorer in self.components:
            warm_up(scorer)
