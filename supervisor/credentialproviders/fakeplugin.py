"""A ``Plugin`` for tests: answers what it is given, records each image asked, can fail."""

from __future__ import annotations

import threading

from pkletd.supervisor.credentialproviders.execplugin import Plugin, PluginFailed, Response


class FakePlugin(Plugin):
    def __init__(self, response: Response | None = None) -> None:
        self.response = response or Response("Global", None, ())
        self.error: PluginFailed | None = None  # raised instead of answering, when set
        self.asked: list[str] = []
        self.release = threading.Event()  # cleared: each run waits until it is set
        self.release.set()

    def run(self, image: str) -> Response:
        self.asked.append(image)
        self.release.wait(10)
        if self.error is not None:
            raise self.error
        return self.response
