"""A producer's bad input is named before any store call (the store's own errors do not say what was wrong)."""
import pytest
import torch

from rewardpool_worker.records import OutputRef, put_output


class Store:
    def __init__(self):
        self.puts = []

    def put_bytes(self, key, data, preferred_segment=None):
        self.puts.append((key, data.numel()))


@pytest.mark.parametrize("tensor,error,words", [
    (torch.zeros(0), ValueError, ["'k' is empty", "shape (0,)"]),
    (torch.zeros(3, 0, 4, 4), ValueError, ["'k' is empty", "(3, 0, 4, 4)"]),
    (torch.zeros(2, dtype=torch.complex64), TypeError, ["dtype torch.complex64 cannot be stored", "float32"]),
    (torch.zeros(2, device="meta"), ValueError, ["meta tensor"]),
    ([1.0, 2.0], TypeError, ["expected a torch.Tensor, got list"]),
], ids=["empty", "zero frames", "complex", "meta", "a list"])
def test_bad_outputs_are_refused_before_the_store_is_called(tensor, error, words):
    store = Store()
    with pytest.raises(error) as e:
        put_output(store, "k", tensor)
    assert all(w in str(e.value) for w in words), str(e.value)
    assert store.puts == []


def test_a_good_output_is_put_whole_and_described_by_its_ref():
    store = Store()
    ref = put_output(store, "k", torch.zeros(3, 2, 4, 4, dtype=torch.uint8))
    assert store.puts == [("k", 96)] and ref == OutputRef("k", 96, "uint8", (3, 2, 4, 4))
