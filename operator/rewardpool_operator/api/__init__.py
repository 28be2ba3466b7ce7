"""The API's types and words, pure: the typed spec (`spec`), every condition type and reason (`reasons`), how
conditions merge (`conditions`), what is wrong with a pool (`findings`), Kubernetes quantities (`quantity`)."""
