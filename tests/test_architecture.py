"""The package layout is the architecture (docs/architecture.md): imports run one way, every
module states its public names, the scheduler uses only ralp_tf's public API, and modules and
functions stay short."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Package -> rank: a module may import ralp_tf modules of its own rank or lower only.
RANKS = {"errors": 0, "model": 1, "plan": 2, "place": 3, "run": 4, "testbed": 5, "bench": 6, "faults": 6,
         "zoo": 6, "cli": 7}


def _modules(top: str) -> list[Path]:
    return sorted(p for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every absolute import in ``path``, function-level ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend((a.name, [], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names], node.lineno))
    return out


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "ralp_tf" and len(parts) > 1 else None


def test_imports_run_one_way_and_only_the_command_line_names_the_scheduler() -> None:
    wrong = []
    for path in _modules("ralp_tf"):
        rel = path.relative_to(REPO / "ralp_tf")
        if len(rel.parts) == 1:
            continue  # ralp_tf/__init__.py (the public API) and ralp_tf/errors.py
        own = rel.parts[0]
        for module, names, line in _imports(path):
            if module == "scheduler" or module.startswith("scheduler."):
                if own != "cli":
                    wrong.append(f"ralp_tf/{rel}:{line} imports {module}")
                continue
            target = _package(module)
            if target is None:
                continue
            if module == "ralp_tf":  # from ralp_tf import x: the public API, itself the top
                wrong.append(f"ralp_tf/{rel}:{line} imports the top-level package; import the module itself")
                continue
            if target not in RANKS:
                wrong.append(f"ralp_tf/{rel}:{line} imports {module}, outside every package")
            elif RANKS[target] > RANKS[own] or (RANKS[target] == RANKS[own] and target != own):
                wrong.append(f"ralp_tf/{rel}:{line}: {own} (rank {RANKS[own]}) imports {module} "
                             f"({target}, rank {RANKS[target]})")
    assert not wrong, "\n".join(wrong)


def _public_names(package: str) -> set[str]:
    return _module_all(REPO / Path(*package.split(".")) / "__init__.py")


def _module_all(path: Path) -> set[str]:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def test_the_scheduler_imports_only_public_names_of_ralp_tf() -> None:
    wrong = []
    for path in _modules("scheduler"):
        for module, names, line in _imports(path):
            if not module.startswith("ralp_tf"):
                continue
            where = f"{path.relative_to(REPO)}:{line}"
            if module == "ralp_tf.errors":
                missing = [n for n in names if n not in _module_all(REPO / "ralp_tf" / "errors.py")]
                wrong.extend(f"{where} imports {n} from ralp_tf.errors, which does not export it" for n in missing)
                continue
            if module.count(".") > 1 or (module.count(".") == 1 and (REPO / Path(*module.split("."))).with_suffix(
                    ".py").exists()):
                wrong.append(f"{where} imports module {module}: import from its package instead")
                continue
            missing = [n for n in names if n not in _public_names(module)]
            if missing:
                wrong.append(f"{where} imports {missing} from {module}, which does not export them (__all__)")
    assert not wrong, "\n".join(wrong)


def test_every_module_states_its_public_names() -> None:
    missing = [str(p.relative_to(REPO)) for top in ("ralp_tf", "scheduler") for p in _modules(top)
               if p.name != "__main__.py" and not _has_all(p)]
    assert not missing, f"modules without __all__: {missing}"


def _has_all(path: Path) -> bool:
    return any((isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in n.targets))
               or (isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "__all__")
               for n in ast.parse(path.read_text()).body)


#: A module's and a function's length limits (docs/architecture.md); a longer function says why in
#: its docstring, in a sentence starting "Long because".
MODULE_LINES, FUNCTION_LINES = 600, 80


def test_modules_and_functions_stay_short() -> None:
    long_modules, long_functions = [], []
    for top in ("ralp_tf", "scheduler"):
        for path in _modules(top):
            text = path.read_text()
            if len(text.splitlines()) > MODULE_LINES:
                long_modules.append(f"{path.relative_to(REPO)} ({len(text.splitlines())} lines)")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > FUNCTION_LINES and "Long because" not in (ast.get_docstring(node) or ""):
                        long_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({length} lines)")
    assert not long_modules, f"modules over {MODULE_LINES} lines: {long_modules}"
    assert not long_functions, f"functions over {FUNCTION_LINES} lines with no stated reason: {long_functions}"
