"""What import-linter cannot state of the architecture (docs/architecture.md): every module states
its public names, the scheduler uses only names ralp_tf's packages export, and modules and
functions stay short. The direction of imports and the absence of cycles are contracts in
``.importlinter`` (tests/test_import_contracts.py)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
            if module.count(".") > 1 or (REPO / Path(*module.split("."))).with_suffix(".py").exists():
                continue  # a module inside a package: the forbidden contract in .importlinter refuses it
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
