"""A pool's decisions, pure (no client, no I/O): sizing, placement, validation and Pod Security, the desired
objects (`builders`), what a pass sees (`observed`), what it changes (`plan`, a list of named steps, with `roll`,
`rollout`, `drain`, `autoscaler`, `datapath`, `podstatus`) and the status it writes (`status`)."""
