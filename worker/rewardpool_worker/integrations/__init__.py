"""Adapters for training frameworks: `miles` (the --custom-rm-path hook) and `tensors` (score_tensors, for
frameworks that hold outputs as tensors)."""
