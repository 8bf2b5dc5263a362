"""Which of the package's modules a job runs: the static import closure of its entry modules (stdlib only).

A rule's code hash (``params.code``, what makes Snakemake rerun a job after a code edit) covers every featlearn
module the job may import, found by walking the ``import`` statements of the sources, at any depth (an import
inside a function counts: it runs when the function does). ``import featlearn.a.b`` and ``from featlearn.a
import b`` also run the ``__init__.py`` of every package on the way, so those count too. Imports of other
packages (torch, pandas, ...) are left out: their versions are recorded in the run record.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "featlearn"
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/featlearn


def module_file(name: str, root: Path = PACKAGE_DIR) -> Path | None:
    """The source file of module ``name`` (``featlearn.x.y``) under ``root``, or None if it is not a module there."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = root.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    file = base.with_suffix(".py")
    return file if file.is_file() else None


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _imports_of(path: Path, name: str, root: Path) -> set[str]:
    """featlearn modules imported anywhere in ``path`` (module ``name``), with the packages on their way."""
    stat = path.stat()
    out = set()
    for mod in _imported_names(str(path), name, stat.st_mtime_ns, stat.st_size):
        if module_file(mod, root) is not None:
            out.add(mod)
            out.update(p for p in _parents(mod) if module_file(p, root) is not None)
    return out


@functools.lru_cache(maxsize=None)
def _imported_names(path_text: str, name: str, mtime_ns: int, size: int) -> frozenset[str]:
    """Every module name the source at ``path_text`` imports, of any package, with ``from a import b``'s
    ``a.b``; parsed once per file version (its size and modification time), as every job's closure walks the
    same files (a Snakemake call builds dozens)."""
    path = Path(path_text)
    tree = ast.parse(path.read_text(), filename=path_text)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            # `from featlearn.a import b`: b may be a submodule
            found.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return frozenset(found)


def _statements(body: list) -> Iterator[ast.AST]:
    """Every statement in ``body`` and in the blocks nested in it, at any depth (functions, classes, loops, ``try``,
    ``with``, ``match``): where an import can be, since an expression holds no statement. Walking the blocks only
    visits a fraction of the nodes ``ast.walk`` visits."""
    todo = list(reversed(body))
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(reversed(block))


def closure(entries: tuple[str, ...] | list[str], root: Path = PACKAGE_DIR) -> list[str]:
    """Every featlearn module the entry modules may import, themselves and their packages included, sorted."""
    return list(_closure(tuple(sorted(set(entries))), str(root), _stamp(root)))


@functools.lru_cache(maxsize=None)
def _closure(entries: tuple[str, ...], root_text: str, stamp: tuple) -> tuple[str, ...]:
    root = Path(root_text)
    seen: set[str] = set()
    todo = [m for e in entries for m in (*_parents(e), e)]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        path = module_file(mod, root)
        if path is None:
            if mod in entries:
                raise ValueError(f"{mod} is not a module of the {PACKAGE} package under {root}")
            continue
        seen.add(mod)
        todo.extend(_imports_of(path, mod, root) - seen)
    return tuple(sorted(seen))


def files(entries, root: Path = PACKAGE_DIR) -> list[str]:
    """The closure's source files, relative to the package folder (``scan_snap/train.py``)."""
    return [str(module_file(m, root).relative_to(root)) for m in closure(entries, root)]


def modules_hash(entries, extra: tuple[str, ...] = (), root: Path = PACKAGE_DIR) -> str:
    """sha256 (12 hex digits) over the closure's sources and the ``extra`` package files or folders (relative
    paths of files that imports do not reach), each with its relative path."""
    return _modules_hash(tuple(sorted(set(entries))), tuple(extra), str(root), _stamp(root))


def _stamp(root: Path) -> tuple:
    """Sizes and modification times of the package's sources: a cached hash is reused only while they hold. (A
    Snakemake call asks for it a hundred times: one ``os.stat`` a file, with ``os.walk``.)"""
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py"):
                st = os.stat(path := os.path.join(folder, name))
                out.append((path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(out))


@functools.lru_cache(maxsize=None)
def _modules_hash(entries: tuple[str, ...], extra: tuple[str, ...], root_text: str, stamp: tuple) -> str:
    root = Path(root_text)
    paths = set(files(entries, root))
    for rel in extra:
        p = root / rel
        paths.update(str(f.relative_to(root)) for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p]))
    h = hashlib.sha256()
    for rel in sorted(paths):
        h.update(rel.encode())
        h.update((root / rel).read_bytes())
    return h.hexdigest()[:12]


def modules(root: Path = PACKAGE_DIR) -> list[str]:
    """Every module of the package under ``root`` (packages by their name, ``featlearn.x`` for ``x/__init__.py``)."""
    out = []
    for path in sorted(Path(root).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join([PACKAGE, *parts]))
    return out


def graph(root: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """Module -> the package modules it imports, anywhere in its source (a package a module sits in, which runs
    first whatever the module imports, is not counted as an import of it)."""
    return {m: _imports_of(module_file(m, root), m, root) - {m, *_parents(m)} for m in modules(root)}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``edges``: its strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def entry_module(spec: str) -> str:
    """The module of a ``module:function`` spec."""
    return spec.partition(":")[0]
