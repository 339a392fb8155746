"""The reconcile pipeline: snapshot (gangs) -> plan (the core) -> act (executor, podgroups) ->
report (status, events, metrics). Depends on the API layer and the core."""
