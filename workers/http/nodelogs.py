"""``/logs/``: the node's log files under ``/var/log``, as the kubelet serves them
(``http.FileServer(http.Dir("/var/log/"))``): a directory is an HTML listing (and a
directory named without its trailing slash is redirected to it), a file is its bytes
(with ranges and conditional requests).

Refused: a path with a ``..`` component (400 ``invalid URL path``), anything that
resolves outside the log directory through a symlink (404), and anything that is not a
regular file or directory (a FIFO would block the reader; 404).
"""

from __future__ import annotations

import html
import mimetypes
import os
import stat
import urllib.parse
from pathlib import Path

from aiohttp import web

NOT_FOUND = "404 page not found\n"
TEXT = "text/plain; charset=utf-8"


class NodeLogs:
    def __init__(self, root: str) -> None:
        self._root = Path(root)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        relative = request.match_info.get("path", "")
        if any(part == ".." for part in relative.split("/")) or "\x00" in relative:
            return web.Response(status=400, text="invalid URL path\n", content_type="text/plain")
        root = os.path.realpath(self._root)
        target = os.path.realpath(os.path.join(root, relative))
        if target != root and not target.startswith(root + os.sep):
            return _not_found()
        try:
            info = os.stat(target)
        except OSError:
            return _not_found()
        if stat.S_ISDIR(info.st_mode):
            if not request.path.endswith("/"):
                raise web.HTTPMovedPermanently(location=request.path.rsplit("/", 1)[-1] + "/")
            return _listing(target)
        if not stat.S_ISREG(info.st_mode):
            return _not_found()
        kind = mimetypes.guess_type(target)[0] or "text/plain"
        return web.FileResponse(target, headers={"Content-Type": _charset(kind)})


def _charset(kind: str) -> str:
    return f"{kind}; charset=utf-8" if kind.startswith("text/") else kind


def _not_found() -> web.Response:
    return web.Response(status=404, text=NOT_FOUND, content_type="text/plain")


def _listing(directory: str) -> web.Response:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return web.Response(status=500, text="Error reading directory\n", content_type="text/plain")
    lines = ['<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n']
    for entry in entries:
        name = entry.name + ("/" if entry.is_dir() else "")
        href = urllib.parse.quote(name)
        lines.append(f'<a href="{html.escape(href)}">{html.escape(name)}</a>\n')
    lines.append("</pre>\n")
    return web.Response(text="".join(lines), content_type="text/html", charset="utf-8")
