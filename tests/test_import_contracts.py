"""The layering of docs/architecture.md ("The rule"), stated as import-linter contracts in
``.importlinter`` at the repository root: `lint-imports` must keep every one, and its report is
the failure message. Imports inside functions and under TYPE_CHECKING count like module-level
ones (grimp reads them all)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_lint_imports_keeps_every_contract() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), f"{lint} is missing: `make setup` installs import-linter (setup.py, extra 'test')"
    done = subprocess.run([str(lint), "--no-cache", "--no-logo", str(REPO / ".importlinter")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"lint-imports found a broken contract:\n{done.stdout}{done.stderr}"
    assert "0 broken" in done.stdout, done.stdout


def test_no_module_imports_itself_through_others() -> None:
    """Stricter than the acyclic-siblings contract, which squashes packages: no module of ralp_tf or
    scheduler reaches, through any chain of imports, a module that imports it (a package's
    ``__init__`` and its own modules included)."""
    import grimp

    graph = grimp.build_graph("ralp_tf", "scheduler", cache_dir=None)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if imported != module and back:
                cycles.append(f"{module} -> {' -> '.join(back)}")
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
