"""Unit tests: each image deploy/Dockerfile.* builds holds every module its command imports, and installs every
library those modules import. The scheduler's image copies four files of worker/ (the model card it reads); a fifth
that worker/config.py came to import (quant_config_shape, commit 9839cf8) was not copied, so `python -m
scheduler.server` died at start in its container with ModuleNotFoundError (and `docker compose up` never became
healthy) while every test passed on the checkout, where all of worker/ is there. No Docker here: the imports are
read from the source (also those inside functions), from the command's module outward."""
import ast
import importlib.metadata
import os
import re
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL = {name for name in os.listdir(REPO) if os.path.isfile(os.path.join(REPO, name, "__init__.py"))}
# proto/__init__.py generates its stubs into proto/gen (the image does so as it is built) and imports them from there.
GENERATED = {"sparkinfer"}
IMAGES = ["gateway", "scheduler", "worker"]


def _dockerfile(image: str) -> tuple:
    """(the paths its COPY lines bring in, the distributions its pip lines install or None for a requirements file,
    the module its CMD runs)."""
    with open(os.path.join(REPO, "deploy", f"Dockerfile.{image}"), encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    copies, dists = [], set()
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["COPY"]:
            copies += [path.rstrip("/") for path in words[1:-1]]
        elif "pip" in words and "install" in words:
            if "-r" in words:
                return copies + _copies_after(text, line), None, _command_module(text)
            dists |= {_normal(re.split(r"[=<>!\[;]", word.strip('"'))[0])
                      for word in words[words.index("install") + 1:] if not word.startswith("-")}
    return copies, dists, _command_module(text)


def _copies_after(text: str, line: str) -> list:
    rest = text[text.index(line) + len(line):]
    return [path.rstrip("/") for words in map(str.split, rest.splitlines()) if words[:1] == ["COPY"]
            for path in words[1:-1]]


def _command_module(text: str) -> str:
    command = re.search(r'^CMD \["python3?", "-m", "([\w.]+)"\]', text, re.M)
    assert command, "the image's CMD runs `python -m <module>`"
    return command.group(1)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_file(module: str):
    base = os.path.join(REPO, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _imports(path: str, module: str) -> tuple:
    """(the local modules, the top-level names of other imports) a file names anywhere in it, outside a `try`
    (an optional import, such as the worker's CUDA libraries, guards itself)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    guarded = {id(node) for block in ast.walk(tree) if isinstance(block, ast.Try)
               for statement in block.body for node in ast.walk(statement)}
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    local, other = set(), set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names if _module_file(f"{base}.{alias.name}")]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in LOCAL:
                local.add(name)
            else:
                other.add(top)
    return local, {name for name in other if name not in sys.stdlib_module_names | GENERATED | {"__future__"}}


def _closure(module: str) -> tuple:
    """Every local module a run of `module` can import (its packages' __init__ too), and the other top-level names."""
    seen, others, todo = set(), set(), [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for prefix in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
            if prefix in seen:
                continue
            seen.add(prefix)
            path = _module_file(prefix)
            if path:
                local, other = _imports(path, prefix)
                todo += sorted(local)
                others |= other
    return seen, others


def _covered(module: str, copies: list) -> bool:
    path = _module_file(module)
    relative = os.path.relpath(path, REPO) if path else module.replace(".", "/")
    return any(relative == copy or relative.startswith(copy + "/") for copy in copies)


@pytest.mark.parametrize("image", IMAGES)
def test_the_image_copies_every_module_its_command_imports(image):
    copies, _, command = _dockerfile(image)
    modules, _ = _closure(command)
    assert [module for module in sorted(modules) if not _covered(module, copies)] == []


def _installed_with(dists: set) -> set:
    """The distributions pip installs for these names: them and what they require (extras left out)."""
    done, todo = set(), list(dists)
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_normal(re.split(r"[ =<>!\[;(~]", line)[0]) for line in requires if "extra ==" not in line]
    return done


@pytest.mark.parametrize("image", [image for image in IMAGES if _dockerfile(image)[1] is not None])
def test_the_image_installs_every_library_its_command_imports(image):
    _, dists, command = _dockerfile(image)
    _, names = _closure(command)
    providers = importlib.metadata.packages_distributions()
    installed = _installed_with(dists)
    missing = {name: providers.get(name) for name in sorted(names)
               if not {_normal(dist) for dist in providers.get(name, [])} & installed}
    assert missing == {}
