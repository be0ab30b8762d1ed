"""Notebooks are replaced whole: a reader never sees one half-written.

The server's saves (the collaboration rooms saving what the agent writes, the host creating
child, fork and clone notebooks) go through the contents manager; the CLI writes its notebook
itself. Both use `core.whole_writes.replacing`.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest
from tornado import web

from prime_agent_lab.core.whole_writes import replace_whole, replacing
from prime_agent_lab.jupyter import atomic_contents

# ------------------------------------------------------------------ the helper


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An empty folder (pytest-jupyter puts its own directories in `tmp_path`)."""
    path = tmp_path / "folder"
    path.mkdir()
    return path


def test_the_new_content_replaces_the_file_and_nothing_else_is_left(folder: Path) -> None:
    target = folder / "a.ipynb"
    target.write_text("old")
    replace_whole(target, b"new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in folder.iterdir()) == ["a.ipynb"]


def test_a_failed_write_leaves_the_old_content_and_no_temporary_file(folder: Path) -> None:
    target = folder / "a.ipynb"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as handle:
        handle.write("half")
        assert target.read_text() == "old"  # a reader meanwhile sees the old file whole
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert sorted(p.name for p in folder.iterdir()) == ["a.ipynb"]


def test_the_file_keeps_its_permissions_and_a_symlink_keeps_pointing_at_it(folder: Path) -> None:
    real = folder / "real.ipynb"
    real.write_text("old")
    real.chmod(0o640)
    link = folder / "link.ipynb"
    link.symlink_to(real)
    replace_whole(link, b"new", follow_symlinks=True)
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_new_file_gets_the_usual_permissions(folder: Path) -> None:
    umask = os.umask(0o022)
    try:
        replace_whole(folder / "new.ipynb", b"{}")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((folder / "new.ipynb").stat().st_mode) == 0o644


# ------------------------------------------------------------------ the server's saves


def big_notebook(marker: int) -> dict[str, Any]:
    """A notebook that takes the contents manager a while to write (validation and JSON)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}  # {'y' * 200}") for i in range(1500)]
    nb.metadata["marker"] = marker
    return dict(nb)


async def test_the_server_never_serves_a_notebook_while_it_is_half_saved(
    jp_serverapp: Any, jp_root_dir: Path
) -> None:
    contents = jp_serverapp.contents_manager
    path = "analysis.agents/part-a.ipynb"
    await contents.save({"type": "directory"}, "analysis.agents")
    saves = 8
    await contents.save({"type": "notebook", "content": big_notebook(0)}, path)
    failures: list[str] = []
    reads = 0
    saving = True

    async def save_repeatedly() -> None:
        nonlocal saving
        try:
            for marker in range(1, saves + 1):
                model = {"type": "notebook", "content": big_notebook(marker)}
                await contents.save(model, path)
        finally:
            saving = False

    async def read_meanwhile() -> None:
        nonlocal reads
        while saving:
            try:
                await contents.get(path, content=True, type="notebook")
            except web.HTTPError as exc:
                failures.append(str(exc))
            reads += 1
            await asyncio.sleep(0)

    await asyncio.gather(save_repeatedly(), read_meanwhile())

    assert reads > saves
    assert failures == []
    final = await contents.get(path, content=True, type="notebook")
    assert final["content"]["metadata"]["marker"] == saves  # no save was moved aside
    left = {p.name for p in (jp_root_dir / "analysis.agents").iterdir()}
    assert left - {".ipynb_checkpoints"} == {"part-a.ipynb"}  # nothing moved aside, no temporary
    assert type(contents).__name__ == "AsyncLargeFileManager"  # the configured class, kept


def test_replacing_saves_are_not_installed_where_file_ids_follow_inodes(folder: Path) -> None:
    """jupyter-server-fileid's LocalFileIdManager knows a file by its inode, which a replaced
    file does not keep; the default (Arbitrary) one knows it by path."""
    from jupyter_server.services.contents.filemanager import AsyncFileContentsManager
    from jupyter_server_fileid.manager import ArbitraryFileIdManager, LocalFileIdManager

    by_inode = LocalFileIdManager(root_dir=str(folder), db_path=str(folder / "local.db"))
    kept = AsyncFileContentsManager(root_dir=str(folder))
    atomic_contents.install(kept, by_inode)
    assert type(kept) is AsyncFileContentsManager

    by_path = ArbitraryFileIdManager(root_dir=str(folder), db_path=str(folder / "arbitrary.db"))
    replaced = AsyncFileContentsManager(root_dir=str(folder))
    atomic_contents.install(replaced, by_path)
    assert isinstance(replaced, atomic_contents.ReplacingWrites)
    assert type(replaced).__name__ == "AsyncFileContentsManager"
