"""The worker's view of its scorers' model files before it loads them (runtime/models.py), and its wait for a
model that is not there (main.start_with_model): the worker stays up and says why, and starts once it can."""
from __future__ import annotations

import pytest

from rewardpool_worker.contract import ScorerConfig, StoreConfig, WorkerConfig
from rewardpool_worker.runtime import main
from rewardpool_worker.runtime.main import State, model_failure, start_with_model
from rewardpool_worker.runtime.models import missing_models, weight_bytes


def cfg(*scorers: ScorerConfig) -> WorkerConfig:
    return WorkerConfig(pool="p", namespace="ns", store=StoreConfig(master="m:1", protocol="tcp", segment_bytes=0, local_buffer_bytes=1 << 20),
                        scorer=ScorerConfig(batch_size=4), scorers=list(scorers), read_buffer_bytes=1 << 20)


def test_missing_models_name_the_component_and_the_path(tmp_path):
    (tmp_path / "clip").mkdir()
    (tmp_path / "clip" / "model.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "empty").mkdir()
    (tmp_path / "hps.pt").write_bytes(b"y" * 5)
    c = cfg(ScorerConfig(name="pickscore", model_path=str(tmp_path / "clip")),
            ScorerConfig(name="hps", model_path=str(tmp_path / "hps.pt")),
            ScorerConfig(name="ocr", model_path=str(tmp_path / "empty")),
            ScorerConfig(cls="my.mod:Scorer", key="mine", model_path="org/hub-model"),  # a hub id: its own business
            ScorerConfig(name="mean-intensity"))
    assert missing_models(c) == [f"ocr: {tmp_path / 'empty'} is empty (the claim or image holds no model files there)"]
    assert weight_bytes(c) == 15
    gone = cfg(ScorerConfig(name="pickscore", model_path=str(tmp_path / "nope")))
    assert missing_models(gone) == [f"pickscore: {tmp_path / 'nope'} does not exist (is the model volume mounted? "
                                    "scorer.model or modelPath)"]


def test_model_failure_reads_the_actors_reason_from_rays_error_text():
    text = ("The actor died because of an error raised in its creation task, ray::RewardWorker.__init__()\n"
            "  File ...\nrewardpool_worker.errors.ModelUnavailable: the model at /models/hps does not load: "
            "UnpicklingError: invalid load key\n")
    assert model_failure(RuntimeError(text)) == (
        "model", "the model at /models/hps does not load: UnpicklingError: invalid load key")
    assert model_failure(RuntimeError("the raylet died")) is None


def test_a_worker_waits_up_and_unready_for_its_model_then_starts(tmp_path, monkeypatch):
    """No crash loop: while the path is missing the worker is live, starting, unready_cause model (what the
    operator turns into ModelUnavailable); a model that does not load is said the same way; once it loads the
    actor starts and the start-up steps are recorded."""
    model = tmp_path / "clip"
    c = cfg(ScorerConfig(name="pickscore", model_path=str(model)))
    state = State()
    seen, starts = [], []
    waits = iter(range(100))

    def fake_wait(seconds):  # each retry: look at what the worker says, then change the world
        n = next(waits)
        h = state.health(0.0)
        seen.append((h.live, h.phase, h.unready_cause, h.unready_reason))
        if n == 0:
            model.mkdir()
            (model / "w").write_bytes(b"corrupt")
        return False
    monkeypatch.setattr(state.stop, "wait", fake_wait)

    def fake_start(cfg, pod, hostname, control_key=None):
        starts.append(pod)
        if len(starts) == 1:
            raise RuntimeError("ray::RewardWorker.__init__()\nModelUnavailable: the model at /x does not load: bad\n")
        return "actor"
    monkeypatch.setattr("rewardpool_worker.runtime.actor.start_actor", fake_start)
    steps = []
    assert start_with_model(c, "p-1", "127.0.0.1", "k", state, steps.append) == "actor"
    assert seen[0] == (True, "starting", "model", f"pickscore: {model} does not exist (is the model volume mounted? "
                                                  "scorer.model or modelPath)")
    assert seen[1] == (True, "starting", "model", "the model at /x does not load: bad")
    assert state.model_problem is None and state.health(0.0).unready_cause is None
    assert steps[-2:] == ["model_wait_seconds", "actor_seconds"] and len(starts) == 2


def test_sigterm_while_waiting_for_the_model_exits_cleanly(tmp_path):
    state = State()
    state.stop.set()
    with pytest.raises(SystemExit) as e:
        start_with_model(cfg(ScorerConfig(name="pickscore", model_path=str(tmp_path / "none"))), "p", "h", "k", state,
                         lambda _: None)
    assert e.value.code == 0


def test_the_startup_steps_count_from_the_process_start():
    state = State()
    step = main.startup_steps(state)
    step("network_seconds")
    assert set(state.startup) == {"imports_seconds", "network_seconds"}
    assert state.startup["imports_seconds"] >= 0 and main.process_age_seconds() > 0
