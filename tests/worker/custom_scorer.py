"""A custom scorer loaded by import path in the tests (tests.worker.custom_scorer:PromptLengthScorer)."""


class PromptLengthScorer:
    def score_batch(self, outputs, prompts):
        return [float(len(p)) + float(o.shape[0]) for o, p in zip(outputs, prompts)]


class SlowScorer:
    """Takes its time, so a test can kill the actor mid-batch."""

    def __init__(self, seconds: float = 3.0):
        self.seconds = seconds

    def score_batch(self, outputs, prompts):
        import time

        time.sleep(self.seconds)
        return [float(o.float().mean()) for o in outputs]


class OneSecondScorer(SlowScorer):
    def __init__(self):
        super().__init__(1.0)
