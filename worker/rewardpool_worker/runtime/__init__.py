"""The worker process: `main` (the pod's entrypoint: Ray, HTTP health and control, drain), the Ray actor
(`actor`), its read slots and scoring thread (`slots`), the registered reader, metrics, control-call
authentication and the pod's network."""
