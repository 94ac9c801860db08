"""Start a LocalCluster, train, raise in the middle of training; print the task PIDs first."""
import json
import sys

from ralp_tf import models
from ralp_tf.run.launch import LocalCluster
from ralp_tf.run.training import train
from ralp_tf.run.traffic import cluster_endpoints


def main() -> None:
    with LocalCluster(workers=2, ps=1) as lc:
        print(json.dumps({"pids": lc.pids()}), flush=True)

        def boom(i: int) -> None:
            if i == 2:
                raise RuntimeError("injected failure in the middle of training")

        train(lc.strategy(), lambda: models.small_cnn(fc=64), policy="ralp", steps=10, batch_size=8,
              endpoints=cluster_endpoints(lc), on_step=boom)


if __name__ == "__main__":
    sys.exit(main())
