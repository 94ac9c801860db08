"""Faults users meet on real clusters, played on purpose and survived.

* :mod:`ralp_tf.faults.plan`: fault plans (link down, throttle, kill, add a worker) as data, and
  the seeded chaos schedule;
* :mod:`ralp_tf.faults.restart`: the restart budget and backoff;
* :mod:`ralp_tf.faults.supervisor`: a supervised run that restarts failed tasks, plays a plan and
  measures each recovery; :mod:`ralp_tf.faults.report`: what it reports;
* :mod:`ralp_tf.faults.coordinator`: its coordinator process (checkpoints, step progress);
* :mod:`ralp_tf.cli.faults`: the ``ralp-tf chaos`` command and the supervised mode of ``ralp-tf run``.
"""

__all__: list[str] = []
