"""RewardPool worker runtime, by role:

- `contract`: everything that crosses between operator and worker (the only module the operator imports);
- `runtime/`: the worker process (entrypoint, Ray actor, read slots, reader, metrics, control, network);
- `scorers/`: the scorer interface, the built-ins, and how a worker builds what it hosts;
- `client/`: what a training job imports (clients, router, releaser, demand hint);
- `integrations/`: adapters for training frameworks (miles, tensor-only loops);
- `store`, `records`, `frames`, `errors`: the bottom layer both sides use.

Importing this package stays light: torch, Ray and Mooncake load only in the modules that need them."""
