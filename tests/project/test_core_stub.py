"""``hf_bpe/_core.pyi`` against the Rust extension it types: the stub names every class, member and
function the extension exports and nothing else, each with the extension's parameters (names, kinds,
which have defaults), properties as properties and static methods as static methods; so mypy checks
the package against the real boundary and the stub cannot drift from it. (``python -m mypy.stubtest
hf_bpe._core`` checks this too, more slowly.)"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from hf_bpe import _core

STUB = Path(_core.__file__).with_name("_core.pyi")

IMPLICIT = {"__doc__", "__module__", "__repr__", "__str__", "__slotnames__"}
"""What Python puts in every class's namespace, and what a stub leaves to ``object`` (the same signature,
ruff's PYI029); ``__slotnames__`` is copyreg's cache, set on a class once an instance is pickled or copied."""

BESIDE_EQ = {"__ne__", "__lt__", "__le__", "__gt__", "__ge__"}
"""The comparison wrappers Python adds next to an extension class's ``__eq__`` (one slot serves all six
operators; those the core does not define return NotImplemented), so they are not in the stub."""

Parameter = tuple[str, str, bool]
"""A parameter as compared: its name ("" when positional-only, where the name is no interface), its
kind, and whether it has a default."""


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"), filename=str(STUB))


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _functions(body: list[ast.stmt]) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in body if isinstance(node, ast.FunctionDef)}


def _members(node: ast.ClassDef) -> set[str]:
    """The names a stub class defines: its methods and properties, and attributes it declares."""
    declared = {item.target.id for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    return set(_functions(node.body)) | declared


def _runtime_members(cls: type) -> set[str]:
    names = set(vars(cls)) - IMPLICIT
    return names - BESIDE_EQ if "__eq__" in names else names


def _decorators(function: ast.FunctionDef) -> set[str]:
    return {decorator.id for decorator in function.decorator_list if isinstance(decorator, ast.Name)}


def _stub_parameters(function: ast.FunctionDef) -> list[Parameter]:
    """The parameters of a stub function, without ``self`` or ``cls`` for a method (not a static one)."""
    arguments = function.args
    positional = [(argument, "POSITIONAL_ONLY") for argument in arguments.posonlyargs]
    positional += [(argument, "POSITIONAL_OR_KEYWORD") for argument in arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    parameters = [("" if kind == "POSITIONAL_ONLY" else argument.arg, kind, index >= first_default)
                  for index, (argument, kind) in enumerate(positional)]
    if arguments.vararg is not None:
        parameters.append((arguments.vararg.arg, "VAR_POSITIONAL", False))
    parameters += [(argument.arg, "KEYWORD_ONLY", default is not None)
                   for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)]
    if arguments.kwarg is not None:
        parameters.append((arguments.kwarg.arg, "VAR_KEYWORD", False))
    return parameters


def _runtime_parameters(function: Any) -> list[Parameter]:
    return [("" if parameter.kind is parameter.POSITIONAL_ONLY else parameter.name, parameter.kind.name,
             parameter.default is not parameter.empty)
            for parameter in inspect.signature(function).parameters.values()]


def _cases() -> list[tuple[str, ast.FunctionDef, Any, bool]]:
    """Every function of the stub with its runtime counterpart: (name, stub, runtime, is a method)."""
    tree = _stub()
    cases = [(name, node, getattr(_core, name, None), False) for name, node in _functions(tree.body).items()]
    for class_name, class_node in _classes(tree).items():
        cls = getattr(_core, class_name, None)
        for name, node in _functions(class_node.body).items():
            # A class's signature is its constructor's (`__new__` itself takes `*args, **kwargs`).
            runtime = cls if name == "__new__" else vars(cls).get(name) if cls is not None else None
            cases.append((f"{class_name}.{name}", node, runtime, True))
    return cases


def test_the_stub_names_every_class_and_function_of_the_extension() -> None:
    tree = _stub()
    exported = {name for name in dir(_core) if not (name.startswith("__") and name.endswith("__"))}
    assert set(_classes(tree)) | set(_functions(tree.body)) == exported
    declared_all = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                        and any(isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets))
    assert sorted(declared_all) == sorted(_core.__all__)


@pytest.mark.parametrize("name", sorted(_classes(_stub())))
def test_the_stub_names_every_member_of_the_class(name: str) -> None:
    cls = getattr(_core, name)
    stub = _members(_classes(_stub())[name])
    runtime = _runtime_members(cls)
    assert stub == runtime, f"only in the stub: {sorted(stub - runtime)}; only in the extension: {sorted(runtime - stub)}"


@pytest.mark.parametrize(("name", "stub", "runtime", "is_method"), _cases(), ids=[case[0] for case in _cases()])
def test_the_stub_gives_the_extensions_parameters(name: str, stub: ast.FunctionDef, runtime: Any,
                                                  is_method: bool) -> None:
    assert runtime is not None, f"{name} is not in the extension"
    decorators = _decorators(stub)
    assert ("property" in decorators) == inspect.isgetsetdescriptor(runtime), f"{name}: property or method"
    if "property" in decorators:
        return
    static = "staticmethod" in decorators
    assert static == isinstance(runtime, staticmethod), f"{name}: static or not"
    parameters = _stub_parameters(stub)
    if is_method and not static:
        parameters = parameters[1:]
    expected = _runtime_parameters(runtime.__func__ if static else runtime)
    if is_method and not static and stub.name != "__new__":
        expected = expected[1:]
    assert parameters == expected
