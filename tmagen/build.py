"""Writing rendered files: only inside the output root, only over a folder that a previous build
wrote (its manifest.json lists every file in it), each folder replaced whole through a temporary
folder and a rename under a lock, and comparing what is on disk with what the specs render."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tmagen.errors import OutputError, SpecError
from tmagen.plan import Plan
from tmagen.plan import load as load_plan
from tmagen.render import render
from tmagen.spec import Spec

try:
    import fcntl
except ImportError:  # not POSIX: no lock, the swap below still retries
    fcntl = None  # type: ignore[assignment]

MANIFEST = "manifest.json"  # what tmagen.render writes beside the files: the spec and each file's hash
SWAP_ATTEMPTS = 50  # renames retried while another writer (without a lock) holds the name


@dataclass(frozen=True)
class Rendered:
    plan: Plan
    spec_file: str  # as given, relative where possible: it is written into the files
    files: dict[str, str]

    @property
    def spec(self) -> Spec:
        return self.plan.spec


def render_spec_file(path: str | Path) -> Rendered:
    plan = load_plan(path)
    shown = Path(path)
    try:
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = Path(shown.name)  # never an absolute path in the output
    return Rendered(plan, shown.as_posix(), render(plan, shown.as_posix()))


def unique_names(rendered: Sequence[Rendered], given: Sequence[str]) -> list[Rendered]:
    """The specs of one build, each folder written by one spec: the same file given twice counts
    once; two files of one ``name`` are refused (the second would overwrite the first)."""
    seen: dict[str, tuple[str, Path]] = {}
    out, problems = [], []
    for r, path in zip(rendered, given):
        real = Path(path).resolve()
        first = seen.get(r.spec.name)
        if first is None:
            seen[r.spec.name] = (path, real)
            out.append(r)
        elif first[1] != real:
            problems.append(f"name = {r.spec.name!r} in both {first[0]} and {path}, but each spec writes the "
                            f"folder of its name: give one of them another name")
    if problems:
        raise SpecError("build", problems)
    return out


def _folder(out_root: Path, name: str) -> Path:
    root = out_root.resolve()
    folder = (root / name).resolve()
    if folder.parent != root:  # spec names are identifiers; this guards the invariant
        raise OutputError(f"refusing to write {folder}: outside the output root {root}")
    return folder


def owned_files(folder: Path) -> set[str] | None:
    """The names a previous build wrote into ``folder`` (its manifest's files and the manifest
    itself), or None where the folder has no tmagen manifest."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (not isinstance(manifest, dict) or "tmagen_version" not in manifest
            or not isinstance(manifest.get("files"), dict)):
        return None
    return {str(f) for f in manifest["files"]} | {MANIFEST}


def foreign_files(folder: Path) -> list[str]:
    """What ``folder`` holds that no tmagen build wrote: every entry of a folder without a tmagen
    manifest, else those its manifest does not list. Folders end in '/'."""
    if not folder.exists() and not folder.is_symlink():
        return []
    if not folder.is_dir():
        return [folder.name]  # a file where the folder goes
    owned = owned_files(folder) or set()
    return sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir() if p.name not in owned)


def _refuse_foreign(folder: Path, foreign: list[str]) -> None:
    shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more" if len(foreign) > 10 else "")
    where = "is a file" if foreign == [folder.name] and not folder.is_dir() else f"holds {shown}"
    raise OutputError(f"{folder} {where}, but tmagen build replaces only a folder of its own (the files its "
                      f"manifest.json lists): move them out, pick another --out, or pass --force to delete them")


@contextlib.contextmanager
def _locked(root: Path, name: str) -> Iterator[None]:
    """Holds ``root/.NAME.lock`` (flock) while one build replaces ``root/NAME``: parallel builds
    (make -j, ninja) of one spec take turns. The holder deletes the file on release; a waiter that
    then holds a deleted file tries again, so no lock file is left behind."""
    if fcntl is None:
        yield
        return
    path = root / f".{name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if not same:
                continue
            try:
                yield
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            return
        finally:
            os.close(fd)  # releases the lock


def _mkdir_unique(root: Path, prefix: str) -> Path:
    """A new folder in ``root`` with the umask's permissions (tempfile.mkdtemp makes them 0700)."""
    while True:
        path = root / f"{prefix}{secrets.token_hex(6)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _swap(staging: Path, folder: Path, root: Path, name: str) -> None:
    """Puts ``staging`` at ``folder``, the previous folder (if any) removed, retrying where another
    writer got there between two renames."""
    for _ in range(SWAP_ATTEMPTS):
        if folder.exists():
            retired = _mkdir_unique(root, f".{name}.old.")
            try:
                os.replace(folder, retired / "old")
            except FileNotFoundError:
                retired.rmdir()
                continue  # another writer moved it first
            try:
                os.replace(staging, folder)
                return
            except OSError:
                continue  # another writer put its folder there first: retire that one too
            finally:
                shutil.rmtree(retired, ignore_errors=True)
        try:
            os.replace(staging, folder)
            return
        except OSError:
            continue
    raise OutputError(f"{folder}: other writers kept replacing it; build it again")


def write(rendered: Rendered, out_root: str | Path, *, force: bool = False) -> Path:
    """Writes the folder ``out_root/<spec name>``, replacing any previous one only when every file
    is written: a failure leaves the previous output whole. A folder that holds anything a build
    did not write is refused (OutputError naming it) unless ``force``."""
    name = rendered.spec.name
    with contextlib.ExitStack() as stack:
        try:
            root = Path(out_root)
            root.mkdir(parents=True, exist_ok=True)
            folder = _folder(root, name)
            root = folder.parent
            stack.enter_context(_locked(root, name))
            foreign = foreign_files(folder)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise OutputError(f"--out {str(out_root)!r}: cannot write the output folder there "
                              f"({exc.strerror if isinstance(exc, OSError) else exc}): give a folder you can write"
                              ) from None
        if foreign and not force:
            _refuse_foreign(folder, foreign)
        staging = _mkdir_unique(root, f".{name}.")
        try:
            for rel, text in sorted(rendered.files.items()):
                with open(staging / rel, "w", encoding="utf-8", newline="\n") as f:
                    f.write(text)
            if folder.exists() and not folder.is_dir():  # a file where the folder goes, and --force
                folder.unlink()
            _swap(staging, folder, root, name)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return folder


def differences(rendered: Rendered, out_root: str | Path) -> list[str]:
    """How the committed folder differs from what the spec renders: one line per file, files that
    no build wrote included."""
    folder = _folder(Path(out_root), rendered.spec.name)
    out: list[str] = []
    if folder.exists() and not folder.is_dir():
        return [f"{folder}: a file, not the folder tmagen build writes"]
    if not folder.is_dir():
        return [f"{folder}: missing (run tmagen build {rendered.spec_file})"]
    on_disk = {p.name for p in folder.iterdir()}
    for rel, text in sorted(rendered.files.items()):
        path = folder / rel
        if rel not in on_disk or not path.is_file():
            out.append(f"{path}: missing")
            continue
        old = path.read_text(encoding="utf-8")
        if old != text:
            changed = sum(1 for line in difflib.unified_diff(old.splitlines(), text.splitlines(), n=0)
                          if line[:1] in "+-" and not line.startswith(("+++", "---")))
            out.append(f"{path}: differs ({changed} changed lines)")
    out.extend(f"{folder / extra}: not generated by the spec (tmagen build refuses to replace a folder holding it)"
               for extra in sorted(on_disk - set(rendered.files)))
    return out
