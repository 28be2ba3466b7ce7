"""The only code that talks to the Kubernetes API: the calls (`kube`), the watches and the caches they keep
(`watches`, `podcache`), the Lease (`leader`)."""
