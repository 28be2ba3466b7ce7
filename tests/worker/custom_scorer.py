"""A custom scorer loaded by import path in the tests (tests.worker.custom_scorer:PromptLengthScorer)."""


class PromptLengthScorer:
    def score_batch(self, outputs, prompts):
        return [float(len(p)) + float(o.shape[0]) for o, p in zip(outputs, prompts)]


class SlowScorer:
    """Takes its time, so a test can kill the actor mid-batch."""

    def __init__(self, seconds: float = 3.0):
        self.seconds = seconds

    def warmup(self):  # its own warm-up: the tests that use it need no 3 s forward at start
        pass

    def score_batch(self, outputs, prompts):
        import time

        time.sleep(self.seconds)
        return [float(o.float().mean()) for o in outputs]


class OneSecondScorer(SlowScorer):
    def __init__(self):
        super().__init__(1.0)


class ArgsScorer:
    """Takes args and the pool's standard keywords; scores scale x the output's mean (float32 view)."""

    def __init__(self, scale: float, model_path: str | None = None, device: str | None = None,
                 num_frames: int | None = None):
        self.scale, self.model_path, self.device, self.num_frames = scale, model_path, device, num_frames

    def score_batch(self, outputs, prompts):
        return [self.scale * float(o.float().mean()) for o in outputs]


class GateScorer:
    """Blocks every batch until `gate` is set, recording what it saw: lets a test look at a backlog."""

    def __init__(self):
        import threading

        self.gate, self.entered, self.seen = threading.Event(), threading.Event(), []

    def warmup(self):
        pass

    def score_batch(self, outputs, prompts):
        self.seen.append([(o.data_ptr(), o.numel() * o.element_size()) for o in outputs])
        self.entered.set()
        assert self.gate.wait(120), "the test never opened the gate"
        return [float(o.float().mean()) for o in outputs]


class HangingScorer:
    """Hangs on the prompt "hang" (a wedged model); scores 1.0 otherwise."""

    def __init__(self, seconds: float = 60.0):
        self.seconds = seconds

    def score_batch(self, outputs, prompts):
        import time

        if "hang" in prompts:
            time.sleep(self.seconds)
        return [1.0] * len(outputs)


class FailOnPromptScorer:
    """Raises on the prompt "bad" (a scorer bug hit by one sample); else the output's mean after `seconds`."""

    def __init__(self, seconds: float = 0.0):
        self.seconds = seconds

    def warmup(self):
        pass

    def score_batch(self, outputs, prompts):
        import time

        if "bad" in prompts:
            raise ZeroDivisionError("this scorer cannot score 'bad'")
        time.sleep(self.seconds)
        return [float(o.float().mean()) for o in outputs]


class MeanScorer(FailOnPromptScorer):
    """The output's mean after 0.05 s: a quick model with a real batch time."""

    def __init__(self, seconds: float = 0.05):
        super().__init__(seconds)


class RoundedFrameMean:
    """A custom scorer that declares its frames and rounds (as an HPS-style reward): the mean of its picked
    frames after the rounding uint8 conversion, in [0, 1]."""
    picks_frames = True
    quantise = "round"

    def __init__(self, num_frames: int | None = None):
        self.num_frames = num_frames

    def score_batch(self, outputs, prompts):
        from rewardpool_worker.frames import pick_frames

        return [float(pick_frames(o, self.num_frames, self.quantise).float().mean() / 255) for o in outputs]


class ScaledMean:
    """scale x the output's mean, after `seconds`: two versions of a reward model that disagree by `scale`."""

    def __init__(self, scale: float = 1.0, seconds: float = 0.02):
        self.scale, self.seconds = scale, seconds

    def score_batch(self, outputs, prompts):
        import time

        time.sleep(self.seconds)
        return [self.scale * float(o.float().mean()) for o in outputs]


class MeanSquare:
    """scale x the mean of the output's squares: a reward model that agrees with ScaledMean in rank, mostly,
    but not linearly (a shadow's correlation is then neither 1 nor 0)."""

    def __init__(self, scale: float = 1.0):
        self.scale = scale

    def score_batch(self, outputs, prompts):
        return [self.scale * float(o.float().pow(2).mean()) for o in outputs]
