"""The collector's read-only dataset endpoint on its HTTP server (`croft collect` pulls from it).

    GET /dataset/          the index: the dataset directory's own files with sizes and mtimes (JSON)
    GET /dataset/<name>    one of those files; `Range: bytes=a-b` answers 206 with just those bytes

Why HTTP beside /metrics rather than exec and tar (kubectl cp): exec needs tar or cat in the image
and a kubelet streaming the exec, and re-sends a whole file to resume it; this endpoint needs
neither, resumes with Range, and is reached through the API server's pod proxy with the same RBAC
as /metrics (get pods/proxy). Safety: names are matched against the dataset's naming
(`croft.domain.dataset.http.is_served`), never joined as paths; a file is opened relative to the
directory with O_NOFOLLOW and served only when it is a regular file; nothing else is listed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from croft.adapters.http.server import HttpServer, Request, Response
from croft.domain.dataset.http import (
    ByteRange,
    Index,
    IndexEntry,
    Unsatisfiable,
    encode_index,
    is_served,
    make_index,
    parse_range,
)
from croft.domain.dataset.rotation import Naming

PREFIX = "/dataset"
CHUNK_BYTES = 1 << 20
_TEXT = "text/plain; charset=utf-8"


def _not_found() -> Response:
    return Response(404, _TEXT, b"not found\n")


class DatasetEndpoint:
    """Serves the directory of the live file `live_path` (see the module docstring)."""

    def __init__(self, live_path: Path) -> None:
        self._dir = live_path.parent
        self._naming = Naming.for_live(live_path.name)

    def register(self, server: HttpServer) -> None:
        server.route(PREFIX, self.handle)

    def handle(self, request: Request) -> Response:
        rest = request.path[len(PREFIX) :]
        if rest in ("", "/"):
            return Response(200, "application/json", encode_index(self.index()))
        try:
            name = unquote(rest[1:], errors="strict") if rest.startswith("/") else ""
        except UnicodeDecodeError:
            return _not_found()
        if not is_served(name, self._naming):
            return _not_found()
        headers = {key.lower(): value for key, value in request.headers}
        response = self._file(name, headers.get("range"))
        if request.method == "HEAD" and isinstance(response.body, _chunks):
            response.body.close()
            return Response(response.status, response.content_type, [], response.content_length,
                            response.headers)  # fmt: skip
        return response

    def index(self) -> Index:
        """The served files of the directory now (none when it does not exist yet)."""
        entries = []
        try:
            with os.scandir(self._dir) as listing:
                for entry in listing:
                    try:
                        if entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            entries.append(IndexEntry(entry.name, st.st_size, st.st_mtime_ns // 1_000_000))
                    except FileNotFoundError:
                        continue
        except FileNotFoundError:
            pass
        return make_index(self._naming.live, entries)

    def _file(self, name: str, range_header: str | None) -> Response:
        try:
            dir_fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            return _not_found()
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.EISDIR):
                return _not_found()
            raise
        finally:
            os.close(dir_fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return _not_found()
        size = st.st_size
        asked = parse_range(range_header, size)
        common = (("Accept-Ranges", "bytes"), ("Last-Modified-Ms", str(st.st_mtime_ns // 1_000_000)))
        if isinstance(asked, Unsatisfiable):
            os.close(fd)
            return Response(416, _TEXT, b"range not satisfiable\n", headers=((
                "Content-Range", f"bytes */{size}"), *common))  # fmt: skip
        part = asked if asked is not None else ByteRange(0, size - 1)
        body = _chunks(fd, part.start, part.length)
        if asked is None:
            return Response(200, _content_type(name), body, content_length=size, headers=common)
        headers = (("Content-Range", part.content_range(size)), *common)
        return Response(206, _content_type(name), body, content_length=part.length, headers=headers)


def _content_type(name: str) -> str:
    return "application/zstd" if name.endswith(".zst") else "application/x-ndjson"


class _chunks:
    """`length` bytes of `fd` from `offset`, in chunks; closes `fd` when done or closed. A file that
    shrinks meanwhile (a write cut short, truncated away) ends the body early: the client sees fewer
    bytes than Content-Length and retries."""

    def __init__(self, fd: int, offset: int, length: int) -> None:
        self._fd: int | None = fd
        self._offset, self._left = offset, max(length, 0)

    def __iter__(self) -> Iterator[bytes]:
        try:
            while self._left > 0 and self._fd is not None:
                chunk = os.pread(self._fd, min(CHUNK_BYTES, self._left), self._offset)
                if not chunk:
                    break
                self._offset += len(chunk)
                self._left -= len(chunk)
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
