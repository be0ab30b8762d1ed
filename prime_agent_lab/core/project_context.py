"""The project's context files in the system prompt, and which project files are trusted
(docs/project-context.md).

Per model call the runtime asks `section(notebook_path)`: the trusted context files from the
notebook's folder up to the root, outermost first, each under its path, cut to
`project_context_cap` characters (all together to twice that) at a line boundary with the cut
said. Each call only `stat`s the candidates: a file is read again when its stat changed, and
the section is built again when a file or the trusted-files list changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from .project_files import (
    LINKS_OUT,
    FileKind,
    FoundFile,
    Probe,
    is_project_file_name,
    probe,
    read,
)
from .project_trust import TrustedFiles
from .settings import Settings

FileStatus = Literal["used", "cut", "untrusted", "unreadable"]

SHA256_HEX = re.compile(r"[0-9a-f]{64}")

HEADING = "# Project context"
INTRO = (
    "The project's instruction files (AGENTS.md and the like), from the project's root down to "
    "your notebook's folder: the nearest is last and wins where they disagree."
)


@dataclass(frozen=True)
class ProjectFile:
    """A project file as the prompt and `/context` see it."""

    path: str  # relative to the root
    kind: FileKind
    size: int  # bytes
    sha256: str  # "" when unreadable
    status: FileStatus
    why: str  # for untrusted and unreadable files, and what a cut kept
    chars: int  # of the whole file
    text: str = ""  # what enters the prompt (used or cut files), the cut's note included
    content: str = ""  # a context file: what would enter the prompt once trusted (the cut said)
    cut: bool = False  # `content` was cut to the cap
    real: Path | None = None  # where it really is
    link_to: str = ""  # the file it links to, relative to the root ("" when not a link)
    source_text: str = ""  # the file's whole text (never in an answer: `/context` shows content)

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "size": self.size,
            "sha256": self.sha256,
            "status": self.status,
            "why": self.why,
            "chars": self.chars,
            "prompt_chars": len(self.text),
            "link_to": self.link_to,
            "content": self.content,
            "cut": self.cut,
        }


class ProjectFileError(Exception):
    """A trust request that cannot be done: an HTTP status and a message for the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def cut_at_line(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to at most `limit` characters at the end of a line (mid-line only when the
    first line alone is longer); whether it was cut."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    end = head.rfind("\n")
    return (head[: end + 1] if end >= 0 else head), True


def cut_note(kept: int, total: int) -> str:
    return f"[... cut: {total - kept:,} of {total:,} characters; read the file for the rest]"


class ProjectContext:
    """The project files of a root (`root` None: no project, nothing found)."""

    def __init__(self, trusted: TrustedFiles, settings: Callable[[], Settings]) -> None:
        self.trusted = trusted
        self.settings = settings
        self.root: Path | None = None
        self.notify = True  # a `project_untrusted` notice at agent start (the CLI says it itself)
        self._reads: dict[Path, tuple[tuple[int, ...], FoundFile]] = {}
        self._sections: dict[str, tuple[object, str]] = {}

    # ------------------------------------------------------------ reading

    def _found(self, candidate: Probe) -> FoundFile:
        cached = self._reads.get(candidate.absolute)
        if cached is not None and cached[0] == candidate.key:
            return cached[1]
        assert self.root is not None
        found = read(self.root, candidate.path, candidate.kind)
        self._reads[candidate.absolute] = (candidate.key, found)
        return found

    def _probe(self, notebook_path: str) -> list[Probe]:
        return probe(self.root, notebook_path) if self.root is not None else []

    def files(self, notebook_path: str) -> list[ProjectFile]:
        """Every project file from the notebook's folder up to the root (outermost first), with
        its status; context files trusted and readable are capped as the prompt holds them."""
        return self._describe([self._found(c) for c in self._probe(notebook_path)])

    def _describe(self, found: list[FoundFile]) -> list[ProjectFile]:
        cap = self.settings().project_context_cap
        budget = 2 * cap
        described: dict[int, ProjectFile] = {}
        for index in reversed(range(len(found))):  # the nearest file has the budget first
            item = found[index]
            base = self._base(item)
            if base.status == "used" and item.kind == "context":
                limit = min(cap, budget)
                kept, was_cut = cut_at_line(item.text, limit)
                budget -= len(kept)
                if was_cut:
                    note = cut_note(len(kept), len(item.text))
                    text = kept + note + "\n"
                    base = replace(base, status="cut", why=note, text=text, content=text, cut=True)
                else:
                    base = replace(base, text=kept, content=kept, cut=False)
            described[index] = base
        return [described[i] for i in range(len(found))]

    def _base(self, item: FoundFile) -> ProjectFile:
        if item.problem is not None or item.real is None:
            return ProjectFile(
                item.path, item.kind, 0, "", "unreadable", item.problem or LINKS_OUT, 0
            )
        text = item.text
        trusted = self.trusted.is_trusted(item.real, item.digest)
        content, cut = "", False
        if item.kind == "context":
            content, cut = cut_at_line(text, self.settings().project_context_cap)
            if cut:
                content += cut_note(len(content), len(text)) + "\n"
        assert self.root is not None
        link_to = item.real.relative_to(self.root.resolve()).as_posix()
        return ProjectFile(
            item.path,
            item.kind,
            item.size,
            item.digest,
            "used" if trusted else "untrusted",
            "" if trusted else "not trusted yet: trust it in /context (or run --trust-project)",
            len(text),
            content=content,
            cut=cut,
            real=item.real,
            link_to="" if link_to == item.path else link_to,
            source_text=text,
        )

    # ------------------------------------------------------------ the prompt

    def section(self, notebook_path: str) -> str:
        """The `# Project context` section for an agent on `notebook_path` ("" when there is
        nothing trusted to say, or `project_context` is off)."""
        settings = self.settings()
        if not settings.project_context or self.root is None:
            return ""
        candidates = self._probe(notebook_path)
        stamp = (
            tuple((c.absolute, c.key) for c in candidates),
            self.trusted.version(),
            settings.project_context_cap,
        )
        cached = self._sections.get(notebook_path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        files = self._describe([self._found(c) for c in candidates])
        section = render_section(files)
        self._sections[notebook_path] = (stamp, section)
        return section

    # ------------------------------------------------------------ trusting

    def untrusted(self, notebook_path: str) -> list[ProjectFile]:
        return [f for f in self.files(notebook_path) if f.status == "untrusted"]

    def trusted_files(self, notebook_path: str, kind: FileKind = "mcp") -> list[FoundFile]:
        """The readable files of `kind` found for `notebook_path` whose bytes are trusted, with
        those bytes (outermost first): what the MCP part reads of a project's `.mcp.json`."""
        found = [self._found(c) for c in self._probe(notebook_path) if c.kind == kind]
        return [
            f
            for f in found
            if f.real is not None
            and f.data is not None
            and self.trusted.is_trusted(f.real, f.digest)
        ]

    def notice_files(self, notebook_path: str) -> list[ProjectFile]:
        """The untrusted files an agent's start tells the user about: `.mcp.json` files, and
        context files while `project_context` is on."""
        on = self.settings().project_context
        return [f for f in self.untrusted(notebook_path) if f.kind == "mcp" or on]

    def trust_found(self, notebook_path: str) -> list[ProjectFile]:
        """Trust every readable project file found for `notebook_path` as it is now (the CLI's
        `--trust-project`); every file found, as it is then."""
        for candidate in self._probe(notebook_path):
            found = self._found(candidate)
            if found.real is None or found.data is None:
                continue  # unreadable: listed, never trusted
            if not self.trusted.is_trusted(found.real, found.digest):
                self.trusted.trust(found.real, found.digest)
        return self.files(notebook_path)

    def cli_lines(self, notebook_path: str, trust: bool) -> list[str]:
        """What a CLI run says on stderr about the project files, one line each: with `trust`
        (`--trust-project`) every file found, trusted now; without, each untrusted one."""
        if trust:
            return [_cli_line(f) for f in self.trust_found(notebook_path)]
        return [_cli_line(f) for f in self.notice_files(notebook_path)]

    def trust(self, relative: str, digest: str) -> ProjectFile:
        """Trust exactly the bytes of `relative` whose sha256 is `digest` (what `/context`
        showed). 400: not a project file or a path that leaves the root; 404: no such file;
        409: its bytes are not those any more."""
        if self.root is None:
            raise ProjectFileError(409, "this host has no project root")
        path = check_relative(relative)
        if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
            raise ProjectFileError(
                400, "sha256 is not a sha256 digest (64 lowercase hex digits, as /context shows)"
            )
        if not is_project_file_name(path):
            raise ProjectFileError(
                400, f"{path} is not a project context file or .mcp.json: only those are trusted"
            )
        if not (self.root / path).is_symlink() and not (self.root / path).exists():
            raise ProjectFileError(404, f"no file {path} in the project")
        found = read(self.root, path)
        if found.real is None:
            raise ProjectFileError(400, f"{path} {found.problem}: it is not trusted")
        if found.data is None:
            raise ProjectFileError(400, f"{path} cannot be trusted: {found.problem}")
        if found.digest != digest:
            raise ProjectFileError(
                409, f"{path} changed since it was shown: look at it again before trusting it"
            )
        self.trusted.trust(found.real, found.digest)
        return self._base(found)


def check_relative(relative: object) -> str:
    """A path relative to the root, with `/`, that stays inside it (400 otherwise)."""
    if not isinstance(relative, str) or not relative.strip():
        raise ProjectFileError(400, "path must be a file's path relative to the project root")
    if "\\" in relative:
        raise ProjectFileError(400, f"path must use / between folders: {relative[:200]!r}")
    path = relative
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "\0" in path or (parts[0].endswith(":")):
        raise ProjectFileError(400, f"path must stay inside the project root: {relative[:200]!r}")
    clean = "/".join(p for p in parts if p not in ("", "."))
    if not clean:
        raise ProjectFileError(400, "path must name a file")
    return clean


def _cli_line(item: ProjectFile) -> str:
    if item.status == "untrusted":
        return (
            f"prime-agent-lab: project file {item.path} ({item.size:,} bytes) is not trusted "
            "and not used; --trust-project trusts it"
        )
    if item.status == "unreadable":
        return f"prime-agent-lab: project file {item.path} is not used: {item.why}"
    return (
        f"prime-agent-lab: trusted project file {item.path} "
        f"({item.size:,} bytes, sha256 {item.sha256[:12]})"
    )


def describe_untrusted_files(files: list[ProjectFile]) -> str:
    """The chat's `project_untrusted` notice: the files as they stood when the agent started,
    and how to trust them (the notice stays in the log: `/context` says how they stand now)."""
    lines = [
        "When this agent started, this project held instruction files you had not trusted "
        "(someone else's folder, a git clone, or changed since you trusted them); they are not "
        "used while untrusted:"
    ]
    lines += [f"- {f.path} ({f.size:,} bytes)" for f in files]
    lines.append(
        "/context shows how each stands now, its whole content and a Trust button (or "
        "`prime-agent-lab run --trust-project`)."
    )
    return "\n".join(lines)


def repeats_last_notice(entries: Iterable[Mapping[str, Any]], text: str) -> bool:
    """Whether the session's last `project_untrusted` notice listed every file `text` lists
    already (path and size): an agent opened again on a project where nothing new is untrusted
    (nothing changed, or some were trusted since) says nothing."""
    last = ""
    for entry in entries:
        if entry.get("type") == "notice" and entry.get("kind") == "project_untrusted":
            last = str(entry.get("text", ""))
    listed = {line for line in last.splitlines() if line.startswith("- ")}
    return bool(last) and all(line in listed for line in text.splitlines() if line.startswith("- "))


def render_section(files: list[ProjectFile]) -> str:
    used = [f for f in files if f.kind == "context" and f.status in ("used", "cut") and f.text]
    if not used:
        return ""
    parts = [f"\n{HEADING}\n{INTRO}\n"]
    for item in used:
        body = item.text if item.text.endswith("\n") else item.text + "\n"
        parts.append(f"\n## {item.path}\n{body}")
    return "".join(parts)


__all__ = [
    "ProjectContext",
    "ProjectFile",
    "ProjectFileError",
    "check_relative",
    "cut_at_line",
    "describe_untrusted_files",
    "render_section",
    "repeats_last_notice",
]
