"""The pool's controller: a loop per pool (`loop`), one pass of it (`reconcile`: observe, plan, apply, status),
the owned objects read, decided and written (`owned`), the workers' HTTP (`workers`), the pool's metrics."""
