"""The model cache (RewardModelCache), its own controller and node agent: names, the node layout and the pure
decisions (`layout`), the cache's controller (`controller`: summaries, deletion), the node agent (`agent`), the
copy pod's copy (`copier`)."""
