"""Several scorers on one read: every component scores the same outputs, and each sample's result carries
every component's score and their weighted sum, in the framework's `{component..., "weighted": sum}` shape
(as its weighted_mixture_rm logs them)."""
from __future__ import annotations

from .base import option, warm_up

WEIGHTED = "weighted"


class WeightedMixture:
    def __init__(self, components: list[tuple[str, float, object]]):
        names = [n for n, _, _ in components]
        if len(set(names)) != len(names) or WEIGHTED in names:
            raise ValueError(f"mixture components need distinct names other than {WEIGHTED!r}: {names}")
        self.components = components
        self.copy_outputs = any(option(s, "copy_outputs") for _, _, s in components)

    def score_batch(self, outputs, prompts) -> list[dict[str, float]]:
        results: list[dict[str, float]] = [{} for _ in outputs]
        for name, weight, scorer in self.components:
            scores = list(scorer.score_batch(outputs, prompts))
            if len(scores) != len(outputs):
                raise ValueError(f"scorer {name} returned {len(scores)} scores for {len(outputs)} outputs")
            for r, s in zip(results, scores):
                r[name] = float(s)
        for r in results:
            r[WEIGHTED] = sum(w * r[n] for n, w, _ in self.components)
        return results

    def warmup(self) -> None:
        for _, _, scorer in self.components:
            warm_up(scorer)
