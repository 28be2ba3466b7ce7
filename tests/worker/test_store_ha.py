"""A highly available store master (two real mooncake_master processes with --enable_ha on a real etcd, the op
log on): its leader is killed under a running scoring load. Workers, producer and releaser name the store by
its etcd:// form only; they find the new leader themselves. Judged from outside the code under test: every
output's score is the value computed here from its tensor, the batches the pool served are exactly the batches
asked for, and the new leader's own key list holds nothing of the run afterwards (Mooncake acknowledges a remove
before its op log entry is durable, so one made just before the kill can come back: the Releaser's later
confirmation must find it)."""
from __future__ import annotations

import threading
import time

import pytest

from rewardpool_devcluster.mooncake import Etcd, Master, Producer
from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.client import Releaser, RewardPoolClient
from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.runtime.actor import start_actor
from rewardpool_worker.scorers.intensity import MeanIntensityScorer
from rewardpool_worker.errors import SampleError
from rewardpool_worker.store import ObjectNotFound, ReplicaNotReady, Store
from tests.conftest import wait_for
from tests.worker.conftest import KEY, pool_cfg

SHAPE = (3, 2, 8, 8)
PER_ROUND = 4


def _serving(m: Master, role: str):
    try:
        h = m.health()
    except Exception:  # noqa: BLE001 (not answering yet)
        return False
    return h.get("role") == role and (role != "leader" or h.get("service_ready"))


@pytest.fixture(scope="module")
def ha(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ha-store")
    etcd = Etcd(tmp)
    first = Master(tmp, ha_etcd=etcd.endpoint)
    wait_for(lambda: _serving(first, "leader"), timeout=60, what="the first master elected leader and serving")
    second = Master(tmp, ha_etcd=etcd.endpoint)
    wait_for(lambda: _serving(second, "standby"), timeout=60, what="the second master a standby")
    yield first, second
    for m in (first, second):
        m.stop()
    etcd.stop()


def _put(producer: Producer, key: str, seed: int, waits: list):
    """A producer puts again while the master fails over (its generated output is still in its hands)."""
    since = time.monotonic()
    while True:
        try:
            return producer.put(key, seed=seed, shape=SHAPE)
        except RuntimeError:
            if time.monotonic() - since > 90:
                raise
            waits.append(key)
            time.sleep(0.5)


def test_a_killed_leader_fails_over_under_load_and_nothing_is_lost_or_scored_twice(ray_cluster, ha):
    leader, standby = ha
    assert leader.address.startswith("etcd://") and leader.address == standby.address
    producer = Producer(leader)
    workers = [start_actor(pool_cfg(leader, "ha", {"name": "mean-intensity"}), f"ha-pod-{i}", "127.0.0.1",
                           control_key=KEY)
               for i in range(2)]
    store = Store.connect(StoreConfig(master=leader.address, protocol="tcp", segment_bytes=0,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
    client = RewardPoolClient("ha", "t", refresh_seconds=0.5, timeout=120, batch_size=2)
    releaser = Releaser(store)
    done_at: list[float] = []  # when each round's scores were all in
    scores: dict[str, float] = {}
    put_waits: list[str] = []
    killed_at: list[float] = []
    errors: list[BaseException] = []

    lost: list[str] = []  # outputs the failover lost (put just before the kill): the producer puts them again

    def load():
        try:
            r = 0
            while not killed_at or sum(t > killed_at[0] for t in done_at) < 4:
                todo = {f"ha/r{r}/s{i}": 9000 + r * 10 + i for i in range(PER_ROUND)}
                tries = 0
                while todo:
                    refs = [_put(producer, f"{k}/t{tries}", seed, put_waits) for k, seed in todo.items()]
                    releaser.expect(refs)
                    got = client.score(refs, ["p"] * len(refs))
                    gone = [x for x, s in zip(refs, got) if isinstance(s, SampleError)]
                    for x, s in zip(refs, got):
                        if isinstance(s, SampleError):
                            assert isinstance(s.cause, (ObjectNotFound, ReplicaNotReady)), s
                        else:
                            scores[x.key.rsplit("/", 1)[0]] = s
                            todo.pop(x.key.rsplit("/", 1)[0])
                    releaser.rewarded([x for x in refs if x not in gone])
                    releaser.failed(gone)
                    lost.extend(x.key for x in gone)
                    tries += 1
                    assert tries < 5, f"outputs of round {r} lost {tries} times"
                done_at.append(time.monotonic())
                r += 1
                assert r < 200, "the load never recovered after the failover"
        except BaseException as e:  # noqa: BLE001 (reported by the test thread)
            errors.append(e)

    try:
        t = threading.Thread(target=load, daemon=True)
        t.start()
        wait_for(lambda: len(done_at) >= 3 or errors, timeout=120, what="3 rounds scored before the fault")
        killed_at.append(time.monotonic())
        leader.kill()
        wait_for(lambda: _serving(standby, "leader"), timeout=90, what="the standby took over as leader")
        took_over = time.monotonic() - killed_at[0]
        t.join(300)
        assert not errors, errors
        assert not t.is_alive(), "the load did not finish"

        rounds = len(done_at)
        # what the scorer gives for each output's tensor in this process, never read through the store
        direct = MeanIntensityScorer()
        expected = {f"ha/r{r}/s{i}": direct.score_batch([make_tensor(9000 + r * 10 + i, list(SHAPE), "float32")],
                                                        ["p"])[0] for r in range(rounds) for i in range(PER_ROUND)}
        assert scores == pytest.approx(expected)  # every output, with its own score
        # each output scored once: the workers' own count of outputs scored is the number of scores returned
        import ray

        assert sum(ray.get(w.stats.remote())["outputs"] for w in workers) == len(expected)
        # every output put was released once: scored ones after their reward, lost ones through failed() (a key
        # with no completed replica is removed; one the new leader never heard of is a failed release)
        st = releaser.stats
        assert releaser.pending == 0 and st.failed_released == len(lost)
        assert st.released + st.release_failures == len(expected) + len(lost)
        # the only release failure allowed is "no such object": a put the failover lost, found at its read (then
        # put again) or only at its release (it was read and scored on the old leader just before the kill)
        assert st.release_failures == st.already_gone
        # a remove the dying leader acknowledged before its op log entry was durable comes back on the new
        # leader: the Releaser confirms every remove later and makes those again
        assert releaser.settle(timeout=120) == 0
        assert st.released <= st.confirmed <= st.released + st.resurrected  # each remove checked (and each redone)
        assert not {k for k in standby.keys() if k.startswith("ha/")}, "outputs left in the store"
        first_after = min(x for x in done_at if x > killed_at[0]) - killed_at[0]
        print(f"\nstore master failover: standby leading after {took_over:.1f}s, first round scored again "
              f"{first_after:.1f}s after the kill; {rounds} rounds, {len(lost)} outputs lost in the failover and put again, {client.store_outages} batch tries waited "
              f"for the master, {len(put_waits)} puts retried, {releaser.stats.outage_retries} releases retried, "
              f"{releaser.stats.resurrected} removes the failover undid and made again, {st.already_gone} releases "
              f"found the output gone")
    finally:
        import ray

        for w in workers:
            ray.kill(w)
        producer.kill()
        store.close()
