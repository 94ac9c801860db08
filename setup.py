"""Install ralp_tf (the TensorFlow extension) and scheduler (HeterPS-style placement)."""
from setuptools import find_packages, setup

setup(
    name="ralp_tf",
    version="0.1.0",
    description="Resource-aware layer placement for tf.distribute.ParameterServerStrategy",
    packages=find_packages(include=["ralp_tf", "ralp_tf.*", "scheduler", "scheduler.*"]),
    # data files a non-editable install needs too (make setup installs editable)
    package_data={"scheduler": ["catalogs/*.json", "workloads/profiles/*.json", "weights/*.npz"],
                  "ralp_tf.run": ["_native/*.c"], "ralp_tf.plan": ["profiles/*.json"]},
    python_requires=">=3.11",
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tf-keras>=2.21,<2.22",
        "tensorflow-probability>=0.25",
        "numpy",
        "absl-py",
        "scipy>=1.11",
        # ml_dtypes 0.7.0 takes 1.3 s to import (0.6.0: 0.2 s), paid by every TF task process.
        "ml_dtypes>=0.5.1,<0.7",
    ],
    extras_require={
        "test": ["pytest", "hypothesis", "pytest-xdist>=3.5", "import-linter>=2.17"],
        "bench": ["matplotlib"],
    },
    entry_points={
        "console_scripts": ["ralp-tf=ralp_tf.cli.main:console_main"],
        "ralp_tf.policies": ["scheduler = scheduler.policies:register"],
    },
)
