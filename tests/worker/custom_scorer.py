"""A custom scorer loaded by import path in the tests (tests.worker.custom_scorer:PromptLengthScorer)."""


class PromptLengthScorer:
    def score_batch(self, outputs, prompts):
        return [float(len(p)) + float(o.shape[0]) for o, p in zip(outputs, prompts)]
